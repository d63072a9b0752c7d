"""results.json (lm-eval style), the leaderboard reading it, --report-to, and the documented schema."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tsbench import results as schema
from tsbench.core.config import build
from tsbench.core.provenance import write_json
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.leaderboard.load import load_results, read_summary
from tsbench.results.schema_doc import render
from tsbench.tasks.anomalyxl import labels as lb

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tracked_run(small_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "tracked"
    cfg = build(
        EvalConfig,
        dict(
            model="scripted/zscore",
            harness="single-pass-text",
            data=[str(small_data)],
            limit_per_category=2,
            regime="coarse",
            categories=[lb.PRESENCE, lb.INDICATOR],
            out=str(out),
            report_to=["tensorboard", "wandb"],
        ),
    )
    return run_eval(cfg)


def test_results_json_has_scores_intervals_counts_usage_config_and_dataset(tracked_run):
    results = json.loads((tracked_run / schema.RESULTS_JSON).read_text())
    samples = schema.load_samples(tracked_run)
    blocks = results["summary"]
    assert [b["category"] for b in blocks["categories"]] == [lb.PRESENCE, lb.INDICATOR]
    for block, rows in [(blocks["overall"], samples)] + [
        (b, samples[samples["category"] == b["category"]]) for b in blocks["categories"]
    ]:
        assert block["n"] == len(rows) and block["errors"] == 0 and block["rows"] == len(rows)
        assert block["valid"] + block["invalid"] + block["cut"] + block["errors"] == len(rows)
        assert block["mean"] == pytest.approx(rows["score"].mean())
        low, high = block["ci95"]
        assert low <= block["mean"] <= high
        assert block["input_tokens"] == rows["input_tokens"].sum() and "cost_usd" in block
    assert results["config"]["limit_per_category"] == 2 and results["config"]["harness"] == "single-pass-text"
    assert results["dataset"]["key"].startswith("anomalyxl/seed42/test/") and results["dataset"]["file_sha256"]
    assert results["expected_samples"] == results["finished_samples"] == len(samples) and results["complete"]
    assert results["package_versions"]["tsbench"] and "git_commit" in results and results["updated_at"]


def test_leaderboard_reads_results_json_and_cross_checks_it(tracked_run, tmp_path):
    rows, [info], warnings = load_results([tracked_run])
    assert info.summary == json.loads((tracked_run / schema.RESULTS_JSON).read_text())["summary"]
    assert not [w for w in warnings if "results.json" in w]
    assert read_summary(tracked_run)["overall"]["n"] == len(rows)
    # A results.json that no longer matches the rows (a run narrowed by a later --limit, say) is reported.
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in (schema.RUN_JSON, schema.SAMPLES):
        (copy / name).write_bytes((tracked_run / name).read_bytes())
    results = json.loads((tracked_run / schema.RESULTS_JSON).read_text())
    results["summary"]["overall"].update(rows=1, mean=0.123)
    write_json(copy / schema.RESULTS_JSON, results)
    _, _, warnings = load_results([copy])
    assert any("results.json disagrees" in w and "1 rows against" in w for w in warnings), warnings
    # Without results.json the summary is computed from the rows, the same numbers.
    (copy / schema.RESULTS_JSON).unlink()
    assert read_summary(copy)["overall"]["mean"] == pytest.approx(info.summary["overall"]["mean"])


def test_report_to_tensorboard_and_wandb_offline(tracked_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    results = json.loads((tracked_run / schema.RESULTS_JSON).read_text())
    events = EventAccumulator(str(tracked_run / "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"progress/done", "progress/score", f"progress/score/{lb.PRESENCE}", "results/overall/mean"} <= set(tags)
    done = [e.value for e in events.Scalars("progress/done")]
    assert done == sorted(done) and done[-1] == results["summary"]["overall"]["rows"]
    assert events.Scalars("results/overall/mean")[-1].value == pytest.approx(results["summary"]["overall"]["mean"])
    [offline] = list((tracked_run / "wandb").glob("offline-run-*/run-*.wandb"))
    data = offline.read_bytes()
    assert b"results/overall/mean" in data and b"progress/score" in data and b"single-pass-text" in data


def test_results_schema_doc_is_generated_from_the_schema():
    doc = (ROOT / "docs" / "results-schema.md").read_text()
    assert doc == render(), (
        "docs/results-schema.md is stale: python -m tsbench.results.schema_doc > docs/results-schema.md"
    )
    for field in schema.COLUMNS:
        assert f"| `{field.name}` | `{field.type}` |" in doc
        assert field.metadata[b"description"].decode().replace("|", "\\|") in doc


def test_samples_parquet_carries_the_field_descriptions(tracked_run):
    written = pq.read_schema(tracked_run / schema.SAMPLES)
    assert written.names == schema.COLUMN_NAMES
    for field in schema.COLUMNS:
        assert written.field(field.name).metadata[b"description"] == field.metadata[b"description"]


def test_results_json_reads_as_lm_eval_writes_it(tracked_run):
    """lm-eval's layout (lm_eval 0.4's `results[task]["<metric>,none"]` and `"<metric>_stderr,none"`,
    groups, versions, higher_is_better, n-samples), read back by lm-eval's own `make_table` when
    lm_eval is installed ([dev]); tsbench's numbers under their own keys."""
    results = json.loads((tracked_run / schema.RESULTS_JSON).read_text())
    tasks = results["tasks"]
    assert (
        set(results["results"]) == set(tasks) == {f"anomalyxl/{lb.PRESENCE}", f"anomalyxl/{lb.INDICATOR}", "anomalyxl"}
    )
    for name, task in tasks.items():
        entry = results["results"][name]
        primary = task["primary"]
        assert entry[f"{primary},none"] == task[primary] and f"{primary}_stderr,none" in entry
        assert results["higher_is_better"][name][primary] is True and results["versions"][name]
        assert results["n-samples"][name]["effective"] == entry["sample_len"] == task["n"]
        assert not {k for k in entry if k not in ("alias", "sample_len") and "," not in k}  # nothing else in there
    presence = results["results"][f"anomalyxl/{lb.PRESENCE}"]
    assert (
        presence["macro_f1_stderr,none"] == "N/A"
        and presence["accuracy,none"] == tasks[f"anomalyxl/{lb.PRESENCE}"]["accuracy"]
    )
    overall = results["results"]["anomalyxl"]
    assert overall["score_stderr,none"] == pytest.approx(tasks["anomalyxl"]["score_stderr"])
    assert results["groups"]["anomalyxl"] == overall
    assert set(results["group_subtasks"]["anomalyxl"]) == {f"anomalyxl/{lb.PRESENCE}", f"anomalyxl/{lb.INDICATOR}"}
    assert results["summary"]["overall"]["n"] == tasks["anomalyxl"]["n"]
    lm_eval_utils = pytest.importorskip("lm_eval.utils", reason="lm-eval is in [dev]: pip install lm-eval")
    table = lm_eval_utils.make_table(results)
    for name, task in tasks.items():
        value = task["primary"]
        assert f"|{value}" in table.replace(" ", "") and name.split("/")[-1] in table
    assert f"{overall['score,none']:.4f}" in table and f"{overall['score_stderr,none']:.4f}" in table
    assert "anomalyxl" in lm_eval_utils.make_table(results, "groups")


