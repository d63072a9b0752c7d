"""Where a command will write, checked once before it starts: one line, never a traceback mid-run.

A folder flag (`--out DIR`, `--log-dir DIR`) must name a folder or nothing yet; a file flag (`--out
bank.parquet`) must name a file or nothing yet. Either way the nearest existing folder above it must take
a new file (a read-only mount, or a folder this user may not write, is refused) and have some room left.
`path_error` turns the OSError of a write that fails later anyway (a race, a folder made read-only
mid-run) into the same one line.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

from tsbench.core.errors import UserError

MIN_FREE_BYTES = 1 << 20  # below one MiB not even run.json and a journal line fit
PATH_ERRNOS = {errno.EEXIST, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT}


def _existing_above(path: Path, flag: str) -> Path:
    """The nearest existing ancestor of `path`; a file there is refused (nothing can be made under it)."""
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{flag} {path}: {parent} is a file, not a folder")
            return parent
    return Path("/")


def _check_writable(folder: Path, path: Path, flag: str) -> None:
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".tsbench-write-check-"):
            pass
    except OSError as exc:
        why = "read-only" if exc.errno == errno.EROFS else os.strerror(exc.errno or errno.EACCES).lower()
        raise UserError(f"{flag} {path}: cannot write in {folder} ({why}); choose another {flag}") from None
    free = shutil.disk_usage(folder).free
    if free < MIN_FREE_BYTES:
        raise UserError(f"{flag} {path}: no space left on the disk holding {folder} ({free} bytes free)")


def writable_folder(path: str | os.PathLike, flag: str = "--out") -> Path:
    """`path` as a folder a command may create or fill, or one line saying why not."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path} is a file; {flag} names a folder")
    folder = path if path.is_dir() else _existing_above(path, flag)
    _check_writable(folder, path, flag)
    return path


def writable_file(path: str | os.PathLike, flag: str = "--out") -> Path:
    """`path` as a file a command may create or replace, or one line saying why not."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{flag} {path} is a folder; {flag} names a file")
    _check_writable(_existing_above(path, flag), path, flag)
    return path


def path_error(exc: BaseException) -> str | None:
    """One line for an OSError about a path (a file where a folder is expected, read-only, missing), else None."""
    if not isinstance(exc, OSError) or exc.errno not in PATH_ERRNOS or not exc.filename:
        return None
    target = f"{exc.filename} -> {exc.filename2}" if exc.filename2 else str(exc.filename)
    reason = {errno.EEXIST: "already exists and is not a folder", errno.EROFS: "read-only file system"}.get(
        exc.errno, os.strerror(exc.errno).lower()
    )
    return f"{target}: {reason}"
