"""The one reader of the files a user points `--path` at: each file a family reads is checked here,
read here (or handed, checked, to the library that reads its format) and recorded for the manifest.

A dataset folder is hostile input. A symlink can point at a host file, a name written inside a file
(a REFERENCE.csv line, a query_group, a file a CSV cell names) can climb out with `..` or be
absolute, a FIFO blocks a reader forever and a device never ends. So a path is resolved and must
stay under the root (the --path folder, or the folder of a --path file); symlinks inside the root
that stay inside are followed. Anything else is refused in one line naming the file (a UserError:
exit 2). Every file read is recorded, and `hashes()` gives their sha256 keyed by their path under
the root, for the manifest. How much a file may make us hold is input_budget's part.

Libraries that open a file by name (wfdb, pyedflib, aeon, pandas) get the path only after it is
checked; wfdb also opens the signal files a header names, so `wfdb_header` checks those too.

What is followed and what is not: a --path that is itself a symlink to a folder is followed (the user
named it); a --path file must lie in the folder it is named in (a symlinked file leading elsewhere is
refused, so names written inside it are never looked up beside a host file). Every read opens the
file from the root one component at a time without following a symlink, so a file or folder swapped
for a symlink after it was checked is refused rather than read; parquet is checked and read through
one descriptor. (A library that opens by name re-opens the path: a swap in that moment is not seen.)
A hard link is an ordinary file here: it cannot be told from the file it links, and a downloaded
dataset's hard links (tar, git-annex, `cp -al`) can only link files of the dataset itself, since
creating one needs write access to the file's own filesystem and, on Linux, ownership of it.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa

from tsbench.core.errors import UserError
from tsbench.core.input_budget import Budget, check_parquet, read_parquet, refuse_over, wfdb_samples
from tsbench.core.provenance import sha256_file

KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}
HF_CACHE_HINT = (
    " (a Hugging Face cache snapshot links into blobs/: download with `hf download REPO --repo-type dataset "
    "--local-dir DIR`, which writes plain files, and pass --path DIR)"
)


class UserFolder:
    """The files under one --path. `family` names the family in messages; `budget` bounds each file.
    A command other than generate names itself (`reader`) and what its root is to the user (`scope`)."""

    def __init__(
        self,
        path: str | Path,
        family: str,
        budget: Budget | None = None,
        *,
        reader: str | None = None,
        scope: str = "--path",
    ):
        given = Path(path).expanduser()
        try:
            self.given = given.resolve(strict=True)
        except (OSError, RuntimeError):
            raise UserError(f"{scope} {given} does not exist (or is a broken or looping symlink)") from None
        # A folder is the root as named (a symlink to a folder is followed: the user named it). A file's
        # root is the folder it was named in, not its target's: a symlinked file leading out is refused,
        # so the names written inside it are never looked up beside some host file.
        self.root = self.given if self.given.is_dir() else Path(os.path.abspath(given)).parent.resolve()
        self.family = family
        self.reader = reader or f"--family {family}"  # who reads, in messages
        self.scope = scope  # what the root is called, in messages
        self.budget = (budget or Budget()).scaled()
        self._read: dict[Path, str] = {}  # real path -> the name it was read by (under the root)
        self._fits: set[tuple] = set()  # parquet files that passed the budget: (real path, size, mtime, budget)
        if not self.given.is_dir() and not self.given.is_relative_to(self.root):
            raise UserError(
                f"{scope} {given}: leads to {self.given}, outside the folder it is named in ({self.root}); refused "
                f"(pass {scope} {self.given} if that is the file you mean)"
            )

    # -- where a path leads ----------------------------------------------------------------------
    def label(self, path: str | Path) -> str:
        """`path` as the user knows it: relative to the root where it lies under it."""
        absolute = Path(os.path.abspath(path))
        return str(absolute.relative_to(self.root)) if absolute.is_relative_to(self.root) else str(path)

    def _real(self, path: str | Path) -> Path | None:
        """The resolved path (None when nothing is there), refused when it leads out of the root."""
        try:
            real = Path(path).resolve(strict=True)
        except (FileNotFoundError, NotADirectoryError):  # nothing there (`report.json/tool.py`: no such folder)
            return None
        except (OSError, RuntimeError) as exc:  # a symlink loop, a name too long
            raise UserError(f"{self.label(path)}: cannot be resolved ({exc}); {self.reader}") from None
        if not real.is_relative_to(self.root):
            hint = HF_CACHE_HINT if "blobs" in real.parts else ""
            raise UserError(
                f"{self.label(path)}: leads to {real}, outside {self.scope} {self.root}; refused "
                f"({self.reader} reads nothing outside {self.scope}){hint}"
            )
        return real

    def named(self, base: str | Path, name: str, source: str | Path | None = None) -> Path:
        """`base / name` for a `name` written inside a file (`source`: which, for the message):
        relative, plain parts, never `..`."""
        text = str(name).strip()
        parts = PurePosixPath(text.replace("\\", "/")).parts
        drive = bool(parts) and len(parts[0]) == 2 and parts[0][1] == ":"  # a Windows drive: C:
        if not parts or drive or "\x00" in text or text.startswith(("/", "\\", "~")) or ".." in parts:
            where = self.label(source) if isinstance(source, Path) else source or f"a file in {self.label(base)}"
            raise UserError(
                f"{where}: names {text!r}, not a plain relative path under {self.scope} {self.root}; refused "
                f"({self.reader} reads nothing outside {self.scope})"
            )
        return Path(base) / Path(*parts)

    def is_file(self, path: str | Path) -> bool:
        """Whether a regular file is there (False for nothing or a folder); refused when it leads out
        of the root or is a FIFO, device or socket."""
        real = self._real(path)
        if real is None or real.is_dir():
            return False
        self._regular(path, real)
        return True

    def is_dir(self, path: str | Path) -> bool:
        real = self._real(path)
        return real is not None and real.is_dir()

    def _regular(self, path: str | Path, real: Path) -> os.stat_result:
        info = os.stat(real)
        if not stat.S_ISREG(info.st_mode):
            kind = KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
            raise UserError(f"{self.label(path)}: is {kind}, not a regular file; refused ({self.reader})")
        return info

    def _checked(self, path: str | Path) -> Path:
        real = self._real(path)
        if real is None:
            raise UserError(f"{self.label(path)}: no such file under {self.scope} {self.root} ({self.reader})")
        self._regular(path, real)
        self._read.setdefault(real, self.label(path))
        return real

    def check(self, path: str | Path) -> Path:
        """`path` (under the root) once it is known to be a regular file there; recorded as read.
        Returns the path as given (absolute), the name a library opens it by."""
        self._checked(path)
        return Path(os.path.abspath(path))

    def path(self, path: str | Path) -> str:
        """`check`, as the string a library that opens files by name is given."""
        return str(self.check(path))

    # -- finding files -----------------------------------------------------------------------------
    def walk(self, keep: Callable[[Path], bool] | None = None) -> list[Path]:
        """Every file under --path whose path `keep` accepts (or --path itself, when it is a file),
        sorted. Folders that are symlinks are not entered: one that leads out of the root is refused
        (named, rather than passed over in silence), one that stays inside is walked where it lies.
        Each file is checked when it is read."""
        if not self.given.is_dir():
            return [self.given]
        found = []
        for folder, folders, names in os.walk(self.root):
            for name in folders:
                if os.path.islink(os.path.join(folder, name)):
                    self._real(os.path.join(folder, name))  # refused when it leads out
            folders.sort()
            found += [p for p in (Path(folder) / n for n in names) if keep is None or keep(p)]
        return sorted(found)

    def listdir(self, folder: str | Path) -> list[Path]:
        """The entries of a folder under the root, sorted ([] when it is not a folder)."""
        return sorted(Path(folder) / name for name in os.listdir(folder)) if self.is_dir(folder) else []

    # -- reading ---------------------------------------------------------------------------------
    def _open(self, path: str | Path, limit: int | None) -> tuple[int, int]:
        """(descriptor, limit) of the checked file, opened without following a symlink and without
        blocking (a FIFO swapped in meanwhile is caught on the descriptor), its size within `limit`
        bytes (default: the budget's file_bytes)."""
        limit = self.budget.file_bytes if limit is None else limit
        fd = self._descriptor(path, self._checked(path))
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UserError(f"{self.label(path)}: is not a regular file; refused ({self.reader})")
            refuse_over(self.label(path), "the file", info.st_size, limit)
        except BaseException:
            os.close(fd)
            raise
        return fd, limit

    def _descriptor(self, path: str | Path, real: Path) -> int:
        """A descriptor on `real`, opened one component at a time from the root without following a
        symlink: a file or folder swapped for a symlink since `real` was resolved is refused, never read."""
        parts = real.relative_to(self.root).parts
        no_follow = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            folder = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise UserError(f"{self.scope} {self.root}: cannot be opened ({exc.strerror}); {self.reader}") from None
        try:
            for part in parts[:-1]:
                inner = os.open(part, no_follow | os.O_DIRECTORY, dir_fd=folder)
                os.close(folder)
                folder = inner
            return os.open(parts[-1], no_follow | os.O_NONBLOCK, dir_fd=folder)
        except OSError as exc:
            raise UserError(
                f"{self.label(path)}: changed while it was read ({exc.strerror}: a symlink or something else was "
                f"swapped in); refused ({self.reader})"
            ) from None
        finally:
            os.close(folder)

    def sized_path(self, path: str | Path, limit: int | None = None) -> str:
        """`path` for a library that reads it whole, once its size is within `limit` (default: the
        budget's file_bytes)."""
        fd, _ = self._open(path, limit)
        os.close(fd)
        return self.path(path)

    def read_bytes(self, path: str | Path, limit: int | None = None) -> bytes:
        """The file's bytes, refused past `limit` (default: the budget's file_bytes)."""
        fd, limit = self._open(path, limit)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(limit + 1)
        refuse_over(self.label(path), "the file", len(data), limit)  # it grew since it was measured
        return data

    def head(self, path: str | Path, size: int = 4096) -> bytes:
        """The first `size` bytes (to tell formats apart), within the same checks."""
        fd, _ = self._open(path, None)
        with os.fdopen(fd, "rb") as handle:
            return handle.read(size)

    def read_text(self, path: str | Path, limit: int | None = None, errors: str = "strict") -> str:
        try:
            return self.read_bytes(path, limit).decode("utf-8", errors=errors)
        except UnicodeDecodeError as exc:
            raise UserError(f"{self.label(path)}: is not UTF-8 text ({exc.reason} at byte {exc.start})") from None

    def open_text(self, path: str | Path, limit: int | None = None, newline: str | None = None) -> io.TextIOWrapper:
        """A text handle (UTF-8) on the checked file, for readers that stream it (csv)."""
        fd, _ = self._open(path, limit)
        return io.TextIOWrapper(os.fdopen(fd, "rb"), encoding="utf-8", newline=newline)

    def read_json(self, path: str | Path, limit: int | None = None) -> Any:
        """One JSON document (within `limit`, default the budget's json_bytes); malformed or too
        deeply nested JSON is one line."""
        limit = self.budget.json_bytes if limit is None else limit
        return parse_json(self.read_text(path, limit), self.label(path))

    def json_lines(self, path: str | Path) -> Iterator[Any]:
        """The records of a JSON-lines file, one line in memory at a time (blank lines skipped), each
        within the budget's line_bytes."""
        label, longest = self.label(path), self.budget.line_bytes
        with self.open_text(path) as handle:
            number = 0
            while line := _line(handle, longest + 1, f"{label}:{number + 1}"):
                number += 1
                if len(line) > longest:
                    refuse_over(f"{label}:{number}", "the line", len(line.encode()), longest)
                if line.strip():
                    yield parse_json(line, f"{label}:{number}", "a JSON line")

    def parquet(self, path: str | Path, rows: int | None = None) -> pa.Table:
        """A parquet file as a table, once its footer and dictionaries fit the budget (input_budget);
        `rows`: a family's own row budget. Checked and read through one descriptor, so the bytes read
        are the bytes checked."""
        budget = self.budget if rows is None else dataclasses.replace(self.budget, rows=rows)
        fd, _ = self._open(path, None)
        with os.fdopen(fd, "rb") as handle:
            check_parquet(handle, self.label(path), budget)
            handle.seek(0)
            return read_parquet(handle, self.label(path))

    def check_parquet(self, path: str | Path, rows: int | None = None) -> None:
        """`parquet`'s checks alone (footer, expanded dictionaries), before any value is read; a file
        that passed is not checked again while its size and mtime stay."""
        budget = self.budget if rows is None else dataclasses.replace(self.budget, rows=rows)
        name = self.sized_path(path)
        info = os.stat(name)
        key = (self._checked(path), info.st_size, info.st_mtime_ns, budget)
        if key not in self._fits:
            check_parquet(name, self.label(path), budget)
            self._fits.add(key)

    def wfdb_header(self, wfdb, stem: str | Path, *, read: int | None = None):
        """The header of the WFDB record `stem` (no suffix), with every file wfdb will open for it
        checked first: the .hea, each signal file it names (wfdb opens those by the header's names,
        in the header's folder; its grammar allows no `/` or `..`) and each segment's header and
        files. `read`: the most samples per channel read at once (None: the whole record); that
        many times the declared channels must fit the budget."""
        stem = Path(stem)
        self.check(stem.parent / f"{stem.name}.hea")
        header = self._parsed_header(wfdb, stem)
        segments = [s for s in getattr(header, "seg_name", None) or [] if s and s != "~"]
        for name in segments:
            segment = self.named(stem.parent, name, stem.parent / f"{stem.name}.hea")
            self.check(segment.parent / f"{segment.name}.hea")
            self._signal_files(self._parsed_header(wfdb, segment), segment)
        self._signal_files(header, stem)
        length = int(header.sig_len or 0) if read is None else min(read, int(header.sig_len or 0))
        wfdb_samples(self.label(stem), int(header.n_sig or 0), length, self.budget)
        return header

    def _parsed_header(self, wfdb, stem: Path):
        try:
            return wfdb.rdheader(str(stem))
        except Exception as exc:  # wfdb raises HeaderSyntaxError, ValueError and others
            raise UserError(
                f"{self.label(stem)}.hea is not a WFDB header ({type(exc).__name__}: {str(exc)[:120]})"
            ) from None

    def _signal_files(self, header, stem: Path) -> None:
        for name in dict.fromkeys(getattr(header, "file_name", None) or []):
            if name and not str(name).startswith("~"):
                self.check(self.named(stem.parent, name, stem.parent / f"{stem.name}.hea"))

    # -- the manifest ----------------------------------------------------------------------------
    def hashes(self) -> dict[str, str]:
        """sha256 of every file read so far, keyed by its path under the root."""
        return {name: sha256_file(real) for real, name in sorted(self._read.items(), key=lambda kv: kv[1])}

    def read(self) -> list[str]:
        """The names (under the root) of every file read so far."""
        return sorted(self._read.values())


def _line(handle: io.TextIOWrapper, size: int, label: str) -> str:
    try:
        return handle.readline(size)
    except UnicodeDecodeError as exc:
        raise UserError(f"{label} is not UTF-8 text ({exc.reason})") from None


def parse_json(text: str, label: str, what: str = "valid JSON") -> Any:
    """`text` parsed; malformed JSON, a number too long to read or nesting too deep for the parser is
    one line naming `label` (a file, or `file:line`)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise UserError(f"{label} is nested too deeply to read as JSON") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{label} is not {what} ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except ValueError as exc:  # an integer past Python's digit limit
        raise UserError(f"{label} is not {what} ({str(exc)[:80]})") from None


def user_folder(path: str | Path | UserFolder, family: str, budget: Budget | None = None) -> UserFolder:
    """A reader's entry point takes a UserFolder, or a path it makes one of."""
    return path if isinstance(path, UserFolder) else UserFolder(path, family, budget)
