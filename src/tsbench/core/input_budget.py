"""Input budgets: how much one file under --path may make the host hold, judged before a value is built.

A small file can stand for gigabytes: one parquet dictionary value repeated by every row, run-length
pages of millions of equal numbers, a WFDB header that declares any length. Each check reads only
what the file declares (the parquet footer, the WFDB header) or, for parquet text columns, the
dictionaries and their indices, and refuses past the budget (a UserError: one line, exit 2), so the
values are never materialised. (TSAIA's .npy and pickle files are loaded only in the jail, by
`tsbench convert-tsaia`; the host copies them in within the file budget.)

A footer edited to understate what its pages hold is caught too: every column chunk's page headers
are read (parquet_pages) and the larger of the two declarations counts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tsbench.core.errors import UserError
from tsbench.core.parquet_pages import MalformedPages, PageTotals, chunk_pages

MiB = 2**20
SCALE_ENV = "TSBENCH_INPUT_BUDGET_SCALE"
# Bytes a decoded parquet value takes per physical type (BYTE_ARRAY: its offset; the text is counted apart).
PHYSICAL_WIDTH = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8, "BYTE_ARRAY": 4}


@dataclass(frozen=True)
class Budget:
    """Per file. The defaults hold every published release tsbench reads with room to spare, and keep
    a refused file's check far under 1 GiB of host memory."""

    file_bytes: int = (
        256 * MiB
    )  # bytes on disk of one file read whole (CSV, text, a TSAIA release file) or line by line
    json_bytes: int = 32 * MiB  # one JSON document (parsed, short keys and numbers take ~15x their text)
    line_bytes: int = 16 * MiB  # one line of a JSON-lines file
    rows: int = 2_000_000  # rows of one parquet file
    decoded_bytes: int = 256 * MiB  # what one parquet file decodes to, dictionaries expanded
    samples: int = 16 * 2**20  # values of one WFDB read (channels x samples), as its header declares

    def scaled(self) -> Budget:
        """The budget times TSBENCH_INPUT_BUDGET_SCALE (a positive number; 1 when unset)."""
        raw = os.environ.get(SCALE_ENV)
        if not raw:
            return self
        try:
            factor = float(raw)
        except ValueError:
            factor = 0.0
        if not factor > 0:
            raise UserError(f"{SCALE_ENV}={raw!r} must be a positive number")
        return Budget(**{f.name: int(getattr(self, f.name) * factor) for f in dataclasses.fields(self)})


def _amount(value: int, unit: str) -> str:
    if unit == "bytes" and value >= MiB:
        return f"{value / MiB:,.1f} MiB"
    return f"{value:,} {unit}"


def refuse_over(label: str, what: str, value: int, limit: int, unit: str = "bytes") -> None:
    """One line when `value` is past `limit`: the file, what was measured, both amounts, the way out."""
    if value > limit:
        raise UserError(
            f"{label}: {what} is {_amount(value, unit)}, over the input budget of {_amount(limit, unit)} "
            f"(nothing was read into memory; set {SCALE_ENV}=2 to allow twice as much)"
        )


MAX_PAGES = 1_000_000  # pages of one file (a 256 MiB file of 1 MiB pages has 256): past it, refused


# -- parquet -----------------------------------------------------------------------------------------
Pages = dict[tuple[int, int], tuple[int, int]]  # (row group, column) -> (decompressed bytes, values)


def declared_sizes(
    metadata: pq.FileMetaData, columns: set[str] | None = None, groups: range | None = None, pages: Pages | None = None
) -> tuple[int, int]:
    """(decompressed bytes, decoded fixed-width bytes) the footer declares over the column chunks of
    `columns` (top-level names; None: all) in `groups` (None: every row group), or the page headers
    (`pages`, from `page_sizes`) where they declare more. The second catches run-length pages:
    millions of equal numbers in a few bytes on disk."""
    decompressed = fixed = 0
    for group in groups if groups is not None else range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for index in range(row_group.num_columns):
            column = metadata.schema.column(index)
            if columns is not None and column.path.split(".")[0] not in columns:
                continue
            chunk = row_group.column(index)
            size, values = max(int(chunk.total_uncompressed_size), 0), max(int(chunk.num_values), 0)
            if pages is not None:
                size, values = max(size, pages[group, index][0]), max(values, pages[group, index][1])
            decompressed += size
            width = PHYSICAL_WIDTH.get(chunk.physical_type) or max(int(column.length or 0), 1)
            fixed += values * width
    return decompressed, fixed


@contextlib.contextmanager
def _binary(source) -> Iterator[BinaryIO]:
    if hasattr(source, "read"):
        yield source
    else:
        with open(source, "rb") as handle:
            yield handle


def page_sizes(source, metadata: pq.FileMetaData, label: str) -> Pages:
    """What each column chunk's page headers declare (parquet_pages), without decoding a page."""
    found: Pages = {}
    totals = PageTotals()
    with _binary(source) as handle:
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            for index in range(row_group.num_columns):
                chunk = row_group.column(index)
                start = chunk.dictionary_page_offset if chunk.has_dictionary_page else None
                start = start if start else chunk.data_page_offset
                before = (totals.uncompressed, totals.values)
                try:
                    chunk_pages(handle, int(start), int(chunk.total_compressed_size), totals, MAX_PAGES)
                except MalformedPages as exc:
                    raise UserError(f"{label} is not a readable parquet file ({exc})") from None
                found[group, index] = (totals.uncompressed - before[0], totals.values - before[1])
    return found


