"""`tsbench memory build`: a memory bank from the successful episodes of finished eval runs.

A run dir holds samples.parquet (or its journal samples.jsonl) and run.json, whose config names
the family and the dataset files the run read; the series themselves come from those files
(never copied into results), read through the run's task family (`index` and `load`), so any
family whose rows hold a series builds a bank. Which episodes become records (`admission`):

* "timeclaw" (default), as the authors' train mode fills its bank (`MemoryBank.log` at every
  episode whose call did not fail): every finished episode, whatever its score, the first one per
  task id in completion order (runs in the order given); error rows never;
* "successful", the paper's "successful analytical trace" (§3.4): rows scoring >= min_score (0.5),
  the best-scoring episode per task id across the runs.

Each admitted row becomes one record: psi from the series (the fingerprint `variant`, "timeclaw"
by default, recorded in the bank), phi from the descriptor of the task the harness saw, the
trajectory from the transcript without any assistant text, and a rationale and summary built from
it. A row without a series (a file-only task) has no fingerprint and is left out.

The rationale is the paper's (§3.4, Appendix I): with `rationale_model`, the model is shown each
training task, its trajectory and the correct answer (the family's `sft_target` of the gold) and
writes the transferable explanation (the contextual cue and the analytical rule) in a
<context_to_action> block, which is what the bank stores. Without one, a template naming the tools
used stands in (and the summary says so).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from tsbench.results import is_run_dir, load_run, load_samples
from tsbench.results.records import transcript_events
from tsbench.tasks import get_taskset
from tsbench.tasks.base import Sample, SampleRef, TaskFamily
from tsbench.timeclaw.bank import COLUMNS, MemoryBank, make_rationale, make_summary, trajectory_steps
from tsbench.timeclaw.embed import DEFAULT_EMBEDDER, context_descriptor, get_embedder
from tsbench.timeclaw.fingerprint import DEFAULT_VARIANT, VARIANTS, fingerprint, series_lengths

DEFAULT_MIN_SCORE = 0.5
ADMISSIONS = ("timeclaw", "successful")
log = logging.getLogger(__name__)


def _as_list(from_runs) -> list[Path]:
    if isinstance(from_runs, (str, Path)):
        return [Path(from_runs)]
    return [Path(p) for p in from_runs]


def read_run_samples(run_dir: str | Path) -> pd.DataFrame:
    """A run's rows through the one results reader (journal first, torn lines skipped)."""
    run_dir = Path(run_dir)
    if not is_run_dir(run_dir):
        raise FileNotFoundError(f"{run_dir} is not a results run dir (no run.json)")
    return load_samples(run_dir)


def refuse_test_split(samples: pd.DataFrame, run_dir, allow: bool) -> None:
    """Learning from test-split episodes contaminates the benchmark: refused unless asked for."""
    if not allow and "split" in samples and (samples["split"] == "test").any():
        raise ValueError(
            f"{run_dir} holds test-split episodes; learning from them contaminates the benchmark "
            "(evaluate on --split train or val, or pass --include-test-split)"
        )


def _runs(from_runs, include_test_split: bool) -> Iterator[tuple[Path, pd.DataFrame]]:
    """Each run dir with its rows (test-split rows refused unless asked for)."""
    for run_dir in _as_list(from_runs):
        samples = read_run_samples(run_dir)
        refuse_test_split(samples, run_dir, include_test_split)
        yield run_dir, samples


def run_data_files(run_dir: str | Path, data: Iterable[str] | None = None) -> list[Path]:
    """The dataset parquet files a run read (from run.json), or `data` when given."""
    if data:
        return [Path(d) for d in data]
    info = load_run(run_dir)
    files = info.get("config", {}).get("data") or info.get("dataset", {}).get("paths") or []
    if not files:
        raise ValueError(f"{run_dir}/run.json names no dataset files; pass data=[...]")
    return [Path(f) for f in files]


def successful_rows(from_runs, min_score: float, include_test_split: bool = False) -> pd.DataFrame:
    """Finished rows scoring >= min_score across the runs, best episode per id (earliest on ties)."""
    frames = []
    for run_dir, samples in _runs(from_runs, include_test_split):
        if "error_type" in samples:
            samples = samples[samples["error_type"].isna()]
        samples = samples[samples["score"].notna() & (samples["score"] >= min_score)].copy()
        samples["run"] = str(run_dir)
        frames.append(samples)
    if not frames:
        return pd.DataFrame()
    rows = pd.concat(frames, ignore_index=True)
    if rows.empty:
        return rows
    rows = rows.sort_values(["score", "epoch"], ascending=[False, True], kind="stable")
    return rows.drop_duplicates("id", keep="first").reset_index(drop=True)


