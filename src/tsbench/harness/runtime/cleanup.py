"""Host-side cleanup: a kernel's process group killed at close, sandboxes whose host process died
without closing them, and the asyncio loop jupyter_client leaves in each thread.

Each sandbox's private directory holds `HOST_PID_FILE` (its host's pid, for people), and its host holds
an exclusive flock on that file for as long as the directory lives. The kernel drops the lock when the
host dies, however it dies (SIGKILL, a crash, the out-of-memory killer), while a pid can outlive it (a
zombie its parent has not reaped) or come back as another process (pid reuse; a container that shares
/tmp with another pid namespace). So a later host removes every directory whose lock it can take, and
the cgroups and unsafe-mode processes that go with it; the file is locked before it takes its name, so
no sweep ever sees a live sandbox's file unlocked.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import warnings
from pathlib import Path

from tsbench.harness.runtime import orphans
from tsbench.harness.runtime.limits import FIRST_SANDBOX_UID, kill_all_of_uid, release_uid, sweep_cgroups

__all__ = [
    "HOST_PID_FILE",
    "kill_kernel_now",
    "make_private_dir",
    "release_event_loop",
    "remove_abandoned_sandboxes",
    "remove_private_dir",
]

HOST_PID_FILE = "host.pid"
PREFIX = "tsb-"
_UNNAMED_GRACE_S = 60.0  # a directory whose host died before it named its lock file: removed past this age
_SWEEP_EVERY_S = 10.0  # cold starts sweep at most this often; a pool (one per run) always sweeps
_locks: dict[str, int] = {}  # private directory -> the fd holding its lock
_lock = threading.Lock()
_last_sweep = [float("-inf")]


def remove_abandoned_sandboxes(*, force: bool = False) -> list[Path]:
    """Remove the private directories (and cgroups, and the unsafe mode's processes) of hosts that died
    without closing their sandboxes; returns the directories removed. Runs at most every
    `_SWEEP_EVERY_S` unless `force` (a new run). Jailed kernels die with their host (bwrap's
    --die-with-parent, and the watcher of orphans.py for a host killed mid-launch); what is left is disk."""
    now = time.monotonic()
    with _lock:
        if not force and now - _last_sweep[0] < _SWEEP_EVERY_S:
            return []
        _last_sweep[0] = now
    removed = []
    for root in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        if str(root) not in _locks and _abandoned(root):
            removed.append(root)
    sweep_cgroups()
    return removed


def _abandoned(root: Path) -> bool:
    """Remove `root` if its host is gone (its lock is free); True when removed."""
    try:
        fd = os.open(root / HOST_PID_FILE, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        try:  # killed between making the directory and naming its lock file (or not a sandbox's at all)
            young = time.time() - root.lstat().st_mtime < _UNNAMED_GRACE_S
        except OSError:
            return False
        if young or not root.is_dir() or root.is_symlink():
            return False
        _remove(root)
        return True
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held: its host lives
        os.close(fd)
        return False
    try:
        _remove(root)  # under the lock: a second sweeper waits, then finds nothing
    finally:
        os.close(fd)
    return True


def _remove(root: Path) -> None:
    ipc = root / "ipc"
    try:
        owner = ipc.stat().st_uid if ipc.exists() else root.stat().st_uid
    except OSError:
        owner = 0
    remove_private_dir(root, owner if owner >= FIRST_SANDBOX_UID else None)


def make_private_dir() -> Path:
    """A sandbox's private directory (0711), its lock held by this process until `remove_private_dir`.
    The jail's processes start there: if this process dies first, the watcher (orphans.py) kills what is
    left in it, and the next host's sweep removes it."""
    root = Path(tempfile.mkdtemp(prefix=PREFIX))
    root.chmod(0o711)
    staged = root / f".{HOST_PID_FILE}"
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, str(os.getpid()).encode())
        os.rename(staged, root / HOST_PID_FILE)  # named only once locked
    except BaseException:
        os.close(fd)
        raise
    with _lock:
        _locks[str(root)] = fd
    orphans.watch_dir(root)
    return root


def remove_private_dir(root: Path, uid: int | None, held_uid: int | None = None) -> None:
    """Final cleanup, also run at interpreter exit if `close()` was never called: the lock goes last.
    `uid`'s processes are killed first; `held_uid` (this sandbox's, from `allocate_uid`) is given back
    once they are gone, so no later sandbox gets it while this one's processes may still run."""
    if uid is not None:
        kill_all_of_uid(uid)
    release_uid(held_uid)
    shutil.rmtree(root, ignore_errors=True)
    orphans.forget_dir(root)
    with _lock:
        fd = _locks.pop(str(root), None)
    if fd is not None:
        os.close(fd)


def _after_fork_in_child() -> None:
    """A forked child holds its parent's locks until it closes them: it must not keep dead sandboxes alive."""
    for fd in _locks.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _locks.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def release_event_loop() -> None:
    """Close the asyncio loop that jupyter_client's blocking calls made for this thread (jupyter_core's
    run_sync makes one per thread and never closes it: an epoll and a socket pair per thread, three
    descriptors left behind by every worker thread of every run). The next blocking call here makes a
    fresh one. A loop this thread is running, or one jupyter_core did not make, is left alone."""
    try:
        from jupyter_core.utils import _loop  # the thread's loop as run_sync keeps it
    except ImportError:
        return
    loop = _loop.get()
    if loop is None or loop.is_closed() or loop.is_running():
        return
    try:
        asyncio.get_running_loop()
        return
    except RuntimeError:
        pass
    loop.close()
    _loop.set(None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            current = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:
            current = None
    if current is loop:  # still the thread's loop, as run_sync set it
        asyncio.set_event_loop(None)


def kill_kernel_now(manager) -> None:
    """SIGKILL a started kernel's process group (bwrap's: the PID namespace takes everything else with it)
    and reap it, before `shutdown_kernel(now=True)`. That call sends the same signal but then sleeps
    0.1 s in its poll loop (the process is never dead yet on its first look): a tenth of a second on
    every close and restart (a pooled episode takes 0.1-0.7 s in all)."""
    provisioner = getattr(manager, "provisioner", None)
    process = getattr(provisioner, "process", None)
    if process is None:
        return
    try:
        os.killpg(provisioner.pgid, signal.SIGKILL)
    except (OSError, TypeError):  # no group of its own (or gone already): the process alone
        try:
            process.kill()
        except OSError:
            pass
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:  # shutdown_kernel waits and warns as before
        pass
