"""`tsbench convert-tsaia`: TSAIA's release as parquet, its pickles loaded only inside the jail.

The release (Hugging Face `Melady/TSAIA`) keeps each item's arrays, ground truth, context and
constraint in pickle files that its CSVs name (get_pkl.py loads them). Loading a pickle can run any
code, so each is copied by value into a jailed kernel (harness.runtime.Sandbox: no network, no host
files but the interpreter), loaded there and written back as tagged JSON (tasks/tsaia/encode.py);
the host only parses that JSON, strictly, and writes `multiple_choice.parquet` and
`analysis_questions.parquet` with a `conversion.json` beside them (every source file's sha256). The
CSV's other columns are copied as text. A file that cannot be loaded stops the conversion with one
line naming it, unless `skip_unreadable` is set: then its item keeps an error and the reader skips it
(counted in the manifest).

The release folder is read as every --path is (core/user_files.py): the CSVs and each file they name
must lie under it (a name that climbs out, a symlink that leads out, a FIFO or device is one line,
before any jail starts), each within the input budget, and each file read is in conversion.json with
its sha256. What the jail loads is bounded there (its memory, MAX_VALUE_CHARS back).
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.core.errors import UserError
from tsbench.core.provenance import git_commit, write_json
from tsbench.core.user_files import UserFolder
from tsbench.harness.runtime import SandboxError
from tsbench.harness.runtime.sandbox import Sandbox
from tsbench.tasks.tsaia import encode as encode_module
from tsbench.tasks.tsaia.reader import CONVERTED, FILE_COLUMNS, TABLES
from tsbench.tasks.tsaia.tagged import TagError, decode

BATCH_BYTES = 128 * 2**20  # source files per jail (copied into its working directory)
CHUNK_CHARS = 128 * 1024  # what one cell prints: under the host's per-cell stdout buffer
MAX_VALUE_CHARS = 512 * 2**20
LOADER = r"""
import json as _tsb_json, pickle as _tsb_pickle
def _tsb_load(name):
    if name.endswith(".npy"):
        import numpy
        value = numpy.load(name, allow_pickle=False)
    elif name.endswith(".json"):
        with open(name, encoding="utf-8") as handle:
            value = _tsb_json.load(handle)
    else:
        with open(name, "rb") as handle:
            value = _tsb_pickle.load(handle)
    return _tsb_json.dumps(encode(value), separators=(",", ":"), allow_nan=False)
