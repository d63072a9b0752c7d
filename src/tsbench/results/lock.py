"""One writer per run directory: an exclusive flock on a lock file inside it.

Two evals into one run dir would both run every pending row and journal each key twice, so the
second one stops at once and says who holds the dir. The lock is an OS lock on an open file: it
ends with the process that holds it (exit, crash, kill -9), so a stale lock from a dead process is
simply taken over; the pid/host/start time written in the file are only there to name the holder.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from pathlib import Path

from tsbench.core import json_input
from tsbench.core.errors import UserError
from tsbench.results.records import now_utc

LOCK_FILE = ".tsbench.lock"


class RunDirLock:
    """Held from construction until `release()` (or the process ends)."""

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / LOCK_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(self.path)
            os.close(fd)
            raise UserError(
                f"{self.path.parent} is being written by {holder}; wait for it to finish, or use another --out"
            ) from None
        self._fd: int | None = fd
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started_at": now_utc()}).encode())

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> RunDirLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _describe(path: Path) -> str:
    """'pid 123 on host since 2026-...' from the lock file, or a plain phrase when it is unreadable."""
    try:
        info = json_input.read_json(path)
        return f"pid {info['pid']} on {info['host']} since {info['started_at']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"
