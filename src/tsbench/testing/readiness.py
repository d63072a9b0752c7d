"""Wait for a server the tests start: as long as it is alive and progressing, not by a fixed clock.

A fixed start-up deadline (120 s) fails a real-server fixture on a machine at a load of 20, where loading
SmolLM2 takes minutes of wall time but the same CPU seconds. `wait_ready` polls `ready()` while the process
lives and fails only when it has stopped making progress (no CPU time used and no log output) for
`stall_s`, or after `cap_s` in all (a hang, not a slow machine).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds the process and its waited-for children used (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def wait_ready(
    process: subprocess.Popen,
    ready: Callable[[], bool],
    *,
    log: Path | None = None,
    stall_s: float = 120.0,
    cap_s: float = 1800.0,
    poll_s: float = 0.5,
) -> None:
    """Return once `ready()` is true. Raises RuntimeError (with the log's tail) when the process exits, makes
    no progress for `stall_s`, or is not ready after `cap_s`."""
    started = last_progress = time.monotonic()
    seen = (cpu_seconds(process.pid), _size(log))
    while not ready():
        now = time.monotonic()
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode}): {_tail(log)}")
        current = (cpu_seconds(process.pid), _size(log))
        if current != seen:
            seen, last_progress = current, now
        if now - last_progress > stall_s:
            raise RuntimeError(f"the server made no progress for {stall_s:.0f} s: {_tail(log)}")
        if now - started > cap_s:
            raise RuntimeError(f"the server was not ready after {cap_s:.0f} s: {_tail(log)}")
        time.sleep(poll_s)


def _size(log: Path | None) -> int:
    try:
        return log.stat().st_size if log is not None else 0
    except OSError:
        return 0


def _tail(log: Path | None) -> str:
    try:
        return log.read_text(errors="replace")[-2000:] if log is not None else ""
    except OSError:
        return ""
