"""The parquet row every recording family writes: the generic columns the eval runner reads
(id, category, regime, length, n_channels, question, options, gold), the values as the series,
and where the row came from. Written in row groups of bounded size, read back one row by id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tsbench.tasks import series_file
from tsbench.tasks.series_file import SeriesWriter, read_record, row_columns, row_of

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
JSON_COLUMNS = ("gold", "meta", "source")
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
        return row_columns(self.schema, rows, [r.values for r in rows], dict.fromkeys(JSON_COLUMNS, _json))


def read_index(path: str | Path):
    """Every column but `values`, as a pandas DataFrame."""
    return series_file.read_index(path, LIGHT_COLUMNS)


def read_row(path: str | Path, row_id: str) -> Row:
    """One row with its values, by id (see `series_file.read_record` for the caching)."""
    return row_of(Row, *read_record(path, row_id, LIGHT_COLUMNS), JSON_COLUMNS)
