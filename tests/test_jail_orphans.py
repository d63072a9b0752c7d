"""A host killed while its jail is starting leaves no bwrap behind (runtime/orphans.py).

bwrap's --die-with-parent kills the outer bwrap with its host, but the jail's pid 1 (the inner bwrap)
waits on an eventfd until the outer one lets it on, and binds its own lifetime only after that: a host
killed after the spawn and before (or during) the uid-map handshake used to leave it idle for ever
(PPid 1, no children). Judged from /proc: the host keeps its sandboxes' private directories under a
temporary directory of the test's (TMPDIR), and bwrap starts in one of them and stays there until it
gets past the handshake, so no process with its working directory there, or in the host's session, may
survive the host.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tsbench.harness.runtime import check_jail, orphans
from tsbench.testing import readiness

pytestmark = pytest.mark.timeout(120)

HOST = """
import os, signal, sys, time
import numpy as np
from tsbench.harness.runtime import jail
from tsbench.harness.runtime.sandbox import Sandbox

def die(*args, **kwargs):
    if os.fork() == 0:  # holds the launch pipes a moment longer (as a forked worker would): bwrap sees
        time.sleep(1)   # its parent die, not the pipes close; without it the two race
        os._exit(0)
    os.kill(os.getpid(), signal.SIGKILL)

if sys.argv[1] == "spawned":
    jail.Jail.after_spawn = die  # bwrap is running; its child's pid is not read yet
else:
    jail._refuse_nested_userns = die  # the uid map is written, the jail not yet let on
Sandbox({"x": np.arange(4.0)}).start()
"""


def _left_of(sid: int, tmp: Path) -> dict[int, str]:
    """Live processes (zombies aside) of session `sid` or working in `tmp`: pid -> command name."""
    members = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                head, _, rest = stat.read().rpartition(")")
        except OSError:
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd").removesuffix(" (deleted)")
        except OSError:
            cwd = ""
        fields = rest.split()
        if fields[0] != "Z" and (int(fields[3]) == sid or cwd.startswith(f"{tmp}/")):
            members[int(entry)] = f"{head.partition('(')[2]} in {cwd}"
    return members


@pytest.mark.parametrize("moment", ["spawned", "handshake"])
def test_a_host_killed_mid_launch_leaves_no_bwrap(moment, tmp_path):
    check_jail()
    if moment == "handshake" and os.geteuid() != 0:
        pytest.skip("the uid-map handshake is the root hosts' launch only")
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, moment],
        start_new_session=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    survivors: dict[int, str] = {}
    try:
        _, err = readiness.communicate(host)
        assert host.returncode == -signal.SIGKILL, err[-2000:]
        deadline = time.monotonic() + 10
        while (survivors := _left_of(host.pid, tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not survivors, f"left behind by the killed host: {survivors}"
    finally:
        for pid in survivors:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_the_watcher_kills_only_what_is_still_registered(tmp_path):
    """`orphans.serve` at end of file: registered pids and processes working in registered directories
    die; forgotten ones live on."""
    (tmp_path / "kept").mkdir()
    (tmp_path / "gone").mkdir()
    sleepers = {
        name: subprocess.Popen(["sleep", "60"], cwd=tmp_path / ("kept" if name == "forgotten" else "gone"))
        for name in ("by_pid", "by_dir", "forgotten")
    }
    try:
        forgotten = sleepers["forgotten"].pid
        lines = [
            f"+pid {sleepers['by_pid'].pid}",
            f"+dir {tmp_path / 'gone'}",
            f"+pid {forgotten}",
            f"+dir {tmp_path / 'kept'}",
            f"-pid {forgotten}",
            f"-dir {tmp_path / 'kept'}",
        ]
        orphans.serve(io.BytesIO("".join(f"{line}\n" for line in lines).encode()))
        assert sleepers["by_pid"].wait(timeout=10) == -signal.SIGKILL
        assert sleepers["by_dir"].wait(timeout=10) == -signal.SIGKILL
        assert sleepers["forgotten"].poll() is None
    finally:
        for sleeper in sleepers.values():
            sleeper.kill()
            sleeper.wait()
