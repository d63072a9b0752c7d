"""One row's float values from the parquet pages that hold them, not from its whole row group.

pyarrow reads a column chunk whole: taking one row of a ~64 MiB row group decoded all of it (and
eval cached four: one group raised the host's RSS by 314 MiB, issue 47). A series column here is
list<list<float32>> written PLAIN with no dictionary and no nulls, so a row's values are one run of
leaf values: the rows before it (their channels x length, from the light columns) say where the run
starts, and the page headers' value counts (parquet_pages' Thrift reader) say which pages hold it.
Only those pages are read and decompressed; their float bytes are the values.

Nothing is taken on trust: each page read must be a v1 data page, PLAIN, with exactly one float per
level (no nulls, no empty lists), and the repetition levels decoded from those pages must put a row
start where the row begins and right after it ends, and a channel start every `length` values. Any
other layout (a dictionary, data page v2, an unexpected codec or count) raises `NotPlain`, and the
caller reads the row the old way; files of every layout stay readable.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.core.parquet_pages import MalformedPages, _Reader, _skip

__all__ = ["ONE_ROW_AT_A_TIME", "NotPlain", "read_leaf_run", "rle_levels"]

_DATA_PAGE, _PLAIN, _RLE = 0, 0, 3
# One row's pages decoded at a time in a process: pyarrow writes a row longer than a page as one page,
# so a paper-split row is one 8 MiB page, read (compressed), decompressed and copied out: ~26 MiB at
# once. Eight episodes starting together read eight such rows side by side: +190 MiB of host RSS for
# 64 MiB of rows (the c8 eval's peak, issue 47). A row takes ~0.05-0.1 s to read, behind a kernel's start.
ONE_ROW_AT_A_TIME = threading.Lock()
_CODECS = {"SNAPPY": "snappy", "ZSTD": "zstd", "GZIP": "gzip", "LZ4_RAW": "lz4_raw", "BROTLI": "brotli"}


class NotPlain(ValueError):
    """The pages are not the plain layout this reader takes; read the row group instead."""


@dataclass(frozen=True)
class _Page:
    start: int  # file offset of the page's bytes (after its header)
    compressed: int
    uncompressed: int
    values: int
    first: int  # index in the chunk of the page's first leaf value


def _page_header(reader: _Reader) -> tuple[int, int, int, int, tuple[int, int, int]]:
    """(page type, uncompressed, compressed, num_values, (encoding, def encoding, rep encoding))."""
    found: dict[int, int] = {}
    data: dict[int, int] = {}
    field = 0
    while True:
        header = reader.take(1)[0]
        kind = header & 0x0F
        if kind == 0:
            break
        delta = header >> 4
        field = field + delta if delta else reader.integer()
        if field in (1, 2, 3) and kind == 5:
            found[field] = reader.integer()
        elif field == 5 and kind == 12:  # DataPageHeader: num_values, encoding, def and rep level encodings
            inner = 0
            while True:
                byte = reader.take(1)[0]
                if byte & 0x0F == 0:
                    break
                inner = inner + (byte >> 4) if byte >> 4 else reader.integer()
                if inner in (1, 2, 3, 4) and byte & 0x0F == 5:
                    data[inner] = reader.integer()
                else:
                    _skip(reader, byte & 0x0F, 2)
        else:
            _skip(reader, kind, 1)
    if len(found) != 3 or found[1] != _DATA_PAGE or len(data) != 4:
        raise NotPlain("not a v1 data page")
    return found[1], found[2], found[3], data[1], (data[2], data[3], data[4])


@functools.lru_cache(maxsize=64)
def _pages(path: str, mtime_ns: int, group: int, column: int) -> tuple[tuple[_Page, ...], int, str, int]:
    """The chunk's data pages, its value count, its codec and its max repetition level."""
    meta = pq.ParquetFile(path).metadata
    chunk = meta.row_group(group).column(column)
    if chunk.dictionary_page_offset is not None or chunk.compression not in (*_CODECS, "UNCOMPRESSED"):
        raise NotPlain("a dictionary page or an unknown codec")
    start = chunk.data_page_offset
    pages, first = [], 0
    with open(path, "rb") as handle:
        reader = _Reader(handle, start, start + chunk.total_compressed_size)
        while reader.position < reader.end:
            _kind, uncompressed, compressed, values, encodings = _page_header(reader)
            if encodings != (_PLAIN, _RLE, _RLE) or min(uncompressed, compressed, values) < 0:
                raise NotPlain("not PLAIN values with RLE levels")
            pages.append(_Page(reader.position, compressed, uncompressed, values, first))
            reader.skip(compressed)
            first += values
    if first != chunk.num_values:
        raise NotPlain("the pages' value counts are not the chunk's")
    return tuple(pages), first, chunk.compression, meta.schema.column(column).max_repetition_level