@pytest.fixture(scope="module")
def mixed_run(small_data, tmp_path_factory) -> Path:
    """Both regimes: multiple-choice columns (accuracy, macro-F1) beside precise ones (IoU, ...)."""
    out = tmp_path_factory.mktemp("runs") / "mixed"
    cfg = build(
        EvalConfig,
        dict(model="scripted/zscore", harness="single-pass-text", data=[str(small_data)], limit=24, out=str(out)),
    )
    return run_eval(cfg)


def test_lm_eval_recomputes_our_group_number_from_our_subtasks(mixed_run):
    """lm-eval's own group aggregation (aggregate_subtask_metrics, weighted by sample_len, as a group YAML's
    `aggregate_metric_list` asks) over results.json gives the group number we state: every subtask
    carries the group's metric and its stderr (before: the multiple-choice ones carried only accuracy and
    macro-F1, and lm-eval's group was the mean of the others)."""
    metrics = pytest.importorskip("lm_eval.api.metrics", reason="lm-eval is in [dev]: pip install lm-eval")
    results = json.loads((mixed_run / schema.RESULTS_JSON).read_text())
    [(group, subtasks)] = [(g, s) for g, s in results["group_subtasks"].items() if s]
    tasks = results["tasks"]
    assert any(tasks[name].get("macro_f1") is not None for name in subtasks), "no multiple-choice subtask"
    assert any(tasks[name].get("macro_f1") is None for name in subtasks), "no precise subtask"
    [declared] = results["configs"][group]["aggregate_metric_list"]
    key, stderr_key = f"{declared['metric']},none", f"{declared['metric']}_stderr,none"
    entries = [results["results"][name] for name in subtasks]
    assert all(key in e and stderr_key in e for e in entries), "a subtask lacks the group's metric or its stderr"
    values, sizes = [e[key] for e in entries], [e["sample_len"] for e in entries]
    ours = results["groups"][group][key]
    assert metrics.aggregate_subtask_metrics(values, sizes, declared["weight_by_size"]) == pytest.approx(ours)
    assert ours == pytest.approx(schema.load_samples(mixed_run)["score"].mean())
    assert len(set(values)) > 1  # subtasks that differ, so leaving one out would move the group
    stderrs = [e[stderr_key] for e in entries]
    if "N/A" not in stderrs:  # lm-eval's pooled stderr is within-subtask only: close to ours, not equal
        pooled = metrics.pooled_sample_stderr(stderrs, sizes)
        assert 0 < pooled <= results["groups"][group][stderr_key] * 1.5
