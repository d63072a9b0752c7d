"""The parquet mechanics every series family shares: a `values` column of (channels, L) float32
blocks, rows written in row groups of bounded size, and rows read back one at a time by id.

A family keeps its own schema and row class (a dataclass whose fields are named as the columns); it
subclasses `SeriesWriter`, and `row_columns` / `row_of` turn its rows into columns and records back.
"""

from __future__ import annotations

import functools
import os
import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.core import json_input
from tsbench.core.input_budget import Budget, check_parquet
from tsbench.core.parquet_rows import ONE_ROW_AT_A_TIME, NotPlain, read_leaf_run


def _contiguous_run(blocks: list[np.ndarray]) -> np.ndarray | None:
    """The blocks as one flat float32 view when they lie back to back in one buffer (rows a
    `SeriesWriter` stored in its row-group buffer), else None."""
    base = blocks[0].base
    if not isinstance(base, np.ndarray) or base.ndim != 1 or base.dtype != np.float32:
        return None
    origin = base.__array_interface__["data"][0]
    start = end = (blocks[0].__array_interface__["data"][0] - origin) // base.itemsize
    for block in blocks:
        address = block.__array_interface__["data"][0]
        if block.base is not base or not block.flags.c_contiguous or address != origin + end * base.itemsize:
            return None
        end += block.size
    return base[start:end]


def values_array(blocks: list[np.ndarray]) -> pa.Array:
    """list<list<float32>> from (C, L) blocks without copying through Python objects (and without
    copying at all when they already lie back to back in one float32 buffer)."""
    flat = _contiguous_run(blocks)
    if flat is None:
        flat = np.concatenate([b.ravel() for b in blocks])
    flat = pa.array(flat, type=pa.float32())
    inner, outer = [0], [0]
    for block in blocks:
        for _ in range(block.shape[0]):
            inner.append(inner[-1] + block.shape[1])
        outer.append(outer[-1] + block.shape[0])
    channels = pa.ListArray.from_arrays(pa.array(inner, type=pa.int32()), flat)
    return pa.ListArray.from_arrays(pa.array(outer, type=pa.int32()), channels)


def row_columns(schema: pa.Schema, rows, blocks, encoders: dict[str, Callable[[Any], Any]]) -> dict:
    """The columns of rows whose attributes are named as `schema`'s columns (through `encoders[name]`
    where one is given): `values` from their (C, L) blocks, `n_channels` counted from the names."""
    columns: dict[str, Any] = {"values": values_array(blocks), "n_channels": [len(r.channel_names) for r in rows]}
    for name in (f.name for f in schema if f.name not in columns):
        encode = encoders.get(name)
        columns[name] = [encode(getattr(r, name)) if encode else getattr(r, name) for r in rows]
    return columns


def row_of(cls: type, rec: dict, values: np.ndarray | None, json_columns: tuple[str, ...]) -> Any:
    """A family's row from a record's light columns, `json_columns` decoded (the row counts its channels)."""
    fields = {k: v for k, v in rec.items() if k != "n_channels"}
    fields.update({k: json_input.loads(rec[k], f"row {rec['id']}'s {k}") for k in json_columns})
    return cls(**fields, values=values)


def values_from_cell(cell: pa.ListScalar, n_channels: int, length: int) -> np.ndarray:
    return cell.values.flatten().to_numpy(zero_copy_only=False).reshape(n_channels, length)


def _is_float(dtype: pa.DataType) -> bool:
    while pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype):
        dtype = dtype.value_type
    return pa.types.is_floating(dtype)


# How long pyarrow's encoding buffers stay mapped once freed. A writer thread waits between row
# groups; the default allocator hands idle memory back to the OS within milliseconds, so every group
# faulted its level and page buffers in again (zeroed pages: about 10 % of a split's CPU, issue 26).
RETAIN_FREED_MS = 2000


@functools.lru_cache(maxsize=1)
def writer_memory_pool() -> pa.MemoryPool:
    """jemalloc keeping freed pages for `RETAIN_FREED_MS` where pyarrow has it, else the default."""
    try:
        pool = pa.jemalloc_memory_pool()
        pa.jemalloc_set_decay_ms(RETAIN_FREED_MS)
    except (NotImplementedError, pa.ArrowNotImplementedError):
        return pa.default_memory_pool()
    return pool


