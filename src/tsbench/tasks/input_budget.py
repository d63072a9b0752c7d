"""Input budgets: how much one file under --path may make the host hold, judged before a value is built.

A small file can stand for gigabytes: one parquet dictionary value repeated by every row, run-length
pages of millions of equal numbers, a WFDB header that declares any length. Each check reads only
what the file declares (the parquet footer, the WFDB header) or, for parquet text columns, the
dictionaries and their indices, and refuses past the budget (a UserError: one line, exit 2), so the
values are never materialised. (TSAIA's .npy and pickle files are loaded only in the jail, by
`tsbench convert-tsaia`; the host copies them in within the file budget.)

What a check cannot see: a parquet footer that understates the sizes its own page headers declare
(pyarrow exposes no page headers); the file-size budget bounds what such a file can hold.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tsbench.core.errors import UserError

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


# -- parquet -----------------------------------------------------------------------------------------
def declared_sizes(metadata: pq.FileMetaData) -> tuple[int, int]:
    """(decompressed bytes, decoded fixed-width bytes) the footer declares over every column chunk. The
    second catches run-length pages: millions of equal numbers in a few bytes on disk."""
    decompressed = fixed = 0
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for index in range(row_group.num_columns):
            chunk = row_group.column(index)
            decompressed += max(int(chunk.total_uncompressed_size), 0)
            column = metadata.schema.column(index)
            width = PHYSICAL_WIDTH.get(chunk.physical_type) or max(int(column.length or 0), 1)
            fixed += max(int(chunk.num_values), 0) * width
    return decompressed, fixed


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


def check_parquet(path: str | Path, label: str, budget: Budget) -> None:
    """Refuse the parquet file at `path` unless it fits `budget`: rows, declared decompressed and
    decoded sizes first (the footer alone), then its text columns read as dictionaries (a dictionary
    value is held once however many rows repeat it) and measured as they would expand. The values
    themselves are never built here."""
    try:
        metadata = pq.ParquetFile(path).metadata
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(label, exc) from None
    refuse_over(label, "the row count its footer declares", metadata.num_rows, budget.rows, "rows")
    decompressed, fixed = declared_sizes(metadata)
    refuse_over(label, "the decompressed size its footer declares", decompressed, budget.decoded_bytes)
    refuse_over(label, "the decoded size of its values (from the footer's value counts)", fixed, budget.decoded_bytes)
    text = [
        metadata.schema.column(i).path
        for i in range(metadata.num_columns)
        if metadata.schema.column(i).physical_type == "BYTE_ARRAY"
    ]
    if not text:
        return
    try:
        compact = pq.ParquetFile(path, read_dictionary=text).read()
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(label, exc) from None
    refuse_over(label, "its text once dictionaries are expanded", expanded_bytes(compact), budget.decoded_bytes)


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
