"""docs/results-schema.md, written from the schema itself so the two never drift.

    python -m tsbench.results.schema_doc > docs/results-schema.md

tests/test_results_schema_doc.py fails when the file differs from what this prints.
"""

from __future__ import annotations

from tsbench.results.schema import ADDED_COLUMNS, COLUMNS, JOURNAL, JSON_COLUMNS, RESULTS_JSON, RUN_JSON, SAMPLES

# results.json (lm-eval's layout, results/results_json.py): what eval/runner.py writes at the end of every run.
LM_EVAL_FIELDS = {
    "results": "keyed by task as lm-eval's: `<family>/<category>` and `<family>` (overall); each entry holds "
    "`alias`, `sample_len` (scored rows) and, per metric, `<metric>,none` and `<metric>_stderr,none` "
    '(lm-eval\'s `metric,filter` keys; "N/A" where there is no standard error, as for macro-F1). Metrics: '
    "`macro_f1` and `accuracy` (multiple choice), the column's own mean (e.g. `iou`) where it has one, else `score`",
    "groups, group_subtasks": "the family as the group of its category tasks",
    "higher_is_better": "per task and metric",
    "n-samples": "per task: `original` (rows run, errors included) and `effective` (rows scored)",
    "configs, versions, n-shot": "per task: its metric list; the tsbench version; 0 (no few-shot examples)",
    "config": "every setting of the run (the flat [eval] table: model, limit, seed, ...)",
    "git_hash, date": "the commit (7 characters) and the Unix time the file was written",
}
RESULTS_FIELDS = {
    "run_name": "the run directory's name",
    "family, model, harness": "what was evaluated, as run.json says",
    "reference": "what a reference policy knows that a model does not; null for models",
    "complete": "every selected (id, epoch) has a finished row",
    "expected_samples, finished_samples, error_samples": "rows selected, finished, and errors among them",
    "dataset": "the dataset's identity: family, seed, split, key (content hash), paths, file_sha256",
    "summary.categories[]": "one block per category, in the family's table order (below)",
    "summary.overall": "the same block over every row",
    "tasks": "keyed by task as lm-eval's results: `<family>/<category>` and `<family>` (overall), each with "
    "`primary` (the paper's metric: `macro_f1` for multiple choice, else the column's mean metric or `score`), "
    "its value and `_stderr` (a mean metric also `_n`, the rows it counts), `accuracy` (multiple choice), "
    "`n` and `errors`; where the benchmark aggregates its own way, `protocol` names the rule and "
    "`lower_is_better` the direction (CiK: `rcrps` capped at 5 and weighted by task weight, also on the "
    "family's overall entry)",
    "package_versions, git_commit, updated_at": "provenance",
}
BLOCK_FIELDS = {
    "rows": "rows in the cell, errors included",
    "n": "scored rows (errors never enter a mean)",
    "valid": "rows whose answer parsed and passed the type check",
    "invalid": "rows with no usable answer (scored 0): `answer_error` says why",
    "cut": "rows with no usable answer because the token cap stopped a reply (scored 0)",
    "errors": "error rows (the episode failed: never scored); valid + invalid + cut + errors = rows",
    "mean, stderr": "mean score and its standard error",
    "ci95": "95 % percentile-bootstrap interval of the mean (1000 resamples, seed 0)",
    "small_n": "fewer than 10 scored rows: the interval is rough",
    "valid_rate": "share of scored rows whose answer parsed and passed the type check",
    "mean_turns, forced_final_rate": "episode shape",
    "input_tokens, output_tokens": "token sums",
    "cost_usd, cost_known_rows": "API dollars over the rows whose price is known",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")  # a table cell ends at a bare pipe


def _table(rows: dict[str, str], head: tuple[str, str]) -> list[str]:
    return [f"| {head[0]} | {head[1]} |", "|---|---|", *[f"| `{k}` | {v} |" for k, v in rows.items()]]


def render() -> str:
    lines = [
        "# Results schema",
        "",
        "<!-- Written by `python -m tsbench.results.schema_doc`; edit src/tsbench/results/schema.py, not this file. -->",
        "",
        "A run directory `results/<run>/` holds:",
        "",
        f"- `{RUN_JSON}`: the run's config and provenance (model, harness, dataset identity, versions, git commit).",
        f"- `{RESULTS_JSON}`: the summary (below), in lm-eval's layout.",
        f"- `{JOURNAL}`: the crash-safe journal, one JSON line per finished (id, epoch); a later line supersedes.",
        f"- `{SAMPLES}`: the journal consolidated, one row per (id, epoch), typed as below. Each field's "
        "description is also in the parquet schema (field metadata `description`).",
        "",
        "## samples.parquet",
        "",
        "| column | type | description |",
        "|---|---|---|",
        *[f"| `{f.name}` | `{f.type}` | {_cell(f.metadata[b'description'].decode())} |" for f in COLUMNS],
        "",
        "TimeSage-EV rows keep their judge's accounting in `metrics`: `judge_calls`, `judge_cache_hits`, "
        "`judge_errors`, `judge_unparsed`, `judge_tokens` (tokens of the uncached judge calls) and `judge_cost_usd` "
        "(absent when the judge model has no known price), apart from the agent's `input_tokens`, `output_tokens` "
        "and `cost_usd`.",
        "",
        f"JSON-text columns ({', '.join(f'`{c}`' for c in JSON_COLUMNS)}) hold values whose shape differs per "
        "family or category. An error row has `error_type` set and `score` null: an error is never a 0.",
        "",
        "An error row keeps what its episode spent before the failure (turns, tokens, cost, transcript and "
        "`calls`, whose last entry is the failing call), so cost sums include it. `cost_usd` is null when "
        "no price is known: OpenAI's list prices apply only at api.openai.com, elsewhere only a price the user "
        'gave (`--price IN,OUT`). A call whose server sent no usage has `usage` "missing" and a null cost; '
        'one whose counts were no finite non-negative integers has `usage` "invalid", `usage_rejected` (what '
        "the server sent), tokens of our own estimate (what the caps counted) and a null cost, and its row "
        "the attribute `usage_invalid_calls`.",
        "",
        f"Columns added after the first schema ({', '.join(f'`{c}`' for c in ADDED_COLUMNS)}) are null in rows "
        "written before them; such runs load unchanged.",
        "",
        "Reading it: `tsbench.results.load_samples(run_dir)` (maps as dicts), or `pandas.read_parquet`. "
        "`tsbench export RUN --format hf|csv|inspect` writes it for other tools.",
        "",
        f"## {RESULTS_JSON}",
        "",
        "lm-eval's keys, as `lm_eval` 0.4 writes them (its `lm_eval.utils.make_table(results)` prints the file):",
        "",
        *_table(LM_EVAL_FIELDS, ("key", "meaning")),
        "",
        "tsbench's own keys:",
        "",
        *_table(RESULTS_FIELDS, ("key", "meaning")),
        "",
        "Each block (a category's, or `overall`):",
        "",
        *_table(BLOCK_FIELDS, ("key", "meaning")),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(), end="")
