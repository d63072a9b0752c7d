"""The parquet row every recording family writes: the generic columns the eval runner reads
(id, category, regime, length, n_channels, question, options, gold), the values as the series,
and where the row came from. Written in row groups of bounded size, read back one row by id.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("split", pa.string()),
        ("category", pa.string()),
        ("regime", pa.string()),
        ("length", pa.int32()),
        ("n_channels", pa.int32()),
        ("channel_names", pa.list_(pa.string())),
        ("values", pa.list_(pa.list_(pa.float32()))),
        ("question", pa.string()),
        ("options", pa.list_(pa.string())),
        ("gold", pa.string()),  # JSON, read only by the scorer
        ("meta", pa.string()),  # JSON facts a prompt may state (sampling rate, time axis); never gold
        ("source", pa.string()),  # JSON: source file, offsets, labels as read
        ("seed", pa.int64()),
    ]
)
LIGHT_COLUMNS = [f.name for f in SCHEMA if f.name != "values"]
COMPRESSION = "zstd"
ROW_GROUP_BYTES = 32 * 2**20


@dataclass
class Row:
    id: str
    split: str
    category: str
    regime: str
    channel_names: list[str]
    question: str
    options: list[str]
    gold: dict
    seed: int
    values: np.ndarray | None = None  # (channels, L) float32
    meta: dict = field(default_factory=dict)
    source: dict = field(default_factory=dict)
    length: int = 0

    def __post_init__(self) -> None:
        if self.values is not None:
            self.values = np.ascontiguousarray(self.values, dtype=np.float32)
            if self.values.ndim != 2 or self.values.shape[0] != len(self.channel_names):
                raise ValueError(f"row {self.id}: values must be (channels, L) with one name per channel")
            self.length = int(self.values.shape[1])


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _values_array(blocks: list[np.ndarray]) -> pa.Array:
    flat = pa.array(np.concatenate([b.ravel() for b in blocks]), type=pa.float32())
    inner, outer = [0], [0]
    for block in blocks:
        for _ in range(block.shape[0]):
            inner.append(inner[-1] + block.shape[1])
        outer.append(outer[-1] + block.shape[0])
    channels = pa.ListArray.from_arrays(pa.array(inner, type=pa.int32()), flat)
    return pa.ListArray.from_arrays(pa.array(outer, type=pa.int32()), channels)


class RowWriter:
    """Appends rows to one parquet file; a row group holds about ROW_GROUP_BYTES of values."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = pq.ParquetWriter(self.path, SCHEMA, compression=COMPRESSION)
        self._pending: list[Row] = []
        self._bytes = 0
        self.rows = 0

    def write(self, row: Row) -> None:
        if row.values is None:
            raise ValueError(f"row {row.id} has no values")
        self._pending.append(row)
        self._bytes += row.values.nbytes
        self.rows += 1
        if self._bytes >= ROW_GROUP_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        rows = self._pending
        columns = {
            "id": [r.id for r in rows], "split": [r.split for r in rows], "category": [r.category for r in rows],
            "regime": [r.regime for r in rows], "length": [r.length for r in rows],
            "n_channels": [len(r.channel_names) for r in rows], "channel_names": [r.channel_names for r in rows],
            "values": _values_array([r.values for r in rows]), "question": [r.question for r in rows],
            "options": [r.options for r in rows], "gold": [_json(r.gold) for r in rows],
            "meta": [_json(r.meta) for r in rows], "source": [_json(r.source) for r in rows],
            "seed": [r.seed for r in rows],
        }
        arrays = [c if isinstance(c := columns[f.name], pa.Array) else pa.array(c, type=f.type) for f in SCHEMA]
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=SCHEMA))
        self._pending, self._bytes = [], 0

    def close(self) -> None:
        self.flush()
        self._writer.close()

    def __enter__(self) -> "RowWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _to_row(rec: dict, values: np.ndarray | None) -> Row:
    row = Row(
        id=rec["id"], split=rec["split"], category=rec["category"], regime=rec["regime"],
        channel_names=list(rec["channel_names"]), question=rec["question"], options=list(rec["options"]),
        gold=json.loads(rec["gold"]), seed=rec["seed"], values=values, meta=json.loads(rec["meta"]),
        source=json.loads(rec["source"]),
    )
    row.length = rec["length"]
    return row


def _values(cell, n_channels: int, length: int) -> np.ndarray:
    return cell.values.flatten().to_numpy(zero_copy_only=False).reshape(n_channels, length)


def read_index(path: str | Path):
    """Every column but `values`, as a pandas DataFrame."""
    return pq.read_table(path, columns=LIGHT_COLUMNS).to_pandas()


def is_row_file(path: str | Path) -> bool:
    try:
        names = set(pq.read_schema(path).names)
    except Exception:  # pyarrow raises several types for a file that is not parquet
        return False
    return set(SCHEMA.names) <= names


def iter_rows(path: str | Path, *, with_values: bool = True) -> Iterator[Row]:
    pf = pq.ParquetFile(path)
    columns = LIGHT_COLUMNS + (["values"] if with_values else [])
    for batch in pf.iter_batches(batch_size=8, columns=columns):
        light = batch.select(LIGHT_COLUMNS).to_pylist()
        for i, rec in enumerate(light):
            values = _values(batch.column("values")[i], rec["n_channels"], rec["length"]) if with_values else None
            yield _to_row(rec, values)


@functools.lru_cache(maxsize=16)
def _locations(path: str, mtime_ns: int) -> dict[str, tuple[int, int]]:
    pf = pq.ParquetFile(path)
    found = {}
    for group in range(pf.num_row_groups):
        for offset, row_id in enumerate(pf.read_row_group(group, columns=["id"]).column(0).to_pylist()):
            found[row_id] = (group, offset)
    return found


@functools.lru_cache(maxsize=2)
def _row_group(path: str, mtime_ns: int, group: int) -> pa.Table:
    return pq.ParquetFile(path).read_row_group(group)


def read_row(path: str | Path, row_id: str) -> Row:
    """One row with its values, by id (the id map and the last row groups are cached)."""
    path = str(path)
    mtime = os.stat(path).st_mtime_ns
    try:
        group, offset = _locations(path, mtime)[row_id]
    except KeyError:
        raise KeyError(f"no row {row_id!r} in {path}") from None
    table = _row_group(path, mtime, group).slice(offset, 1)
    rec = table.select(LIGHT_COLUMNS).to_pylist()[0]
    return _to_row(rec, _values(table.column("values")[0], rec["n_channels"], rec["length"]))
