"""A folder a command may delete to write afresh: only one it wrote itself.

`--overwrite` (or `overwrite = true` in a shared --config), rescore's --out and the exports replace
their output folder whole. A folder named by mistake (`--out ~`, `out = "."` in a colleague's TOML)
used to be emptied as well. Now a folder is replaced only when it is empty or holds the file the
command writes there (its `marker`: run.json for a run); anything else is refused in one line.
"""

from __future__ import annotations

from pathlib import Path

from tsbench.core.errors import UserError

__all__ = ["check_replaceable"]


def check_replaceable(out: str | Path, marker: str, what: str, ignore: tuple[str, ...] = ()) -> None:
    """Refuse to replace the folder `out` unless it is missing, empty (but for `ignore`, e.g. this
    process's lock file) or holds `marker` (a path under it): `what` names its kind in the message."""
    out = Path(out)
    if out.is_symlink():
        raise UserError(f"{out} is a symlink; refused to replace it: name the folder itself")
    if not out.exists() or (out / marker).is_file():
        return
    if not out.is_dir():
        raise UserError(f"{out} is not a folder; refused to replace it")
    if any(child.name not in ignore for child in out.iterdir()):
        raise UserError(
            f"{out} holds files but is not {what} (no {marker}); refused to delete it: choose another --out"
        )
