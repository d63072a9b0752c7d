"""Wait for what the tests start: as long as it is alive and progressing, not by a fixed clock.

A fixed start-up deadline (120 s) fails a real-server fixture on a machine at a load of 20, where loading
SmolLM2 takes minutes of wall time but the same CPU seconds. `wait_ready` polls `ready()` while the process
lives and fails only when it has stopped making progress (its process tree used no CPU time and its log did
not grow) for `stall_s`, or after `cap_s` in all (a hang, not a slow machine). `wait_until` is that wait
for work that is not one process (a jail pool's boots, a cluster's workers); `run` and `communicate` are
`subprocess.run` and `Popen.communicate` with the same rule in place of a fixed `timeout=`.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tsbench.core.deadline import load_factor

# CPU seconds a process tree must gain per second of wall time to count as working on a quiet machine: a
# test's own polling loop (a wake-up every 50 ms) costs about a thousandth of that. On a loaded one a working
# process gets less of a core (Linux shares the cores among sessions first, then among their processes: one
# eval stalled below 2 % for two minutes at a load of 35), so the share is divided by the load factor, down
# to FLOOR_SHARE, still far above a polling loop.
WORKING_SHARE = 0.02
FLOOR_SHARE = 0.0005


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command name (which may hold spaces): field n of proc(5) is [n - 3]."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds the process and its waited-for children used (Linux /proc; None elsewhere)."""
    fields = _stat(pid)
    if fields is None:
        return None
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """The live processes below `pid` (children, grandchildren...): kernels and jails a command starts."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit() and (fields := _stat(int(entry))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], list(children.get(pid, ()))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, ()))
    return found


def tree_cpu_seconds(pid: int) -> float | None:
    """CPU seconds of the process, the children it waited for, and its live descendants (None: no /proc)."""
    own = cpu_seconds(pid)
    if own is None:
        return None
    return own + sum(cpu_seconds(child) or 0.0 for child in descendants(pid))


class Progress:
    """Whether a process tree is still working: it gained CPU time (beyond a polling loop's) or its log
    grew since the last look. Where /proc is missing, a live process counts as working."""

    def __init__(self, pid: int, log: Path | None = None):
        self.pid, self.log = pid, log
        self.last_at = time.monotonic()
        self.seen = (tree_cpu_seconds(pid), _size(log))

    def advanced(self) -> bool:
        now = time.monotonic()
        cpu, size = tree_cpu_seconds(self.pid), _size(self.log)
        before_cpu, before_size = self.seen
        share = max(FLOOR_SHARE, WORKING_SHARE / load_factor())
        worked = cpu is None or before_cpu is None or cpu - before_cpu >= share * (now - self.last_at)
        if worked or size != before_size:
            self.seen, self.last_at = (cpu, size), now
            return True
        return False


def wait_until(
    ready: Callable[[], bool],
    *,
    pid: int | None = None,
    log: Path | None = None,
    stall_s: float = 120.0,
    cap_s: float = 1800.0,
    poll_s: float = 0.5,
) -> None:
    """Return once `ready()` is true, waiting while the process tree of `pid` works (by default this process:
    its threads and all it started, such as a pool booting jails or a cluster's workers). Raises RuntimeError
    after `stall_s` without progress (no CPU time gained, `log` not grown) or `cap_s` in all."""
    started = last_progress = time.monotonic()
    progress = Progress(os.getpid() if pid is None else pid, log)
    while not ready():
        now = time.monotonic()
        if progress.advanced():
            last_progress = now
        if now - last_progress > stall_s:
            raise RuntimeError(f"made no progress for {stall_s:.0f} s")
        if now - started > cap_s:
            raise RuntimeError(f"was not ready after {cap_s:.0f} s")
        time.sleep(poll_s)


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
    try:
        wait_until(
            lambda: ready() or process.poll() is not None,
            pid=process.pid,
            log=log,
            stall_s=stall_s,
            cap_s=cap_s,
            poll_s=poll_s,
        )
    except RuntimeError as error:
        raise RuntimeError(f"the server {error}: {_tail(log)}") from None
    if not ready():  # it exited (a process that got there and finished between two looks is ready)
        raise RuntimeError(f"the server exited ({process.returncode}): {_tail(log)}")


def run(
    command: Sequence[str],
    *,
    stall_s: float = 120.0,
    cap_s: float = 1800.0,
    input: str | bytes | None = None,
    capture_output: bool = True,
    check: bool = False,
    **popen: object,
) -> subprocess.CompletedProcess:
    """`subprocess.run(command, capture_output=True, ...)` that waits while the command's process tree is
    working and kills it (subprocess.TimeoutExpired) only after `stall_s` without progress or `cap_s` in all."""
    pipe = subprocess.PIPE if capture_output else None
    stdin = subprocess.PIPE if input is not None else popen.pop("stdin", None)
    with subprocess.Popen(command, stdin=stdin, stdout=pipe, stderr=pipe, **popen) as process:  # type: ignore[call-overload]
        out, err = communicate(process, input, stall_s=stall_s, cap_s=cap_s)
    done = subprocess.CompletedProcess(command, process.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def communicate(
    process: subprocess.Popen, input: str | bytes | None = None, *, stall_s: float = 120.0, cap_s: float = 1800.0
):
    """`process.communicate(input, timeout=...)` with a bound that follows progress: the process is killed
    (subprocess.TimeoutExpired) only after `stall_s` without progress or `cap_s` in all."""
    started = last_progress = time.monotonic()
    progress = Progress(process.pid)
    while True:
        try:
            return process.communicate(input, timeout=1.0)
        except subprocess.TimeoutExpired:
            input = None  # communicate() keeps feeding what it was given first
            now = time.monotonic()
            if progress.advanced():
                last_progress = now
            if now - last_progress > stall_s or now - started > cap_s:
                process.kill()
                out, err = process.communicate()
                raise subprocess.TimeoutExpired(process.args, now - started, out, err) from None


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
