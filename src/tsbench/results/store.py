"""A run directory on disk: its run.json, its rows as a typed table, the consolidated parquet."""

from __future__ import annotations

import fnmatch
from datetime import datetime
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.core import json_input
from tsbench.core.input_budget import Budget, check_parquet
from tsbench.core.provenance import write_json
from tsbench.results.journal import read_journal, read_journal_report
from tsbench.results.schema import COLUMN_NAMES, COLUMNS, JOURNAL, RUN_JSON, SAMPLES


def _typed(record: dict) -> dict:
    row = {k: record.get(k) for k in COLUMN_NAMES}
    stamp = row["finished_at"]
    if isinstance(stamp, str):
        row["finished_at"] = datetime.fromisoformat(stamp)
    for name in ("attributes", "metrics"):
        if isinstance(row[name], str):  # journals written before these became maps
            row[name] = json_input.loads(row[name], f"the {name} of a journal row") or {}
        if isinstance(row[name], dict):
            row[name] = {k: v for k, v in row[name].items() if v is not None and not isinstance(v, (dict, list))}
            if name == "metrics":
                row[name] = {k: float(v) for k, v in row[name].items() if isinstance(v, (int, float))}
    return row


def to_table(records: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([_typed(r) for r in records], schema=COLUMNS)


def consolidate(run_dir: str | Path) -> Path:
    """Rewrite samples.parquet from the journal (temp file + rename)."""
    run_dir = Path(run_dir)
    target = run_dir / SAMPLES
    tmp = target.with_suffix(".parquet.tmp")
    try:
        pq.write_table(to_table(read_journal(run_dir)), tmp)
        tmp.replace(target)
    except BaseException:  # a full disk: the old samples.parquet stays, no half-written temp file
        tmp.unlink(missing_ok=True)
        raise
    return target


def load_samples(run_dir: str | Path) -> pd.DataFrame:
    """A run's rows: from the journal when it exists (it is never behind), else samples.parquet.

    `metrics` and `attributes` come back as dicts, `finished_at` as a UTC timestamp."""
    run_dir = Path(run_dir)
    if (run_dir / JOURNAL).exists():
        table = to_table(read_journal(run_dir))
    elif (run_dir / SAMPLES).exists():  # a run copied from elsewhere may be anyone's: judged before it is read
        check_parquet(run_dir / SAMPLES, str(run_dir / SAMPLES), Budget().scaled())
        table = pq.read_table(run_dir / SAMPLES)
    else:
        table = COLUMNS.empty_table()
    frame = table.to_pandas()
    for name in COLUMN_NAMES:  # a samples.parquet from before a column was added (schema.ADDED_COLUMNS)
        if name not in frame:
            frame[name] = None
    for name in ("metrics", "attributes"):
        if name in frame:
            frame[name] = frame[name].map(lambda pairs: dict(pairs) if pairs is not None else {})
    return frame


def load_run(run_dir: str | Path) -> dict:
    """run.json as a dict; ValueError when it is not a JSON object."""
    info = json_input.read_json(Path(run_dir) / RUN_JSON)
    if not isinstance(info, dict):
        raise ValueError(f"{Path(run_dir) / RUN_JSON} is not a JSON object")
    return info


def update_run(run_dir: str | Path, **changes) -> dict:
    info = load_run(run_dir)
    info.update(changes)
    write_json(Path(run_dir) / RUN_JSON, info)
    return info


def is_run_dir(path: str | Path) -> bool:
    return (Path(path) / RUN_JSON).is_file()


RUN_KIND = "run"  # what core.own_folder records a run dir as
RUN_GROWING = (JOURNAL, "judge_cache*.jsonl")  # appended to while a run runs
_LEGACY_RUN_FILES = (
    RUN_JSON,
    "results.json",
    JOURNAL,
    SAMPLES,
    SAMPLES + ".tmp",
    "judge_cache*.jsonl",
    ".tsbench.lock",
)
_RUN_KEYS = ("run_name", "family", "created_at")


def legacy_run_reason(run_dir: str | Path) -> str | None:
    """None when a run dir written before tsbench listed what it writes is provably a run: it holds
    nothing but a run's own files (regular files, no folders), its run.json is a run's (an object with
    run_name, family, created_at) and every line of its journal is a results row (a torn last line
    aside); else why not, for the refusal."""
    run_dir = Path(run_dir)
    for child in sorted(run_dir.iterdir()):
        if not any(fnmatch.fnmatchcase(child.name, p) for p in _LEGACY_RUN_FILES):
            return f"it holds {child.name}, which no run writes"
        if child.is_symlink() or not child.is_file():
            return f"{child.name} is not a plain file"
    try:
        info = load_run(run_dir)
    except (OSError, ValueError):
        return "its run.json is not a run's"
    if not all(isinstance(info.get(k), str) for k in _RUN_KEYS):
        return "its run.json is not a run's"
    report = read_journal_report(run_dir)
    lines = (run_dir / JOURNAL).read_bytes().count(b"\n") if (run_dir / JOURNAL).exists() else 0
    torn = [n for n in report.bad_lines if n <= lines]  # a line before the last newline that is no row
    if torn:
        return f"line {torn[0]} of its journal is not a results row"
    return None