def _expanded(array: pa.Array) -> int:
    """Bytes `array` takes once every dictionary is expanded to one value per row."""
    kind = array.type
    if pa.types.is_dictionary(kind):
        if not len(array.dictionary):
            return 4 * len(array)
        lengths = pc.take(pc.binary_length(array.dictionary), array.indices)  # a null index: a null length
        return int(pc.sum(lengths).as_py() or 0) + 4 * len(array)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _expanded(array.flatten()) + 8 * len(array)
    if pa.types.is_struct(kind):
        return sum(_expanded(array.field(i)) for i in range(kind.num_fields))
    return int(array.nbytes)


def expanded_bytes(table: pa.Table) -> int:
    """The bytes `table` (read with its text columns as dictionaries) decodes to."""
    return sum(_expanded(chunk) for column in table.columns for chunk in column.chunks)


def _unreadable(label: str, exc: Exception) -> UserError:
    return UserError(f"{label} is not a readable parquet file ({type(exc).__name__}: {str(exc)[:120]})")


def _refuse_declared(
    label: str, metadata: pq.FileMetaData, budget: Budget, columns, groups, where: str, pages: Pages | None = None
) -> None:
    decompressed, fixed = declared_sizes(metadata, columns, groups, pages)
    whose, says, counts = ("footer", "declares", "footer's") if pages is None else ("page headers", "declare", "pages'")
    refuse_over(label, f"the decompressed size its {whose} {says}{where}", decompressed, budget.decoded_bytes)
    refuse_over(
        label,
        f"the decoded size of its values (from the {counts} value counts){where}",
        fixed,
        budget.decoded_bytes,
    )


def check_parquet(
    path: str | Path,
    label: str,
    budget: Budget,
    *,
    columns: list[str] | None = None,
    each_row_group: bool = False,
) -> None:
    """Refuse the parquet file at `path` unless it fits `budget`: rows, declared decompressed and
    decoded sizes first (the footer alone), then its text columns read as dictionaries (a dictionary
    value is held once however many rows repeat it) and measured as they would expand. The values
    themselves are never built here.

    `columns` (top-level names): only what a reader reads of the file counts, file-wide.
    `each_row_group`: the whole file is read one row group at a time (tsbench's own series files,
    whose values may be larger than any budget in all), so every row group must fit on its own,
    besides `columns` file-wide."""
    try:
        reader = pq.ParquetFile(path)
        metadata = reader.metadata
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(label, exc) from None
    rows = max(metadata.num_rows, sum(metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)))
    refuse_over(label, "the row count its footer declares", rows, budget.rows, "rows")
    wanted = None if columns is None else set(columns)
    for pages in (None, page_sizes(path, metadata, label)):  # the footer alone first: a cheap refusal
        if each_row_group:
            for group in range(metadata.num_row_groups):
                where = f" for row group {group}"
                _refuse_declared(label, metadata, budget, None, range(group, group + 1), where, pages)
            if wanted is not None:
                where = f" for its columns {', '.join(columns)}"
                _refuse_declared(label, metadata, budget, wanted, None, where, pages)
        else:
            _refuse_declared(label, metadata, budget, wanted, None, "", pages)
    text = [
        metadata.schema.column(i).path
        for i in range(metadata.num_columns)
        if metadata.schema.column(i).physical_type == "BYTE_ARRAY"
    ]
    if not text:
        return
    try:
        compact = pq.ParquetFile(path, read_dictionary=text)
        top = list(dict.fromkeys(name.split(".")[0] for name in text))
        if each_row_group:
            for group in range(metadata.num_row_groups):
                size = expanded_bytes(compact.read_row_group(group, columns=top))
                refuse_over(
                    label, f"its text once dictionaries are expanded, in row group {group}", size, budget.decoded_bytes
                )
        read = top if wanted is None else [name for name in top if name in wanted]
        if read and (wanted is not None or not each_row_group):
            # row group by row group: arrow reads nested dictionary columns of several groups as one
            # chunked array it cannot build ("Nested data conversions not implemented"); the sum is the same
            size = sum(expanded_bytes(compact.read_row_group(g, columns=read)) for g in range(metadata.num_row_groups))
            refuse_over(label, "its text once dictionaries are expanded", size, budget.decoded_bytes)
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(label, exc) from None


def read_parquet(path: str | Path, label: str) -> pa.Table:
    """The parquet file at `path` as a table (pandas metadata kept, as pandas.read_parquet reads it):
    only once `check_parquet` has let it through."""
    try:
        return pq.read_table(path, use_pandas_metadata=True)
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(label, exc) from None


# -- WFDB headers --------------------------------------------------------------------------------------
def wfdb_samples(label: str, n_signals: int, length: int, budget: Budget) -> None:
    """A whole-record read holds channels x length values: refuse a header that declares too many."""
    refuse_over(
        label, "the record its header declares (channels x samples)", n_signals * length, budget.samples, "values"
    )