"""
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


def _csv_rows(release: UserFolder, path: Path) -> list[dict[str, str]]:
    try:
        with release.open_text(path, newline="") as handle:
            return [dict(row) for row in csv.DictReader(handle)]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"{release.label(path)}: is not a UTF-8 CSV file ({str(exc)[:120]})") from None


def _source(release: UserFolder, table: Path, cell: str | None) -> Path | None:
    """The release file a CSV cell names: a plain relative name, a regular file under the release
    folder (recorded as read)."""
    if cell is None or not cell.strip() or cell.strip().lower() == "nan":
        return None
    path = release.named(release.root, cell, table)
    if not release.is_file(path):
        raise UserError(f"{cell!r} (named by {release.label(table)}) is not a file under {release.root}")
    return release.check(path)


def _batches(paths: list[Path]) -> Iterator[list[Path]]:
    batch, size = [], 0
    for path in paths:
        if batch and size + path.stat().st_size > BATCH_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(path)
        size += path.stat().st_size
    if batch:
        yield batch


def _read_back(box: Sandbox, name: str) -> str:
    """The tagged JSON of one file, loaded in the kernel and printed back in bounded chunks."""
    cell = box.run(f"_tsb_out = _tsb_load({name!r}); print(len(_tsb_out))")
    if cell.error:
        raise ValueError(cell.error.strip().splitlines()[-1][:300] if cell.error.strip() else "the load failed")
    try:
        total = int(cell.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ValueError("the kernel did not say how long the value is") from None
    if not 0 <= total <= MAX_VALUE_CHARS:
        raise ValueError(f"a value of {total} characters")
    parts = []
    for start in range(0, total, CHUNK_CHARS):
        chunk = box.run(f"print(_tsb_out[{start}:{start + CHUNK_CHARS}], end='')")
        if chunk.error:
            raise ValueError(chunk.error.strip()[-300:])
        parts.append(chunk.stdout)
    text = "".join(parts)
    if len(text) != total:
        raise ValueError("the value came back cut")
    return text


def convert_files(
    release: UserFolder, paths: list[Path], progress: Callable[[int], None] | None = None
) -> dict[Path, str | Exception]:
    """{path: tagged JSON text, or the error that stopped it} for each source file (under `release`)."""
    out: dict[Path, str | Exception] = {}
    setup = Path(encode_module.__file__).read_text(encoding="utf-8") + LOADER
    for batch in _batches(paths):
        files = {f"f{i}{path.suffix}": release.read_bytes(path) for i, path in enumerate(batch)}
        room = 2 * sum(len(data) for data in files.values()) + 2**26  # the copies, and what a load writes
        try:
            with Sandbox({}, files=files, cell_timeout_s=120, work_bytes=room, file_bytes=max(room, 2**30)) as box:
                ready = box.run(setup)
                if ready.error:
                    raise SandboxError(f"the converter could not start in the jail: {ready.error[-300:]}")
                for name, path in zip(files, batch):
                    try:
                        text = _read_back(box, name)
                        decode(json.loads(text))  # the host reads it strictly, now rather than later
                        out[path] = text
                    except (ValueError, TagError, RecursionError) as exc:
                        out[path] = exc
                    if progress is not None:
                        progress(1)
        except SandboxError as exc:
            raise UserError(str(exc)) from None
    return out


def convert_release(
    root: Path, out: Path, *, skip_unreadable: bool = False, progress: Callable[[str, int], Callable] | None = None
) -> Path:
    """Write the converted tables and conversion.json under `out`; the manifest's path. Every file the
    conversion reads is checked (under the release folder, a regular file, within the budget) before
    the first jail starts."""
    release = UserFolder(root, "tsaia", reader="tsbench convert-tsaia", scope="the release folder")
    root = release.root
    tables = {name: root / f"{name}.csv" for name in TABLES if release.is_file(root / f"{name}.csv")}
    if not tables:
        raise UserError(f"no multiple_choice.csv or analysis_questions.csv under {root} (the Melady/TSAIA release)")
    rows = {name: _csv_rows(release, path) for name, path in tables.items()}
    named: dict[tuple[str, int, str], Path] = {}
    for name, table in rows.items():
        for number, row in enumerate(table):
            for column in FILE_COLUMNS[name]:
                path = _source(release, tables[name], row.get(column))
                if path is not None:
                    named[(name, number, column)] = path
    unique = sorted(set(named.values()))
    for path in unique:
        release.sized_path(path)  # each within the budget, before any is copied into a jail
    advance = progress("loading pickles in the jail", len(unique)) if progress is not None and unique else None
    converted = convert_files(release, unique, advance)
    failed = {release.label(p): str(v) for p, v in converted.items() if isinstance(v, Exception)}
    if failed and not skip_unreadable:
        first, why = next(iter(failed.items()))
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        raise UserError(f"cannot read {first}{more}: {why}; --skip-unreadable converts the rest")
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name, table in rows.items():
        columns: dict[str, list[Any]] = {c: [] for c in table[0]} if table else {}
        columns["conversion_error"] = []
        for number, row in enumerate(table):
            errors = []
            for column in columns:
                if column == "conversion_error":
                    continue
                path = named.get((name, number, column))
                value = row.get(column)
                if path is not None:
                    value = converted[path] if isinstance(converted[path], str) else None
                    if value is None:
                        errors.append(f"{column}: {converted[path]}")
                columns[column].append(value)
            columns["conversion_error"].append("; ".join(errors) or None)
        table_out = pa.table({c: pa.array(v, type=pa.string()) for c, v in columns.items()})
        pq.write_table(table_out, out / f"{name}.parquet", compression="zstd")
        counts[name] = len(table)
    manifest = {
        "converted": CONVERTED,
        "counts": counts,
        "unreadable": failed,
        "sources": release.hashes(),  # the CSVs and every file they name
        "git_commit": git_commit(),
    }
    path = out / "conversion.json"
    write_json(path, manifest)
    return path