def writer_options(schema: pa.Schema) -> dict[str, Any]:
    """ParquetWriter options for series files: float columns (the series) are written PLAIN, with no
    dictionary (random floats never repeat: building one cost most of the write and made files larger)
    and no min/max statistics (nothing filters on them); the other columns keep both. Encoding
    buffers come from `writer_memory_pool`."""
    others = [f.name for f in schema if not _is_float(f.type)]
    return {"use_dictionary": others, "write_statistics": others, "memory_pool": writer_memory_pool()}


class _GroupBuffer:
    """A float32 buffer that reserved blocks are cut from. Once it is full (retired) and the writer
    thread has written every block cut from it, it goes back to its writer for the next groups:
    fresh memory costs a page fault and a zeroed page for every 4 KiB, which measured about a fifth
    of the generator's CPU time (issue 26)."""

    __slots__ = ("array", "used", "reserved", "unwritten", "retired")

    def __init__(self, array: np.ndarray):
        self.array = array
        self.used = self.reserved = self.unwritten = 0
        self.retired = False


class SeriesWriter:
    """Appends rows to one parquet file; a row group holds about `group_bytes` of values.
    Subclasses set `schema`, `compression`, `group_bytes` and turn pending items into columns.

    Row groups are encoded and written by one background thread, in order, while the caller builds
    the next rows (pyarrow and hashlib release the GIL): at most one group waits in the queue, so
    memory stays bounded. The bytes are those a plain in-line writer gives. The file's sha256 and
    size (`sha256`, `size` after `close`) are taken group by group as it is written, on that thread,
    from the page cache (`written_hash`), not by a second pass over the finished file.

    Values reach parquet without a copy when they come from `reserve`: blocks of a few row-group
    buffers that are reused once written, so a long file touches no fresh memory for its values."""

    schema: pa.Schema
    compression = "snappy"
    group_bytes = 64 * 2**20
    spare_buffers = 2  # written buffers kept for reuse; the rest are freed

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # a native file: pages go out without the GIL (a Python sink would need it once per page)
        self._stream = pa.OSFile(str(self.path), mode="wb")
        from tsbench.tasks.written_hash import WrittenHash  # writers only: an eval reads series files

        self._hash = WrittenHash(self.path)
        self._writer = pq.ParquetWriter(
            self._stream, self.schema, compression=self.compression, **writer_options(self.schema)
        )
        self._pending: list[Any] = []
        self._pending_buffers: list[_GroupBuffer] = []  # the buffer of each pending reserved block
        self._bytes = 0
        self._buffer: _GroupBuffer | None = None  # the one `reserve` cuts from
        self._live: dict[int, _GroupBuffer] = {}  # id(array) -> buffer, for blocks not yet written
        self._spare: list[_GroupBuffer] = []  # written buffers, ready for reuse
        self._buffers_lock = threading.Lock()  # `_live` and `_spare` change on both threads
        self.buffers_allocated = 0
        self.rows = 0
        self.sha256: str | None = None
        self.size = 0
        self._closed = False
        self._error: BaseException | None = None
        self._queue: queue.Queue[tuple[list[Any], list[_GroupBuffer]] | None] = queue.Queue(maxsize=1)
        self._thread = threading.Thread(target=self._drain, name=f"write {self.path.name}", daemon=True)
        self._thread.start()

    def columns(self, items: list[Any]) -> dict[str, list | pa.Array]:
        """Column name -> values for the pending items (`values` as a `values_array`)."""
        raise NotImplementedError

    def _fresh_buffer(self, size: int) -> _GroupBuffer:
        """A retired, written buffer of at least `size` values if one is spare, else a new one."""
        with self._buffers_lock:
            current = self._buffer
            if current is not None:
                current.retired = True
                self._recycle(current)
            spare = next((b for b in self._spare if b.array.size >= size), None)
            if spare is not None:
                self._spare.remove(spare)
                spare.used = spare.reserved = 0
                spare.retired = False
            else:
                self.buffers_allocated += 1
                spare = _GroupBuffer(np.empty(max(2 * self.group_bytes // 4, size), dtype=np.float32))
            self._live[id(spare.array)] = spare
            return spare

    def _recycle(self, buffer: _GroupBuffer) -> None:
        """Under the lock: a retired buffer with every block written becomes spare (or is freed)."""
        if buffer.retired and buffer.unwritten == 0 and self._live.pop(id(buffer.array), None) is buffer:
            if len(self._spare) < self.spare_buffers:
                self._spare.append(buffer)

    def reserve(self, channels: int, length: int) -> np.ndarray:
        """An uninitialised (channels, length) float32 block in a row-group buffer: fill it (on any
        thread), then `write` rows with their blocks in the order they were reserved, and each group's
        values reach parquet without a copy. Reservations may run ahead of writes: a new buffer starts
        where the next group will start. Once its row is written the block belongs to the writer
        again: it is reused for later rows after the writer thread has written it."""
        size = channels * length
        buffer = self._buffer
        if buffer is None or buffer.reserved >= self.group_bytes or buffer.used + size > buffer.array.size:
            buffer = self._buffer = self._fresh_buffer(size)
        block = buffer.array[buffer.used : buffer.used + size].reshape(channels, length)
        buffer.used += size
        buffer.reserved += block.nbytes
        with self._buffers_lock:
            buffer.unwritten += 1
        return block

    def _buffer_of(self, values: np.ndarray) -> _GroupBuffer | None:
        found = self._live.get(id(values.base))
        return found if found is not None and found.array is values.base else None

    def stored(self, values: np.ndarray) -> np.ndarray:
        """`values` as a block of a row-group buffer: itself if `reserve` gave it, else a copy."""
        if values.dtype == np.float32 and self._buffer_of(values) is not None:
            return values
        block = self.reserve(*values.shape)
        block[...] = values
        return block

    def _append(self, item: Any, nbytes: int, block: np.ndarray | None = None) -> None:
        """Queue one row; `block`: its values when they are a block from `reserve`."""
        if block is not None and (buffer := self._buffer_of(block)) is not None:
            self._pending_buffers.append(buffer)
        self._pending.append(item)
        self._bytes += nbytes
        self.rows += 1
        if self._bytes >= self.group_bytes:
            self.flush()

    def _write_group(self, items: list[Any]) -> None:
        columns = self.columns(items)
        arrays = [c if isinstance(c := columns[f.name], pa.Array) else pa.array(c, type=f.type) for f in self.schema]
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        self._hash.update(self._stream.tell())  # the group's bytes, from the page cache

    def _drain(self) -> None:
        """The writer thread: groups in the order they were queued; after an error it only drains."""
        while (group := self._queue.get()) is not None:
            items, buffers = group
            if self._error is None:
                try:
                    self._write_group(items)
                except BaseException as exc:  # re-raised in the caller's thread
                    self._error = exc
                    continue
                # the group's arrow arrays are gone with `_write_group`: its blocks may be reused
                with self._buffers_lock:
                    for buffer in buffers:
                        buffer.unwritten -= 1
                        self._recycle(buffer)

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def flush(self) -> None:
        """Hand the pending rows to the writer thread as one row group."""
        self._raise_error()
        if not self._pending:
            return
        group = (self._pending, self._pending_buffers)
        self._pending, self._pending_buffers, self._bytes = [], [], 0
        self._queue.put(group)

    def _stop(self, *, write_pending: bool) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if write_pending:
                self.flush()
        finally:
            self._queue.put(None)
            self._thread.join()
            try:
                self._writer.close()
                end = self._stream.tell()
                self._stream.close()
                if self._error is None:
                    self._hash.update(end)  # the footer
            except BaseException as exc:
                self._error = self._error or exc
                self._stream.close()
        if write_pending:
            self._raise_error()
        self.sha256, self.size = self._hash.hexdigest(), self._hash.size

    def close(self) -> None:
        """Write what is pending, wait for the writer thread, close the file; raises its error if any."""
        self._stop(write_pending=True)

    def __enter__(self) -> SeriesWriter:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()
        else:  # the file is abandoned: stop the thread without writing the rest
            self._stop(write_pending=False)


def check_series_file(path: str | Path, light_columns: list[str]) -> None:
    """Refuse a series file (one handed to eval, describe or score may be anyone's) unless each row
    group fits the input budget on its own (a reader holds one at a time) and the light columns fit
    it file-wide (the index reads them all), judged from the footer and the dictionaries before any
    value is built: a 280 KB file whose one 1 MiB `plan` repeated over 2,000 rows took eval to 1.8 GiB."""
    info = os.stat(path)
    _checked(str(path), info.st_size, info.st_mtime_ns, tuple(light_columns), Budget().scaled())


@functools.lru_cache(maxsize=64)
def _checked(path: str, size: int, mtime_ns: int, light_columns: tuple[str, ...], budget: Budget) -> None:
    check_parquet(path, path, budget, columns=list(light_columns), each_row_group=True)


def iter_records(
    path: str | Path, light_columns: list[str], *, with_values: bool = True, batch_size: int = 8
) -> Iterator[tuple[dict, np.ndarray | None]]:
    """(light columns as a dict, values or None) per row, streamed a batch at a time."""
    check_series_file(path, light_columns)
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


@functools.lru_cache(maxsize=16)
def _group_rows(path: str, mtime_ns: int, group: int, light_columns: tuple[str, ...]) -> tuple[list[dict], list[int]]:
    """A row group's light columns, one dict per row, and where each row's values begin among the
    group's leaf values (the rows before it: channels x length each)."""
    records = pq.ParquetFile(path).read_row_group(group, columns=list(light_columns)).to_pylist()
    starts, at = [], 0
    for rec in records:
        starts.append(at)
        at += int(rec["n_channels"]) * int(rec["length"])
    return records, starts


@functools.lru_cache(maxsize=32)
def _values_column(path: str, mtime_ns: int) -> int | None:
    """The index of the `values` leaf column, None when there is not exactly one."""
    schema = pq.ParquetFile(path).metadata.schema
    found = [i for i in range(len(schema)) if schema.column(i).path.split(".")[0] == "values"]
    return found[0] if len(found) == 1 else None


def read_values_whole(path: str, group: int, offset: int, n_channels: int, length: int) -> np.ndarray:
    """A row's values through pyarrow: its group's whole `values` chunk decoded (any layout)."""
    cell = pq.ParquetFile(path).read_row_group(group, columns=["values"]).column(0)[offset]
    return values_from_cell(cell, n_channels, length)


def read_record(path: str | Path, row_id: str, light_columns: list[str]) -> tuple[dict, np.ndarray]:
    """One row's light columns and values, by id. The values come from the pages that hold them
    (core/parquet_rows.py), so the host holds about one row, not its row group; a layout that reader
    does not take (a dictionary, data page v2) is read through its whole group, uncached. The id map
    and a few groups' light columns are cached."""
    path = str(path)
    check_series_file(path, light_columns)
    mtime = os.stat(path).st_mtime_ns
    try:
        group, offset = _locations(path, mtime)[row_id]
    except KeyError:
        raise KeyError(f"no row {row_id!r} in {path}") from None
    columns = tuple(dict.fromkeys([*light_columns, "n_channels", "length"]))
    records, starts = _group_rows(path, mtime, group, columns)
    full = records[offset]
    rec = {name: full[name] for name in light_columns}
    channels, length = int(full["n_channels"]), int(full["length"])
    column = _values_column(path, mtime)
    try:
        if column is None:
            raise NotPlain("no single values column")
        values = read_leaf_run(path, mtime, group, column, starts[offset], channels, length)
    except NotPlain:
        with ONE_ROW_AT_A_TIME:  # a whole group decoded: never two at once
            values = read_values_whole(path, group, offset, channels, length)
    return dict(rec), values


def read_index(path: str | Path, light_columns: list[str]):
    """Every column but `values`, as a pandas DataFrame: cheap even for the paper-size split."""
    check_series_file(path, light_columns)
    return pq.read_table(path, columns=light_columns).to_pandas()
