"""Issue 37, item 6: a host killed mid-cell leaves its sandbox directory on disk; the next run removes it.

Judged with a real host process (a sandbox, a cell running) killed with SIGKILL and not yet reaped by its
parent, as a supervisor that has not waited yet leaves it: its pid still answers kill(pid, 0), so the
old pid check kept the directory. The lock the host held on it went with the process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tsbench.harness.runtime import check_jail, cleanup
from tsbench.testing import readiness

pytestmark = pytest.mark.timeout(120)

HOST = """
import sys
from tsbench.harness.runtime.sandbox import Sandbox
box = Sandbox({}).start()
print(box._root, flush=True)
box.run("import time; time.sleep(600)")
"""
LIVE = """
import time
from tsbench.harness.runtime.cleanup import make_private_dir
print(make_private_dir(), flush=True)
time.sleep(600)
"""
NEXT_RUN = """
from tsbench.harness.runtime.sandbox import Sandbox
with Sandbox({}) as box:
    assert box.run("6 * 7").result_repr == "42"
"""


def _host(code: str, tmp: Path) -> tuple[subprocess.Popen, Path]:
    process = subprocess.Popen(
        [sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE, text=True
    )
    return process, Path(process.stdout.readline().strip())


def test_the_next_run_removes_the_directory_of_a_host_killed_mid_cell(tmp_path):
    check_jail()
    killed, dead_root = _host(HOST, tmp_path)
    live, live_root = _host(LIVE, tmp_path)
    try:
        time.sleep(1.0)  # the cell is running
        assert dead_root.is_dir() and dead_root.parent == tmp_path
        os.kill(killed.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{killed.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline, "the killed host did not die"
            time.sleep(0.05)
        os.kill(killed.pid, 0)  # unreaped: its pid still answers, as a pid check would see it
        assert dead_root.is_dir() and (dead_root / cleanup.HOST_PID_FILE).read_text() == str(killed.pid)

        next_run = readiness.run([sys.executable, "-c", NEXT_RUN], env={**os.environ, "TMPDIR": str(tmp_path)})
        assert next_run.returncode == 0, next_run.stderr.decode()[-2000:]
        assert not dead_root.exists(), sorted(str(p) for p in dead_root.rglob("*"))
        assert live_root.is_dir()  # a live host's directory stays, whatever its pid says
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("tsb-")) == [live_root.name]
    finally:
        for process in (killed, live):
            process.kill()
            process.wait()


def test_a_sweep_trusts_the_lock_not_the_pid(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path))
    held = cleanup.make_private_dir()  # this process's own, locked
    reused = tmp_path / "tsb-reused"  # names a live pid (ours) but nobody holds its lock: its host is gone
    (reused / "ipc").mkdir(parents=True)
    (reused / cleanup.HOST_PID_FILE).write_text(str(os.getpid()))
    unnamed_old, unnamed_young = tmp_path / "tsb-old", tmp_path / "tsb-young"  # died before naming a lock
    unnamed_old.mkdir()
    unnamed_young.mkdir()
    os.utime(unnamed_old, (time.time() - 3600, time.time() - 3600))
    try:
        removed = cleanup.remove_abandoned_sandboxes(force=True)
        assert sorted(p.name for p in removed) == ["tsb-old", "tsb-reused"]
        assert held.is_dir() and unnamed_young.is_dir() and not reused.exists() and not unnamed_old.exists()
        assert cleanup.remove_abandoned_sandboxes() == []  # the next one within the interval does not sweep
    finally:
        cleanup.remove_private_dir(held, None)
    assert not held.exists()
