"""A watcher that kills what a host process leaves of its jails when it dies without closing them.

bwrap's --die-with-parent does not cover the whole launch. On root hosts the outer bwrap waits, with
its parent-death signal already set, for the host to write the jail's uid map (the --userns-block-fd
handshake); the jail's pid 1 (the inner bwrap) meanwhile waits on an eventfd that only the outer one
writes, and sets its own parent-death signal later. A host killed in that window (SIGKILL, a killed
process group, a crash) takes the outer bwrap with it and leaves the inner one blocked forever: an
idle `bwrap` with PPid 1 and no children. The same holds for a host that dies after the handshake but
before the jail's pid 1 has bound its lifetime to the outer bwrap.

So each host process, while it has jails, runs one small watcher in a session of its own (a
killed process group does not take it along) that reads registrations from a pipe only the host
holds: the private directories of its sandboxes (the bwrap processes start there, and a stuck one
never leaves) and the pid of each jail's pid 1, from the moment the host learns it. When the pipe
reaches end of file, i.e. the host is gone however it went, the watcher SIGKILLs every registered pid
that is still the same process (its start time is checked) and every process whose working directory
lies in a registered directory, then exits. A host that closes its sandboxes unregisters them first,
so its normal exit kills nothing; once it has unregistered the last one it closes the pipe and the
watcher exits (the next jail starts another), so neither outlives the run that needed it. A forked child closes its copy of the pipe (and starts a watcher of
its own if it launches jails), so that it cannot keep its parent's jails alive.

Run as a script (`python -I -S orphans.py`), this module is the watcher; it imports only the
standard library.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections import Counter

__all__ = ["forget_dir", "forget_pid", "watch_dir", "watch_pid"]

_lock = threading.Lock()
_pipe: int | None = None  # the write end; the watcher reads the other one as its stdin
_owner: int | None = None  # the pid that started the watcher behind `_pipe`
_watcher: int | None = None  # its pid
_held: Counter[str] = Counter()  # what the current watcher holds ("pid N", "dir PATH")
_exited: list[int] = []  # watchers told to exit, reaped later (never waited for)


def watch_pid(pid: int) -> None:
    """Kill `pid` (a jail's pid 1) if this process dies before `forget_pid(pid)`."""
    _send(f"+pid {int(pid)}\n")


def forget_pid(pid: int) -> None:
    _send(f"-pid {int(pid)}\n")


def watch_dir(path: str | os.PathLike) -> None:
    """Kill every process whose working directory lies in `path` if this process dies before
    `forget_dir(path)`."""
    _send(f"+dir {os.fspath(path)}\n")


def forget_dir(path: str | os.PathLike) -> None:
    _send(f"-dir {os.fspath(path)}\n")


def _send(line: str) -> None:
    """Pass one registration on. The watcher lives while something is registered: once the last one is
    forgotten its pipe is closed and it exits, so no descriptor or process of it outlives the sandboxes
    (a run) that needed it."""
    data, key = line.encode(), line[1:].rstrip("\n")
    global _pipe
    with _lock:
        _reap()
        for _attempt in range(2):
            if _pipe is None or _owner != os.getpid():
                if line[0] == "-":
                    return  # nothing registered through a watcher of ours
                _start_watcher()
            try:
                os.write(_pipe, data)  # one line, under PIPE_BUF: written whole
                break
            except OSError:  # the watcher died: start another (what it held is registered again only from now on)
                _close_pipe()
        else:
            return
        if line[0] == "+":
            _held[key] += 1
            return
        _held[key] -= 1
        if _held[key] <= 0:
            del _held[key]
        if not _held:
            _close_pipe()


def _close_pipe() -> None:
    """(Lock held.) Close the watcher's pipe: at end of file it kills what it still holds, then exits."""
    global _pipe, _owner, _watcher
    if _pipe is not None:
        try:
            os.close(_pipe)
        except OSError:
            pass
    if _watcher is not None:
        _exited.append(_watcher)
    _pipe = _owner = _watcher = None
    _held.clear()


def _reap() -> None:
    """(Lock held.) Collect watchers that have exited, without waiting for any."""
    for pid in list(_exited):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _exited.remove(pid)


def _start_watcher() -> None:
    """(Lock held.) Start the watcher, its stdin the read end of a fresh pipe."""
    global _pipe, _owner, _watcher
    read_end, write_end = os.pipe()  # both close-on-exec: no other child inherits the write end
    try:
        pid = os.posix_spawn(
            sys.executable,
            [sys.executable, "-I", "-S", os.path.abspath(__file__)],
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, read_end, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ],
            setsid=True,
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    _pipe, _owner, _watcher = write_end, os.getpid(), pid
    _held.clear()


def _after_fork_in_child() -> None:
    """The parent's watcher is the parent's: close our copy of its pipe, never reap it."""
    global _watcher
    _watcher = None
    _exited.clear()
    _close_pipe()


os.register_at_fork(after_in_child=_after_fork_in_child)


# ---------------------------------------------------------------- the watcher (script) --


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _inside(cwd: str, dirs: set[str]) -> bool:
    cwd = cwd.removesuffix(" (deleted)")
    return any(cwd == path or cwd.startswith(path.rstrip("/") + "/") for path in dirs)


def serve(stream) -> None:
    """Read registrations from `stream` until end of file, then kill what is still registered."""
    pids: dict[int, str] = {}
    dirs: set[str] = set()
    for raw in stream:
        op, _, arg = raw.decode(errors="replace").rstrip("\n").partition(" ")
        if op == "+pid" and (started := _start_time(int(arg))) is not None:
            pids[int(arg)] = started
        elif op == "-pid":
            pids.pop(int(arg), None)
        elif op == "+dir":
            dirs.add(arg)
        elif op == "-dir":
            dirs.discard(arg)
    me = os.getpid()
    for pid, started in pids.items():
        if _start_time(pid) == started:
            _kill(pid)
    if not dirs:
        return
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                cwd = os.readlink(f"/proc/{entry}/cwd")
            except OSError:
                continue
            if _inside(cwd, dirs):
                _kill(int(entry))


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the host's to handle
    serve(sys.stdin.buffer)
