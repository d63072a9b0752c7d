"""Host-side cleanup: a kernel's process group killed at close, and sandboxes whose host process died
without closing them.

Each sandbox's private directory names its host's pid (`HOST_PID_FILE`); a later host removes the
directories (and cgroups, and the unsafe mode's processes) of hosts that are gone.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from tsbench.harness.runtime import orphans
from tsbench.harness.runtime.limits import FIRST_SANDBOX_UID, kill_all_of_uid, sweep_cgroups

HOST_PID_FILE = "host.pid"


@functools.lru_cache(maxsize=1)
def remove_abandoned_sandboxes() -> None:
    """Once per process: remove private directories (and cgroups, and the unsafe mode's
    processes) left by host processes that died without closing their sandboxes. Each directory
    names its host's pid; a live or reused pid keeps the directory. (Jailed kernels die with
    their host: bwrap's --die-with-parent, and the watcher of orphans.py for a host killed mid-launch.)"""
    for root in Path(tempfile.gettempdir()).glob("tsb-*"):
        try:
            host_pid = int((root / HOST_PID_FILE).read_text())
            os.kill(host_pid, 0)
        except ProcessLookupError:
            owner = (root / "ipc").stat().st_uid if (root / "ipc").exists() else root.stat().st_uid
            remove_private_dir(root, owner if owner >= FIRST_SANDBOX_UID else None)
        except (OSError, ValueError):
            continue
    sweep_cgroups()


def make_private_dir() -> Path:
    """A sandbox's private directory (0711), naming this host's pid. The jail's processes start there:
    if this process dies before `remove_private_dir`, the watcher (orphans.py) kills what is left in it."""
    root = Path(tempfile.mkdtemp(prefix="tsb-"))
    root.chmod(0o711)
    (root / HOST_PID_FILE).write_text(str(os.getpid()))
    orphans.watch_dir(root)
    return root


def remove_private_dir(root: Path, uid: int | None) -> None:
    """Final cleanup, also run at interpreter exit if `close()` was never called."""
    if uid is not None:
        kill_all_of_uid(uid)
    shutil.rmtree(root, ignore_errors=True)
    orphans.forget_dir(root)


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
