"""A run directory on disk: its run.json, its rows as a typed table, the consolidated parquet."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.core import json_input
from tsbench.core.input_budget import Budget, check_parquet
from tsbench.core.provenance import write_json
from tsbench.results.journal import read_journal
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
