"""JSON that someone else wrote: a run's run.json or results.json copied from another machine, a
dataset's manifest, a line of a journal or a responses file, a model's reply, a kernel's message.

Python's parser recurses once per nesting level, so `[[[[...]]]]` a few thousand deep raises
RecursionError, which no `except ValueError` around a parse catches: a 200 KB file ended `leaderboard`,
`show`, `describe` and `score` in a traceback. Here nesting too deep is a `UserError` (a ValueError:
what a malformed document already raises), so every caller that treats malformed JSON as malformed
treats this the same, and one that does not says one line (exit 2). A file is refused past its
size before it is read (`MAX_FILE_BYTES`: far above any file tsbench writes).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tsbench.core.errors import UserError

__all__ = ["MAX_FILE_BYTES", "loads", "read_json"]

MAX_FILE_BYTES = 64 * 2**20  # a run.json, results.json or manifest is a few KiB


def loads(text: str | bytes, label: str = "the text") -> Any:
    """`json.loads(text)`; nesting too deep to parse is a UserError naming `label`."""
    try:
        return json.loads(text)
    except RecursionError:
        raise UserError(f"{label} is nested too deeply to read as JSON") from None


def read_json(path: str | Path, limit: int = MAX_FILE_BYTES) -> Any:
    """The JSON document in the file at `path`: a UserError naming the file when it is over `limit`
    bytes, not UTF-8 or not JSON (OSError when it cannot be opened)."""
    path = Path(path)
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limit:
            raise UserError(f"{path}: {size:,} bytes, more than the {limit:,} a JSON file here may hold; refused")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise UserError(f"{path}: more than the {limit:,} bytes a JSON file here may hold; refused")
    try:
        return loads(data.decode("utf-8"), str(path))
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except UserError:
        raise
    except ValueError as exc:  # an integer past Python's digit limit
        raise UserError(f"{path} is not valid JSON ({str(exc)[:80]})") from None
