"""The parquet row every recording family writes: the generic columns the eval runner reads
(id, category, regime, length, n_channels, question, options, gold), the values as the series,
and where the row came from. Written in row groups of bounded size, read back one row by id.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.core import json_input
from tsbench.tasks import series_file
from tsbench.tasks.series_file import SeriesWriter, iter_records, read_record, values_array

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


class RowWriter(SeriesWriter):
    """Appends recording rows to one parquet file."""

    schema, compression, group_bytes = SCHEMA, COMPRESSION, ROW_GROUP_BYTES

    def write(self, row: Row) -> None:
        if row.values is None:
            raise ValueError(f"row {row.id} has no values")
        self._append(row, row.values.nbytes)

    def columns(self, rows: list[Row]) -> dict:
        return {
            "id": [r.id for r in rows],
            "split": [r.split for r in rows],
            "category": [r.category for r in rows],
            "regime": [r.regime for r in rows],
            "length": [r.length for r in rows],
            "n_channels": [len(r.channel_names) for r in rows],
            "channel_names": [r.channel_names for r in rows],
            "values": values_array([r.values for r in rows]),
            "question": [r.question for r in rows],
            "options": [r.options for r in rows],
            "gold": [_json(r.gold) for r in rows],
            "meta": [_json(r.meta) for r in rows],
            "source": [_json(r.source) for r in rows],
            "seed": [r.seed for r in rows],
        }


def _to_row(rec: dict, values: np.ndarray | None) -> Row:
    row = Row(
        id=rec["id"],
        split=rec["split"],
        category=rec["category"],
        regime=rec["regime"],
        channel_names=list(rec["channel_names"]),
        question=rec["question"],
        options=list(rec["options"]),
        gold=json_input.loads(rec["gold"], f"row {rec['id']}'s gold"),
        seed=rec["seed"],
        values=values,
        meta=json_input.loads(rec["meta"], f"row {rec['id']}'s meta"),
        source=json_input.loads(rec["source"], f"row {rec['id']}'s source"),
    )
    row.length = rec["length"]
    return row


def read_index(path: str | Path):
    """Every column but `values`, as a pandas DataFrame."""
    return series_file.read_index(path, LIGHT_COLUMNS)


def is_row_file(path: str | Path) -> bool:
    try:
        names = set(pq.read_schema(path).names)
    except Exception:  # pyarrow raises several types for a file that is not parquet
        return False
    return set(SCHEMA.names) <= names


def iter_rows(path: str | Path, *, with_values: bool = True) -> Iterator[Row]:
    for rec, values in iter_records(path, LIGHT_COLUMNS, with_values=with_values):
        yield _to_row(rec, values)


def read_row(path: str | Path, row_id: str) -> Row:
    """One row with its values, by id (see `series_file.read_record` for the caching)."""
    return _to_row(*read_record(path, row_id, LIGHT_COLUMNS))