def completion_order(samples: pd.DataFrame) -> pd.DataFrame:
    """A run's rows in the order its episodes finished (`finished_at`; the journal's order on ties)."""
    if "finished_at" not in samples or samples.empty:
        return samples
    return samples.sort_values("finished_at", kind="stable", na_position="last")


def admit_timeclaw(episodes: pd.DataFrame) -> pd.DataFrame:
    """The authors' memory admission on episodes in completion order (pure): each one whose call did
    not fail (no error_type), the first per id, whatever its score."""
    if episodes.empty:
        return episodes
    if "error_type" in episodes:
        episodes = episodes[episodes["error_type"].isna()]
    return episodes.drop_duplicates("id", keep="first").reset_index(drop=True)


def admitted_rows(
    from_runs, admission: str = "timeclaw", min_score: float | None = None, include_test_split: bool = False
) -> pd.DataFrame:
    """The rows that become bank records under `admission` (see the module doc), with their run."""
    if admission not in ADMISSIONS:
        raise ValueError(f"unknown admission {admission!r} (one of {', '.join(ADMISSIONS)})")
    if admission == "successful":
        return successful_rows(from_runs, DEFAULT_MIN_SCORE if min_score is None else min_score, include_test_split)
    if min_score is not None:
        raise ValueError("min_score applies to admission='successful' (the 'timeclaw' rule admits every finished row)")
    frames = [completion_order(samples).assign(run=str(run)) for run, samples in _runs(from_runs, include_test_split)]
    return admit_timeclaw(pd.concat(frames, ignore_index=True)) if frames else pd.DataFrame()


def run_family(run_dir: str | Path) -> TaskFamily:
    """The task family a run played (run.json's config; AnomalyXL for runs that predate the field)."""
    info = load_run(run_dir)
    return get_taskset(info.get("config", {}).get("family") or info.get("dataset", {}).get("family") or "anomalyxl")


def load_samples_by_id(family: TaskFamily, files: Iterable[Path], ids: set[str]) -> dict[str, Sample]:
    """id -> Sample (values included) for the wanted ids, found through the family's index."""
    files = [Path(f) for f in files]
    for path in files:
        if not path.exists():
            raise FileNotFoundError(f"dataset file not found: {path} (pass data=[...] if it moved)")
    index = family.index(files, {})
    index = index[index["id"].isin(ids)].drop_duplicates("id")
    return {str(i): family.load(SampleRef(family.name, str(p), str(i))) for i, p in zip(index["id"], index["path"])}


def build_memory(
    from_runs,
    min_score: float | None = None,
    out: str | Path = "banks/memory.parquet",
    *,
    admission: str = "timeclaw",
    fingerprint_variant: str = DEFAULT_VARIANT,
    embedder: str = DEFAULT_EMBEDDER,
    data: list[str] | None = None,
    append: bool = False,
    include_test_split: bool = False,
    rationale_model=None,
    rationale_max_tokens: int | None = 512,
) -> Path:
    """Write a bank of the runs' successful episodes to `out`; returns its path.

    `from_runs`: one run dir or several. `admission`: "timeclaw" (every finished episode) or
    "successful" (score >= `min_score`, 0.5 unless given). `fingerprint_variant`: "timeclaw" or
    "paper" (fingerprint.py). `embedder`: "minilm" (offline, default), "openai/<model>" or "none". `data`: dataset files to read the series from, when the runs' recorded paths moved.
    `append`: add to an existing bank at `out` (a task id already there is replaced).
    `rationale_model`: a ChatModel shown each task with its correct answer, whose explanation is stored
    as the record's rationale (see the module doc).
    """
    if fingerprint_variant not in VARIANTS:
        raise ValueError(f"unknown fingerprint variant {fingerprint_variant!r} (one of {', '.join(VARIANTS)})")
    runs = _as_list(from_runs)
    chosen = admitted_rows(runs, admission, min_score, include_test_split)
    records = []
    if not chosen.empty:
        for run_dir, group in chosen.groupby("run", sort=False):
            family = run_family(run_dir)
            found = load_samples_by_id(family, run_data_files(run_dir, data), set(group["id"]))
            missing = sorted(set(group["id"]) - set(found))
            if missing:
                raise ValueError(f"{len(missing)} task(s) of {run_dir} are not in its dataset files, e.g. {missing[0]}")
            for row in group.to_dict("records"):
                sample = found[row["id"]]
                if sample.task.values is None or not sample.task.length:
                    log.warning("%s: row %s has no series to fingerprint; left out of the bank", run_dir, row["id"])
                    continue
                rationale = None
                if rationale_model is not None:
                    answer = family.sft_target(sample.task.category, sample.gold)
                    rationale = write_rationale(rationale_model, row, sample, answer, rationale_max_tokens)
                records.append(
                    _record(row, sample, family.memory_key(sample), str(run_dir), rationale, fingerprint_variant)
                )
    encoder = get_embedder(embedder)
    if records and encoder is not None:
        vectors = encoder.embed([r["descriptor"] for r in records])
        for record, vector in zip(records, vectors):
            record["phi"] = [float(v) for v in vector]
            record["embedder"] = encoder.name
    out = Path(out)
    frame = pd.DataFrame(records, columns=COLUMNS)
    if append and out.is_file():
        old = MemoryBank.load(out)
        if len(old) and len(frame) and old.embedder not in ("none", frame["embedder"].iloc[0]):
            raise ValueError(f"{out} was built with {old.embedder}; rebuild it rather than mix encoders")
        if len(old) and len(frame) and old.fingerprint_variant != fingerprint_variant:
            raise ValueError(
                f"{out} holds {old.fingerprint_variant!r} fingerprints; rebuild it rather than mix variants"
            )
        frame = pd.concat([old.records[~old.records["id"].isin(set(frame["id"]))], frame], ignore_index=True)
    return MemoryBank(frame).save(out)


