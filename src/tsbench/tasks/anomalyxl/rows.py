"""The AnomalyXL parquet row: schema, streaming writer and reader. Defined once, used everywhere."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.tasks import series_file
from tsbench.tasks.series_file import SeriesWriter, iter_records, read_record, row_columns, row_of

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
JSON_COLUMNS = ("gold", "plan")
COMPRESSION = "snappy"
ROW_GROUP_BYTES = 64 * 2**20


@dataclass
class Row:
    """One row as the generator plans it (`facts`: what the MCQ projection reads) or as a file holds it."""

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
    values: np.ndarray | None = None  # (channels, L) float32; None when planned or read without values
    facts: dict = field(default_factory=dict)

    def gold_text(self) -> str:
        return gold_text(self.gold)

    @property
    def series(self) -> dict[str, np.ndarray]:
        if self.values is None:
            raise ValueError("row was read without values")
        return dict(zip(self.channel_names, self.values))


def gold_text(gold: dict) -> str:
    """The gold as a user would see it: without the scorer's private keys."""
    return json.dumps({k: v for k, v in gold.items() if not k.startswith("_") and k not in ("channels", "options")})


def _sorted_json(value: dict) -> str:
    return json.dumps(value, sort_keys=True)


class RowWriter(SeriesWriter):
    """Appends planned rows and their values to one AnomalyXL parquet file."""

    schema, compression, group_bytes = SCHEMA, COMPRESSION, ROW_GROUP_BYTES

    def write(self, row: Row, values: np.ndarray) -> None:
        """`values` from `reserve` are taken as they are; any others are copied into the group buffer."""
        values = self.stored(values)
        self._append((row, values), values.nbytes, block=values)

    def columns(self, items: list[tuple[Row, np.ndarray]]) -> dict:
        return row_columns(self.schema, *zip(*items), {"gold": _sorted_json, "plan": _sorted_json})


def iter_rows(
    path: str | Path, *, with_values: bool = True, ids: set[str] | None = None, batch_size: int = 8
) -> Iterator[Row]:
    """Stream rows from an AnomalyXL parquet file, a row group at a time."""
    for rec, values in iter_records(path, LIGHT_COLUMNS, with_values=with_values, batch_size=batch_size):
        if ids is None or rec["id"] in ids:
            yield row_of(Row, rec, values, JSON_COLUMNS)


def read_row(path: str | Path, row_id: str) -> Row:
    """One row with its values, by id (see `series_file.read_record` for the caching)."""
    return row_of(Row, *read_record(path, row_id, LIGHT_COLUMNS), JSON_COLUMNS)


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
    return series_file.read_index(path, LIGHT_COLUMNS)
