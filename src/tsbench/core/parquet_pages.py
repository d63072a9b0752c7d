"""What a parquet file's page headers declare, read without decompressing a page.

The footer's sizes are only a summary: a reader allocates each page by its own header's
`uncompressed_page_size` and decodes its header's `num_values`. A footer edited to understate them
(a 34 KB file whose footer said 1,000 bytes for a column that inflates to 1 GiB) passes any check
of the footer alone, and reading it, even as a dictionary, took the host past 1 GiB. So the budget
also walks every column chunk's page headers (Thrift compact protocol: a few dozen bytes each) and
takes the larger of what the footer and the pages declare.

pyarrow exposes no page headers, so they are parsed here: only the fields needed (the sizes and
the value counts), every other field skipped by its type, nesting and counts bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO

__all__ = ["MalformedPages", "PageTotals", "chunk_pages"]

_MAX_DEPTH = 16  # a page header nests three levels; deeper is not a parquet file's
_MAX_ITEMS = 1 << 20  # elements of one list or map field inside a page header
_VALUE_FIELDS = {5: 1, 8: 1}  # data page v1 and v2: num_values is field 1 (a dictionary's entries are its bytes)


class MalformedPages(ValueError):
    """The bytes where a page header should be are not one."""


@dataclass
class PageTotals:
    uncompressed: int = 0  # bytes the pages decompress to
    values: int = 0  # values the data pages hold (nulls included)
    largest: int = 0  # the largest page, decompressed
    pages: int = 0


class _Reader:
    def __init__(self, handle: BinaryIO, position: int, end: int) -> None:
        self.handle, self.position, self.end = handle, position, end
        self._buffer, self._at = b"", position  # _buffer holds the file's bytes from _at on

    def take(self, count: int) -> bytes:
        if count < 0 or self.position + count > self.end:
            raise MalformedPages("a page header runs past its column chunk")
        offset = self.position - self._at
        if offset + count > len(self._buffer):
            self.handle.seek(self.position)
            self._buffer, self._at, offset = self.handle.read(max(count, 65536)), self.position, 0
            if len(self._buffer) < count:
                raise MalformedPages("the file ends inside a page header")
        self.position += count
        return self._buffer[offset : offset + count]

    def skip(self, count: int) -> None:
        if count < 0 or self.position + count > self.end:
            raise MalformedPages("a page header runs past its column chunk")
        self.position += count

    def varint(self) -> int:
        result = shift = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise MalformedPages("a varint longer than ten bytes")

    def integer(self) -> int:
        raw = self.varint()
        return (raw >> 1) ^ -(raw & 1)  # zigzag


def _skip(reader: _Reader, kind: int, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise MalformedPages("a page header nested too deeply")
    if kind in (1, 2):  # booleans: in the field header itself
        return
    if kind == 3:
        reader.skip(1)
    elif kind in (4, 5, 6):
        reader.varint()
    elif kind == 7:
        reader.skip(8)
    elif kind == 8:
        reader.skip(reader.varint())
    elif kind in (9, 10):
        header = reader.take(1)[0]
        size, element = header >> 4, header & 0x0F
        if size == 15:
            size = reader.varint()
        _items(reader, size)
        for _ in range(size):
            if element in (1, 2):  # a boolean element takes one byte of its own
                reader.skip(1)
            else:
                _skip(reader, element, depth + 1)
    elif kind == 11:
        size = reader.varint()
        _items(reader, size)
        if size:
            types = reader.take(1)[0]
            for _ in range(size):
                _skip(reader, types >> 4, depth + 1)
                _skip(reader, types & 0x0F, depth + 1)
    elif kind == 12:
        _struct(reader, depth + 1, {})
    else:
        raise MalformedPages(f"unknown Thrift type {kind} in a page header")


def _items(reader: _Reader, size: int) -> None:
    if size > _MAX_ITEMS:
        raise MalformedPages("a list in a page header with more than a million items")


def _struct(reader: _Reader, depth: int, wanted: dict[int, int]) -> dict[int, int]:
    """Parse one struct; the i32/i64 fields whose ids are in `wanted` are returned, structs among them
    (`wanted[id]` a nested field id) give that nested field; everything else is skipped."""
    if depth > _MAX_DEPTH:
        raise MalformedPages("a page header nested too deeply")
    found: dict[int, int] = {}
    field = 0
    while True:
        header = reader.take(1)[0]
        kind = header & 0x0F
        if kind == 0:
            return found
        delta = header >> 4
        field = field + delta if delta else reader.integer()
        if field in wanted and kind in (5, 6):
            found[field] = reader.integer()
        elif field in wanted and kind == 12 and depth == 1:
            inner = _struct(reader, depth + 1, {wanted[field]: 0})
            if wanted[field] in inner:
                found[field] = inner[wanted[field]]
        elif kind == 12:
            _struct(reader, depth + 1, {})
        else:
            _skip(reader, kind, depth)


def _header_values(reader: _Reader) -> tuple[int, int, int]:
    """(uncompressed size, compressed size, values) of the page header at the reader."""
    wanted = {2: 0, 3: 0, **_VALUE_FIELDS}
    found = _struct(reader, 1, wanted)
    if 2 not in found or 3 not in found:
        raise MalformedPages("a page header without its sizes")
    values = max((found[f] for f in _VALUE_FIELDS if f in found), default=0)
    return found[2], found[3], values


def chunk_pages(handle: BinaryIO, start: int, length: int, totals: PageTotals, max_pages: int) -> None:
    """Add the pages of the column chunk at [start, start + length) of the file to `totals`."""
    reader = _Reader(handle, start, start + length)
    while reader.position < reader.end:
        uncompressed, compressed, values = _header_values(reader)
        if min(uncompressed, compressed, values) < 0:
            raise MalformedPages("a page header with a negative size")
        reader.skip(compressed)
        totals.uncompressed += uncompressed
        totals.values += values
        totals.largest = max(totals.largest, uncompressed)
        totals.pages += 1
        if totals.pages > max_pages:
            raise MalformedPages(f"more than {max_pages:,} pages")
