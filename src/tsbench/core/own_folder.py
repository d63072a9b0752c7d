"""A folder a command may delete to write afresh: only one it provably wrote itself.

`--overwrite` (or `overwrite = true` in a --config), rescore's --out, the exports and training replace
their output folder whole. The guard used to check that a marker file existed (run.json), so a shared
TOML naming a user's folder that merely held a file called run.json deleted all of it.

Now a writer records what it wrote: `record_owned` lists every file (size and SHA-256) and folder it
left there in `OWNED_FILE`, written by tsbench alone. `check_replaceable` allows the delete only when
every entry in the folder, at any depth, is on that list and unchanged: a file the user added, a file
of ours the user replaced (other size or hash), a symlink anywhere, a fifo, or a subfolder named like
one of ours but holding anything else are each refused in one line. Files a run appends to while it
runs (its journal) are listed as growing: they may have grown since the list, but must still begin
with what was listed (a crashed run stays replaceable; one the user rewrote does not).

Folders written before the list existed are replaceable only when the caller's `legacy` check proves
them ours from their content (for a run: nothing but a run's own file names, a run.json of ours, and
a journal whose every line is a results row); anything else is refused, and the user deletes it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from tsbench.core import json_input
from tsbench.core.errors import UserError

__all__ = ["OWNED_FILE", "check_replaceable", "config_overwrite_refusal", "record_owned"]

OWNED_FILE = ".tsbench-owned.json"
_TOOL = "tsbench"
_MAX_LIST_BYTES = 16 * 2**20


def _digest(path: Path, limit: int | None = None) -> str:
    """SHA-256 of the file (of its first `limit` bytes when given)."""
    h = hashlib.sha256()
    left = limit
    with open(path, "rb") as handle:
        while left is None or left > 0:
            chunk = handle.read(1 << 20 if left is None else min(1 << 20, left))
            if not chunk:
                break
            h.update(chunk)
            if left is not None:
                left -= len(chunk)
    return h.hexdigest()


def _walk(root: Path):
    """(relative posix path, lstat) of every entry under `root`, symlinks not followed."""
    stack = [root]
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                path = Path(entry.path)
                info = entry.stat(follow_symlinks=False)
                yield path.relative_to(root).as_posix(), info
                if stat.S_ISDIR(info.st_mode):
                    stack.append(path)


def record_owned(out: str | Path, kind: str, growing: Iterable[str] = (), ignore: Iterable[str] = ()) -> None:
    """List in `out`/OWNED_FILE everything now in `out` as written by tsbench (`kind`: what the folder
    is, e.g. "run"). `growing`: top-level name patterns of files appended to after this call (a
    journal), listed with the bytes they hold now and allowed to grow; `ignore`: top-level names left
    out (this process's lock file). Call it once the writer is done, and where it starts writing."""
    out = Path(out)
    growing, ignore = tuple(growing), set(ignore) | {OWNED_FILE}
    entries: dict[str, dict] = {}
    for rel, info in _walk(out):
        if rel in ignore:
            continue
        if stat.S_ISDIR(info.st_mode):
            entries[rel] = {"type": "dir"}
        elif stat.S_ISREG(info.st_mode):
            grows = "/" not in rel and any(fnmatch.fnmatchcase(rel, p) for p in growing)
            entries[rel] = {"type": "growing" if grows else "file", "size": info.st_size}
            entries[rel]["sha256"] = _digest(out / rel, info.st_size)
    listed = {"tool": _TOOL, "kind": kind, "growing": list(growing), "entries": entries}
    tmp = out / f"{OWNED_FILE}.tmp"
    tmp.write_text(json.dumps(listed, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(out / OWNED_FILE)


def _refuse(out: Path, why: str) -> UserError:
    return UserError(f"{out} {why}; refused to delete it: choose another --out, or delete it yourself")


def _check_listed(out: Path, kind: str, what: str, ignore: set[str]) -> None:
    """Raise unless everything in `out` is on its list of what tsbench wrote, unchanged."""
    try:
        listed = json_input.read_json(out / OWNED_FILE, _MAX_LIST_BYTES)
    except (OSError, ValueError):
        listed = None
    if not (isinstance(listed, dict) and listed.get("tool") == _TOOL and isinstance(listed.get("entries"), dict)):
        raise _refuse(out, f"holds a {OWNED_FILE} that tsbench cannot read")
    if listed.get("kind") != kind:
        raise _refuse(out, f"is not {what} (tsbench wrote a {listed.get('kind')!r} there)")
    entries: dict = listed["entries"]
    growing = [str(p) for p in listed.get("growing") or []]
    for rel, info in _walk(out):
        if rel in ignore or rel in (OWNED_FILE, f"{OWNED_FILE}.tmp"):
            continue
        entry = entries.get(rel)
        mode = info.st_mode
        if stat.S_ISLNK(mode):
            raise _refuse(out, f"holds a symlink ({rel}) tsbench never writes")
        if stat.S_ISDIR(mode):
            if not isinstance(entry, dict) or entry.get("type") != "dir":
                raise _refuse(out, f"holds a folder tsbench did not write there ({rel})")
            continue
        if not stat.S_ISREG(mode):
            raise _refuse(out, f"holds {rel}, which is not a file tsbench writes")
        if not isinstance(entry, dict) or entry.get("type") not in ("file", "growing"):
            if "/" not in rel and any(fnmatch.fnmatchcase(rel, p) for p in growing):
                continue  # a file the writer appends to, created after the list was written
            raise _refuse(out, f"holds {rel}, which tsbench did not write there")
        size = entry.get("size")
        if not isinstance(size, int) or (info.st_size != size if entry["type"] == "file" else info.st_size < size):
            raise _refuse(out, f"holds {rel}, changed since tsbench wrote it")
        if _digest(out / rel, size) != entry.get("sha256"):
            raise _refuse(out, f"holds {rel}, changed since tsbench wrote it")


def check_replaceable(
    out: str | Path,
    kind: str,
    what: str,
    *,
    marker: str,
    ignore: tuple[str, ...] = (),
    legacy: Callable[[Path], str | None] | None = None,
) -> None:
    """Refuse (UserError, one line) to replace the folder `out` unless it is missing, empty (but for
    `ignore`: top-level names such as this process's lock file) or provably written by tsbench as a
    `kind` folder: its OWNED_FILE lists all it holds, unchanged. A folder without that list (written
    by an earlier version) goes only when it holds `marker` and `legacy(out)` finds nothing against
    it (it returns None, or the reason it cannot be ours). `what` names the kind in messages."""
    out = Path(out)
    if out.is_symlink():
        raise UserError(f"{out} is a symlink; refused to replace it: name the folder itself")
    if not out.exists():
        return
    if not out.is_dir():
        raise UserError(f"{out} is not a folder; refused to replace it")
    names = {child.name for child in out.iterdir()} - set(ignore)
    if not names:
        return
    if OWNED_FILE in names:
        _check_listed(out, kind, what, set(ignore))
        return
    if not (out / marker).is_file() or (out / marker).is_symlink():
        raise UserError(
            f"{out} holds files but is not {what} (no {marker}); refused to delete it: choose another --out"
        )
    why = legacy(out) if legacy is not None else f"tsbench keeps no record of what it wrote there ({OWNED_FILE})"
    if why is not None:
        raise _refuse(out, f"holds {marker} but cannot be proven {what}: {why}")


def config_overwrite_refusal(
    config: str | Path | None, file: dict, command_line: dict, target: str | Path, results: str | Path = "results"
) -> str | None:
    """The one line that refuses a --config file's `overwrite = true` on a folder outside this project's
    results/ (`results`, under the working directory: models/ for training), unless the command line
    sets overwrite too:
    a shared TOML must not choose which of the user's folders are replaced. None when allowed."""
    if not file.get("overwrite") or "overwrite" in command_line:
        return None
    where = Path(target).expanduser().resolve()
    root = Path(results).resolve()
    if where == root or root in where.parents:
        return None
    return (
        f"{config}: overwrite = true would replace {target}, outside this project's {results}/: "
        "give --overwrite on the command line to allow it"
    )
