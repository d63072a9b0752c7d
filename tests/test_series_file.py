"""The shared series writer: a background writer thread and hashing as written must leave the bytes,
the row groups and the manifest's sha256 exactly what a plain in-line parquet writer gives."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tsbench.tasks.series_file import SeriesWriter, values_array, writer_options
from tsbench.tasks.written_hash import CHUNK_BYTES, WrittenHash

SCHEMA = pa.schema([("id", pa.string()), ("values", pa.list_(pa.list_(pa.float32())))])


class TinyWriter(SeriesWriter):
    """Row groups of about 20 KB, so a dozen rows span several groups."""

    schema, compression, group_bytes = SCHEMA, "snappy", 20_000
    fail_on_group: int | None = None
    groups = 0

    def write(self, row_id: str, values: np.ndarray) -> None:
        values = self.stored(values)
        self._append((row_id, values), values.nbytes, block=values)

    def columns(self, items):
        if self.fail_on_group is not None and self.groups == self.fail_on_group:
            raise RuntimeError("disk full")
        self.groups += 1
        return {"id": [i for i, _ in items], "values": values_array([v for _, v in items])}


def _rows(n: int = 12) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(3)
    return [(f"r{i}", rng.standard_normal((1 + i % 3, 1000 + 37 * i)).astype(np.float32)) for i in range(n)]


def _inline(path, rows, group_bytes: int = TinyWriter.group_bytes) -> None:
    """The reference: the same row groups written on this thread, straight to the path."""
    with pq.ParquetWriter(path, SCHEMA, compression="snappy", **writer_options(SCHEMA)) as writer:
        pending, size = [], 0
        for i, (row_id, values) in enumerate(rows):
            pending.append((row_id, values))
            size += values.nbytes
            if size >= group_bytes or i == len(rows) - 1:
                arrays = [pa.array([r for r, _ in pending]), values_array([v for _, v in pending])]
                writer.write_table(pa.Table.from_arrays(arrays, schema=SCHEMA))
                pending, size = [], 0


def test_threaded_writer_gives_the_inline_bytes_and_hashes_them_as_written(tmp_path):
    rows = _rows()
    with TinyWriter(tmp_path / "threaded.parquet") as writer:
        for i, (row_id, values) in enumerate(rows):
            if i % 2:  # half the rows are synthesised straight into the group buffer
                block = writer.reserve(*values.shape)
                block[...] = values
                values = block
            writer.write(row_id, values)
    _inline(tmp_path / "inline.parquet", rows)
    data = (tmp_path / "threaded.parquet").read_bytes()
    assert data == (tmp_path / "inline.parquet").read_bytes()
    assert writer.sha256 == hashlib.sha256(data).hexdigest() and writer.size == len(data)
    assert pq.ParquetFile(tmp_path / "threaded.parquet").num_row_groups > 3
    assert writer.groups == pq.ParquetFile(tmp_path / "threaded.parquet").num_row_groups


def test_written_buffers_are_reused_and_the_bytes_stay_those_written_inline(tmp_path):
    """Every row synthesised into `reserve` blocks: a long file cycles through a few buffers (no fresh
    memory per group), and no block is reused before the writer thread has written it."""
    rows = _rows(60)
    with TinyWriter(tmp_path / "reused.parquet") as writer:
        for row_id, values in rows:
            block = writer.reserve(*values.shape)
            block[...] = values
            writer.write(row_id, block)
    _inline(tmp_path / "inline.parquet", rows)
    assert (tmp_path / "reused.parquet").read_bytes() == (tmp_path / "inline.parquet").read_bytes()
    assert writer.groups > 15
    assert writer.buffers_allocated <= writer.spare_buffers + 3


def test_rows_stored_back_to_back_reach_arrow_without_a_copy(tmp_path):
    writer = TinyWriter(tmp_path / "x.parquet")
    blocks = [writer.reserve(2, 100), writer.reserve(1, 50)]
    for b in blocks:
        b[...] = 1.5
    flat = values_array(blocks).values.values
    assert flat.buffers()[1].address == writer._buffer.array.__array_interface__["data"][0]
    copied = values_array([blocks[1], blocks[0]])  # not in buffer order: concatenated instead
    assert copied.values.values.buffers()[1].address != flat.buffers()[1].address
    assert copied.to_pylist() == values_array([blocks[1].copy(), blocks[0].copy()]).to_pylist()
    writer.close()


def test_a_failed_group_is_raised_in_the_caller_and_the_thread_ends(tmp_path):
    writer = TinyWriter(tmp_path / "x.parquet")
    writer.fail_on_group = 1
    with pytest.raises(RuntimeError, match="disk full"):  # raised by a later write
        for row_id, values in _rows() * 3:
            writer.write(row_id, values)
    with pytest.raises(RuntimeError, match="disk full"):  # and again by close, which still stops the thread
        writer.close()
    assert not writer._thread.is_alive()
    writer.close()  # a no-op once stopped


def test_leaving_on_an_error_stops_the_writer_without_writing_the_rest(tmp_path):
    with pytest.raises(KeyError), TinyWriter(tmp_path / "x.parquet") as writer:
        writer.write("r0", np.zeros((1, 10), np.float32))
        raise KeyError("caller failed")
    assert not writer._thread.is_alive() and writer.rows == 1


def test_written_hash_follows_a_growing_file(tmp_path):
    path = tmp_path / "f.bin"
    hashed = WrittenHash(path)
    with open(path, "wb", buffering=0) as fh:
        for chunk in (b"abc", b"x" * (CHUNK_BYTES + 5), b"tail"):
            fh.write(chunk)
            hashed.update(fh.tell())
    data = path.read_bytes()
    assert hashed.hexdigest() == hashlib.sha256(data).hexdigest() and hashed.size == len(data)
    with pytest.raises(OSError, match="ended at byte"):
        hashed.update(len(data) + 1)


LIGHT = ["id", "n_channels", "length"]
LIGHT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("n_channels", pa.int32()),
        ("length", pa.int32()),
        ("values", pa.list_(pa.list_(pa.float32()))),
    ]
)


def _write_light(path, rows, group_rows: int, **options) -> None:
    """A series file as the families write it, with `options` for the layout (pages, dictionary, v2)."""
    with pq.ParquetWriter(path, LIGHT_SCHEMA, compression=options.pop("compression", "snappy"), **options) as w:
        for at in range(0, len(rows), group_rows):
            part = rows[at : at + group_rows]
            w.write_table(
                pa.Table.from_arrays(
                    [
                        pa.array([i for i, _ in part]),
                        pa.array([v.shape[0] for _, v in part], type=pa.int32()),
                        pa.array([v.shape[1] for _, v in part], type=pa.int32()),
                        values_array([v for _, v in part]),
                    ],
                    schema=LIGHT_SCHEMA,
                )
            )


@pytest.mark.parametrize(
    ("layout", "plain"),
    [
        ({"data_page_size": 4096, **writer_options(LIGHT_SCHEMA)}, True),  # the generator's, pages splitting rows
        ({"data_page_size": 4096, "compression": "zstd", **writer_options(LIGHT_SCHEMA)}, True),
        ({}, False),  # pyarrow's defaults: a dictionary on the floats (files written before issue 26)
        ({"data_page_version": "2.0", **writer_options(LIGHT_SCHEMA)}, False),
    ],
    ids=["plain-pages", "plain-zstd", "old-dictionary", "page-v2"],
)
def test_a_row_read_from_its_pages_equals_the_row_read_whole(tmp_path, layout, plain):
    from tsbench.core import parquet_rows
    from tsbench.tasks import series_file

    rows = _rows(12)
    rows[5][1][0, 7] = np.nan  # a NaN is a value, not a null
    path = tmp_path / "rows.parquet"
    _write_light(path, rows, group_rows=5, **layout)
    parquet_rows._pages.cache_clear()
    for row_id, values in reversed(rows):  # out of file order, as concurrent episodes take them
        rec, got = series_file.read_record(path, row_id, LIGHT)
        assert rec == {"id": row_id, "n_channels": values.shape[0], "length": values.shape[1]}
        assert got.dtype == np.float32 and np.array_equal(got, values, equal_nan=True)
        group, offset = series_file._locations(str(path), path.stat().st_mtime_ns)[row_id]
        whole = series_file.read_values_whole(str(path), group, offset, *values.shape)
        assert np.array_equal(got, whole, equal_nan=True)
    pages = parquet_rows._pages.cache_info().currsize
    assert (pages > 0) == plain  # the plain layouts were read page by page, the others whole
    if plain:
        chunk_pages = parquet_rows._pages(str(path), path.stat().st_mtime_ns, 0, 3)[0]
        assert len(chunk_pages) > 3  # several pages per chunk: rows were cut out of them


def test_a_row_whose_declared_shape_is_not_its_values_is_never_read_from_pages(tmp_path):
    """A file whose light columns misstate a row's shape: the levels disagree, the row is read whole (and
    refused there, as before), never taken as the wrong floats."""
    from tsbench.core.parquet_rows import NotPlain, read_leaf_run

    rows = _rows(4)
    path = tmp_path / "rows.parquet"
    _write_light(path, rows, group_rows=4, data_page_size=4096, **writer_options(LIGHT_SCHEMA))
    channels, length = rows[1][1].shape
    start = rows[0][1].size
    mtime = path.stat().st_mtime_ns
    assert np.array_equal(read_leaf_run(str(path), mtime, 0, 3, start, channels, length), rows[1][1])
    with pytest.raises(NotPlain):
        read_leaf_run(str(path), mtime, 0, 3, start, channels, length - 1)
    with pytest.raises(NotPlain):
        read_leaf_run(str(path), mtime, 0, 3, start + 1, channels, length)


@pytest.mark.parametrize(
    "layout", [{"data_page_size": 4096, **writer_options(LIGHT_SCHEMA)}, {}], ids=["pages", "whole"]
)
def test_rows_read_on_many_threads_are_decoded_one_at_a_time_and_equal(tmp_path, layout):
    """Concurrent episodes' reads wait for each other's pages (the host holds one row's pages, not eight),
    and each gets its own row, as read alone."""
    import threading

    from tsbench.core.parquet_rows import ONE_ROW_AT_A_TIME
    from tsbench.tasks import series_file

    rows = _rows(8)
    path = tmp_path / "rows.parquet"
    _write_light(path, rows, group_rows=3, **layout)
    got: dict[str, np.ndarray] = {}

    def read(row_id: str) -> None:
        got[row_id] = series_file.read_record(path, row_id, LIGHT)[1]

    threads = [threading.Thread(target=read, args=(row_id,)) for row_id, _ in rows]
    with ONE_ROW_AT_A_TIME:  # held here: no thread can decode a row meanwhile
        for thread in threads:
            thread.start()
        threads[0].join(timeout=0.5)
        assert not got and threads[0].is_alive()
    for thread in threads:
        thread.join()
    for row_id, values in rows:
        assert got[row_id].dtype == np.float32 and np.array_equal(got[row_id], values, equal_nan=True)


def test_rle_levels_decode_runs_and_bit_packed_groups():
    from tsbench.core.parquet_rows import rle_levels

    # a run of five 2s (header 5 << 1), then one bit-packed group of eight 2-bit values 0,1,2,2,1,0,2,2
    packed = [0 | 1 << 2 | 2 << 4 | 2 << 6, 1 | 0 << 2 | 2 << 4 | 2 << 6]
    data = memoryview(bytes([5 << 1, 2, (1 << 1) | 1, *packed]))
    assert rle_levels(data, 13, 2).tolist() == [2] * 5 + [0, 1, 2, 2, 1, 0, 2, 2]
