"""The results schema, defined once: eval writes it, train logs rollouts in it, leaderboard reads it.

A run directory holds `run.json` (config and provenance), `samples.jsonl` (the crash-safe journal:
one JSON line per finished (id, epoch), fsync'd; a later line for the same key supersedes an earlier
one, which is how an error row is replaced on resume) and `samples.parquet` (the journal consolidated,
one row per key, rewritten atomically at the end of every run).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

JOURNAL = "samples.jsonl"
SAMPLES = "samples.parquet"
RUN_JSON = "run.json"

COLUMNS = pa.schema(
    [
        ("id", pa.string()),
        ("epoch", pa.int32()),
        ("split", pa.string()),
        ("regime", pa.string()),
        ("category", pa.string()),
        ("length", pa.int32()),
        ("n_channels", pa.int32()),
        ("model", pa.string()),
        ("harness", pa.string()),
        ("depth", pa.int32()),
        ("final_message", pa.string()),
        ("parsed_answer", pa.string()),  # JSON text of what the scorer parsed, null if nothing parsed
        ("gold", pa.string()),  # JSON text
        ("score", pa.float64()),  # null on error rows: an error is never a silent 0
        ("valid", pa.bool_()),  # the answer parsed and passed the category's type check
        ("metrics", pa.string()),  # JSON text: secondary metrics
        ("turns", pa.int32()),
        ("code_cells", pa.int32()),
        ("sub_calls", pa.int32()),
        ("forced_final", pa.bool_()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("sub_call_tokens", pa.int64()),
        ("latency_s", pa.float64()),
        ("cost_usd", pa.float64()),
        ("error_type", pa.string()),  # null when the episode finished; else rate_limit, server, timeout, sandbox, ...
        ("error", pa.string()),
        ("transcript", pa.string()),  # JSON text: messages, code, observations, image references
        ("finished_at", pa.string()),
    ]
)
COLUMN_NAMES = [f.name for f in COLUMNS]


def key_of(record: dict) -> tuple[str, int]:
    return (record["id"], int(record["epoch"]))


class Journal:
    """Append-only JSONL of finished rows: each line is flushed and fsync'd before the next starts."""

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / JOURNAL
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = None

    def append(self, record: dict) -> None:
        missing = set(COLUMN_NAMES) - set(record)
        if missing:
            raise ValueError(f"result record lacks columns {sorted(missing)}")
        if self._fh is None:
            self._fh = open(self.path, "a", encoding="utf-8")
        self._fh.write(json.dumps({k: record[k] for k in COLUMN_NAMES}, ensure_ascii=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_journal(run_dir: str | Path) -> list[dict]:
    """Latest record per (id, epoch), in first-seen order; a torn last line (kill -9) is skipped."""
    path = Path(run_dir) / JOURNAL
    if not path.exists():
        return []
    latest: dict[tuple[str, int], dict] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            latest[key_of(record)] = record
    return list(latest.values())


def to_table(records: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{k: r.get(k) for k in COLUMN_NAMES} for r in records], schema=COLUMNS)


def consolidate(run_dir: str | Path) -> Path:
    """Rewrite samples.parquet from the journal (temp file + rename)."""
    run_dir = Path(run_dir)
    target = run_dir / SAMPLES
    tmp = target.with_suffix(".parquet.tmp")
    pq.write_table(to_table(read_journal(run_dir)), tmp)
    tmp.replace(target)
    return target


def load_samples(run_dir: str | Path) -> pd.DataFrame:
    """A run's rows: from the journal when it exists (it is never behind), else from samples.parquet."""
    run_dir = Path(run_dir)
    if (run_dir / JOURNAL).exists():
        return to_table(read_journal(run_dir)).to_pandas()
    return pq.read_table(run_dir / SAMPLES).to_pandas()


def load_run(run_dir: str | Path) -> dict:
    return json.loads((Path(run_dir) / RUN_JSON).read_text())
