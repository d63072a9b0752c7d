"""The parquet mechanics every series family shares: a `values` column of (channels, L) float32
blocks, rows written in row groups of bounded size, and rows read back one at a time by id.

A family keeps its own schema and row class; it subclasses `SeriesWriter` for the columns and calls
`iter_records` / `read_record` for the light columns plus the values.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def values_array(blocks: list[np.ndarray]) -> pa.Array:
    """list<list<float32>> from (C, L) blocks without copying through Python objects."""
    flat = pa.array(np.concatenate([b.ravel() for b in blocks]), type=pa.float32())
    inner, outer = [0], [0]
    for block in blocks:
        for _ in range(block.shape[0]):
            inner.append(inner[-1] + block.shape[1])
        outer.append(outer[-1] + block.shape[0])
    channels = pa.ListArray.from_arrays(pa.array(inner, type=pa.int32()), flat)
    return pa.ListArray.from_arrays(pa.array(outer, type=pa.int32()), channels)


def values_from_cell(cell: pa.ListScalar, n_channels: int, length: int) -> np.ndarray:
    return cell.values.flatten().to_numpy(zero_copy_only=False).reshape(n_channels, length)


def _is_float(dtype: pa.DataType) -> bool:
    while pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
        dtype = dtype.value_type
    return pa.types.is_floating(dtype)


def writer_options(schema: pa.Schema) -> dict[str, Any]:
    """ParquetWriter options for series files: float columns (the series) are written PLAIN, with no
    dictionary (random floats never repeat: building one cost most of the write and made files larger)
    and no min/max statistics (nothing filters on them); the other columns keep both."""
    others = [f.name for f in schema if not _is_float(f.type)]
    return {"use_dictionary": others, "write_statistics": others}


class SeriesWriter:
    """Appends rows to one parquet file; a row group holds about `group_bytes` of values.
    Subclasses set `schema`, `compression`, `group_bytes` and turn pending items into columns."""

    schema: pa.Schema
    compression = "snappy"
    group_bytes = 64 * 2**20

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = pq.ParquetWriter(
            self.path, self.schema, compression=self.compression, **writer_options(self.schema)
        )
        self._pending: list[Any] = []
        self._bytes = 0
        self.rows = 0

    def columns(self, items: list[Any]) -> dict[str, list | pa.Array]:
        """Column name -> values for the pending items (`values` as a `values_array`)."""
        raise NotImplementedError

    def _append(self, item: Any, nbytes: int) -> None:
        self._pending.append(item)
        self._bytes += nbytes
        self.rows += 1
        if self._bytes >= self.group_bytes:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        columns = self.columns(self._pending)
        arrays = [c if isinstance(c := columns[f.name], pa.Array) else pa.array(c, type=f.type) for f in self.schema]
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        self._pending, self._bytes = [], 0

    def close(self) -> None:
        self.flush()
        self._writer.close()

    def __enter__(self) -> SeriesWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def iter_records(
    path: str | Path, light_columns: list[str], *, with_values: bool = True, batch_size: int = 8
) -> Iterator[tuple[dict, np.ndarray | None]]:
    """(light columns as a dict, values or None) per row, streamed a batch at a time."""
    pf = pq.ParquetFile(path)
    columns = light_columns + (["values"] if with_values else [])
    for batch in pf.iter_batches(batch_size=batch_size, columns=columns):
        for i, rec in enumerate(batch.select(light_columns).to_pylist()):
            values = (
                values_from_cell(batch.column("values")[i], rec["n_channels"], rec["length"]) if with_values else None
            )
            yield rec, values


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


def read_record(path: str | Path, row_id: str, light_columns: list[str]) -> tuple[dict, np.ndarray]:
    """One row's light columns and values, by id. Episodes load rows one at a time (in any process),
    so the id map and the last few row groups are cached: rows taken in file order cost one read."""
    path = str(path)
    mtime = os.stat(path).st_mtime_ns
    try:
        group, offset = _locations(path, mtime)[row_id]
    except KeyError:
        raise KeyError(f"no row {row_id!r} in {path}") from None
    table = _row_group(path, mtime, group).slice(offset, 1)
    rec = table.select(light_columns).to_pylist()[0]
    return rec, values_from_cell(table.column("values")[0], rec["n_channels"], rec["length"])


def read_index(path: str | Path, light_columns: list[str]):
    """Every column but `values`, as a pandas DataFrame: cheap even for the paper-size split."""
    return pq.read_table(path, columns=light_columns).to_pandas()
