"""The AnomalyXL parquet row: schema, streaming writer and reader. Defined once, used everywhere."""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.tasks.anomalyxl.rowplan import RowPlan

SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("split", pa.string()),
        ("regime", pa.string()),
        ("category", pa.string()),
        ("length", pa.int32()),
        ("n_channels", pa.int32()),
        ("channel_names", pa.list_(pa.string())),
        ("values", pa.list_(pa.list_(pa.float32()))),
        ("question", pa.string()),
        ("options", pa.list_(pa.string())),
        ("gold", pa.string()),
        ("plan", pa.string()),
        ("seed", pa.int64()),
        ("source_id", pa.string()),
    ]
)
LIGHT_COLUMNS = [f.name for f in SCHEMA if f.name != "values"]
COMPRESSION = "snappy"
ROW_GROUP_BYTES = 64 * 2**20


@dataclass
class Row:
    id: str
    split: str
    regime: str
    category: str
    length: int
    channel_names: list[str]
    question: str
    options: list[str]
    gold: dict
    plan: dict
    seed: int
    source_id: str
    values: np.ndarray | None = None  # (channels, L) float32; None when read without values

    def gold_text(self) -> str:
        """The gold as a user would see it: without the scorer's private keys."""
        return json.dumps({k: v for k, v in self.gold.items() if not k.startswith("_") and k not in ("channels", "options")})

    @property
    def series(self) -> dict[str, np.ndarray]:
        if self.values is None:
            raise ValueError("row was read without values")
        return dict(zip(self.channel_names, self.values))


def _values_array(blocks: list[np.ndarray]) -> pa.Array:
    """list<list<float32>> from (C, L) blocks without copying through Python objects."""
    flat = pa.array(np.concatenate([b.ravel() for b in blocks]), type=pa.float32())
    inner_offsets, outer_offsets = [0], [0]
    for b in blocks:
        for _ in range(b.shape[0]):
            inner_offsets.append(inner_offsets[-1] + b.shape[1])
        outer_offsets.append(outer_offsets[-1] + b.shape[0])
    inner = pa.ListArray.from_arrays(pa.array(inner_offsets, type=pa.int32()), flat)
    return pa.ListArray.from_arrays(pa.array(outer_offsets, type=pa.int32()), inner)


class RowWriter:
    """Appends rows to one parquet file in row groups of about ROW_GROUP_BYTES of values."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = pq.ParquetWriter(self.path, SCHEMA, compression=COMPRESSION)
        self._pending: list[tuple[RowPlan, np.ndarray]] = []
        self._pending_bytes = 0
        self.rows = 0

    def write(self, row: RowPlan, values: np.ndarray) -> None:
        self._pending.append((row, values))
        self._pending_bytes += values.nbytes
        self.rows += 1
        if self._pending_bytes >= ROW_GROUP_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        rows = [r for r, _ in self._pending]
        columns = {
            "id": [r.id for r in rows],
            "split": [r.split for r in rows],
            "regime": [r.regime for r in rows],
            "category": [r.category for r in rows],
            "length": [r.length for r in rows],
            "n_channels": [len(r.channel_names) for r in rows],
            "channel_names": [r.channel_names for r in rows],
            "values": _values_array([v for _, v in self._pending]),
            "question": [r.question for r in rows],
            "options": [r.options for r in rows],
            "gold": [r.gold_json() for r in rows],
            "plan": [r.plan_json() for r in rows],
            "seed": [r.seed for r in rows],
            "source_id": [r.source_id for r in rows],
        }
        arrays = [columns[f.name] if isinstance(columns[f.name], pa.Array) else pa.array(columns[f.name], type=f.type) for f in SCHEMA]
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=SCHEMA))
        self._pending, self._pending_bytes = [], 0

    def close(self) -> None:
        self.flush()
        self._writer.close()

    def __enter__(self) -> "RowWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _values_to_numpy(cell: pa.ListScalar | pa.Array, n_channels: int, length: int) -> np.ndarray:
    flat = cell.values.flatten() if isinstance(cell, pa.ListScalar) else cell
    return flat.to_numpy(zero_copy_only=False).reshape(n_channels, length)


def _row(rec: dict, values: np.ndarray | None) -> Row:
    return Row(
        id=rec["id"], split=rec["split"], regime=rec["regime"], category=rec["category"],
        length=rec["length"], channel_names=list(rec["channel_names"]), question=rec["question"],
        options=list(rec["options"]), gold=json.loads(rec["gold"]), plan=json.loads(rec["plan"]),
        seed=rec["seed"], source_id=rec["source_id"], values=values,
    )


def iter_rows(path: str | Path, *, with_values: bool = True, ids: set[str] | None = None, batch_size: int = 8) -> Iterator[Row]:
    """Stream rows from an AnomalyXL parquet file, a row group at a time."""
    pf = pq.ParquetFile(path)
    columns = LIGHT_COLUMNS + (["values"] if with_values else [])
    for batch in pf.iter_batches(batch_size=batch_size, columns=columns):
        light = batch.select(LIGHT_COLUMNS).to_pylist()
        for i, rec in enumerate(light):
            if ids is not None and rec["id"] not in ids:
                continue
            values = None
            if with_values:
                values = _values_to_numpy(batch.column("values")[i], rec["n_channels"], rec["length"])
            yield _row(rec, values)


@functools.lru_cache(maxsize=32)
def _locations(path: str, mtime_ns: int) -> dict[str, tuple[int, int]]:
    """row id -> (row group, offset), read from the id column alone."""
    pf = pq.ParquetFile(path)
    found = {}
    for group in range(pf.num_row_groups):
        for offset, row_id in enumerate(pf.read_row_group(group, columns=["id"]).column(0).to_pylist()):
            found[row_id] = (group, offset)
    return found


@functools.lru_cache(maxsize=4)
def _row_group(path: str, mtime_ns: int, group: int) -> pa.Table:
    return pq.ParquetFile(path).read_row_group(group)


def read_row(path: str | Path, row_id: str) -> Row:
    """One row with its values, by id. Episodes load rows one at a time (in any process), so the
    id map and the last few row groups are cached: rows submitted in file order cost one read."""
    path = str(path)
    mtime = os.stat(path).st_mtime_ns
    try:
        group, offset = _locations(path, mtime)[row_id]
    except KeyError:
        raise KeyError(f"no row {row_id!r} in {path}") from None
    table = _row_group(path, mtime, group).slice(offset, 1)
    rec = table.select(LIGHT_COLUMNS).to_pylist()[0]
    return _row(rec, _values_to_numpy(table.column("values")[0], rec["n_channels"], rec["length"]))


def schema_problem(path: str | Path) -> str | None:
    """Why `path` is not an AnomalyXL file (one short phrase), or None when its schema is ours."""
    try:
        found = pq.read_schema(path)
    except Exception:  # pyarrow raises several types for bytes that are not parquet
        return "not a parquet file"
    missing = [f.name for f in SCHEMA if f.name not in found.names]
    if missing:
        return f"lacks the column{'s' if len(missing) > 1 else ''} {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}"
    return None


def read_index(path: str | Path):
    """Every column but `values`, as a pandas DataFrame: cheap even for the paper-size split."""
    return pq.read_table(path, columns=LIGHT_COLUMNS).to_pandas()