def rle_levels(data: memoryview, count: int, bit_width: int) -> np.ndarray:
    """`count` levels of parquet's RLE / bit-packed hybrid encoding (LSB first), as uint8."""
    out = np.empty(count, dtype=np.uint8)
    width_bytes = (bit_width + 7) // 8
    weights = 1 << np.arange(bit_width, dtype=np.uint8)
    position = done = 0
    while done < count:
        header = shift = 0
        while True:
            if position >= len(data):
                raise NotPlain("levels end early")
            byte = data[position]
            position += 1
            header |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if header & 1:  # bit-packed: groups of eight values
            size = (header >> 1) * bit_width
            bits = np.unpackbits(np.frombuffer(data[position : position + size], dtype=np.uint8), bitorder="little")
            position += size
            values = (bits.reshape(-1, bit_width) * weights).sum(axis=1, dtype=np.uint8)
            take = min(len(values), count - done)
            out[done : done + take] = values[:take]
        else:  # a run of one value
            take = min(header >> 1, count - done)
            out[done : done + take] = int.from_bytes(data[position : position + width_bytes], "little")
            position += width_bytes
        if take <= 0:
            raise NotPlain("an empty run of levels")
        done += take
    return out


def _page_parts(handle, page: _Page, codec: str, max_rep: int) -> tuple[np.ndarray, np.ndarray]:
    """(repetition levels, float32 values) of one page."""
    handle.seek(page.start)
    raw = handle.read(page.compressed)
    if len(raw) != page.compressed:
        raise NotPlain("the file ends inside a page")
    if codec != "UNCOMPRESSED":  # read in place: no second copy of the page
        raw = pa.decompress(raw, decompressed_size=page.uncompressed, codec=_CODECS[codec])
    view = memoryview(raw)
    rep_size = int.from_bytes(view[:4], "little")
    levels = rle_levels(view[4 : 4 + rep_size], page.values, max(1, max_rep.bit_length()))
    at = 4 + rep_size
    def_size = int.from_bytes(view[at : at + 4], "little")
    values = view[at + 4 + def_size :]
    if len(values) != 4 * page.values:  # one float per level: no nulls, no empty lists
        raise NotPlain("a page with nulls or empty lists")
    return levels, np.frombuffer(values, dtype="<f4")


def _expected_levels(at: int, size: int, count: int, length: int, max_rep: int) -> np.ndarray:
    """The repetition levels of run positions at .. at+size: a row start (0) at 0 and at `count` (the next
    row), a channel start (max_rep - 1) every `length` values in between, else max_rep."""
    expected = np.full(size, max_rep, dtype=np.uint8)
    first = -(-at // length) * length  # the first channel start at or after `at`
    expected[first - at : max(0, min(count, at + size) - at) : length] = max_rep - 1
    for row_start in (0, count):
        if at <= row_start < at + size:
            expected[row_start - at] = 0
    return expected


def read_leaf_run(
    path: str, mtime_ns: int, group: int, column: int, start: int, channels: int, length: int
) -> np.ndarray:
    """The (channels, length) float32 row whose leaf values begin at `start` in the chunk of `group`.
    Each page's values go straight into the row's one buffer and its levels are checked as it is read,
    so no page outlives its turn: 8 long rows read at once held ~3x their size in page buffers, level
    arrays and a second concatenated copy (the c8 eval host's peak on the paper split, issue 47)."""
    try:
        pages, total, codec, max_rep = _pages(path, mtime_ns, group, column)
    except MalformedPages as exc:
        raise NotPlain(str(exc)) from None
    count = channels * length
    end = start + count
    if channels < 1 or length < 1 or start < 0 or end > total:
        raise NotPlain("the row's values lie outside its chunk")
    if max_rep != 2:
        raise NotPlain("the row's repetition levels are not its shape")
    wanted = [p for p in pages if p.first < min(end + 1, total) and p.first + p.values > start]
    out = np.empty(count, dtype=np.float32)
    checked = filled = 0  # run positions whose levels were checked; values copied
    with ONE_ROW_AT_A_TIME, open(path, "rb") as handle:
        for page in wanted:
            page_levels, page_values = _page_parts(handle, page, codec, max_rep)
            lo, hi = max(start, page.first) - page.first, min(end + 1, page.first + page.values) - page.first
            at = page.first + lo - start
            if at != checked or not np.array_equal(page_levels[lo:hi], _expected_levels(at, hi - lo, count, length, 2)):
                raise NotPlain("the row's repetition levels are not its shape")
            checked += hi - lo
            taken = page_values[lo : min(hi, end - page.first)]
            out[filled : filled + len(taken)] = taken
            filled += len(taken)
    if checked != count + (end < total) or filled != count:
        raise NotPlain("the row's repetition levels are not its shape")
    return out.reshape(channels, length)  # its own buffer