RATIONALE_PROMPT = """You solved the time-series task below during memory building. You are now shown its
correct answer. Explain, in two to four sentences, the contextual cue and the analytical rule that lead
from this task's context and series to the correct answer, phrased so that it transfers to similar tasks
(e.g. "a snowstorm scenario implies a sharp rise in electricity demand"). Do not restate the answer's
numbers. Reply with the explanation inside <context_to_action> ... </context_to_action>.

Task:
{question}

Your analysis steps (tool calls and observations):
{steps}

Correct answer:
{answer}"""
_BLOCK = re.compile(r"<\s*context_to_action\s*>(.*?)(?:<\s*/\s*context_to_action\s*>|$)", re.S | re.I)


def write_rationale(model, result: dict, sample: Sample, answer: str, max_tokens: int | None = 512) -> str:
    """The model's <context_to_action> explanation of one solved task, shown its correct answer."""
    from tsbench.models.base import Message
    from tsbench.timeclaw.bank import _step_text

    steps = trajectory_steps(transcript_events(result))
    shown = "\n".join(f"- {_step_text(step, 200)}" for step in steps[:12]) or "- (answered without tools)"
    prompt = (
        RATIONALE_PROMPT.replace("{question}", sample.task.question[:6000])
        .replace("{steps}", shown)
        .replace("{answer}", answer[:2000])
    )
    reply = model.generate([Message("user", prompt)], max_tokens=max_tokens, task=sample.task.info()).text or ""
    found = _BLOCK.search(reply)
    text = (found.group(1) if found else reply).strip()
    return " ".join(text.split())[:1500]


def _record(
    result: dict, sample: Sample, key: str, run: str, rationale: str | None = None, variant: str = DEFAULT_VARIANT
) -> dict:
    """One bank record from a results row and the sample it played; the descriptor is built from
    the task exactly as `recall` builds a query's, so build and retrieval embed the same text."""
    task = sample.task
    steps = trajectory_steps(transcript_events(result))
    score = float(result["score"])
    n_channels = len(task.channel_names)
    if not rationale:
        rationale = make_rationale(task.category, n_channels, task.length, score, steps)
    return {
        "id": task.row_id,
        "source_id": key,
        "family": task.category,
        "regime": task.regime,
        "length": task.length,
        "n_channels": n_channels,
        "descriptor": context_descriptor(
            task.category,
            task.regime,
            task.channel_names,
            task.question,
            task.options,
            descriptor=task.meta.get("memory_descriptor"),
        ),
        "psi": [
            float(v)
            for v in fingerprint(
                task.values, task.meta.get("time_s"), lengths=series_lengths(task.values, task.meta), variant=variant
            )
        ],
        "phi": None,
        "embedder": "none",
        "fingerprint": variant,
        "trajectory": json.dumps(steps, ensure_ascii=False),
        "rationale": rationale,
        "summary": make_summary(task.category, n_channels, task.length, score, rationale, steps),
        "score": score,
        "model": result.get("model"),
        "harness": result.get("harness"),
        "run": run,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
