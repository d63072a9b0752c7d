"""Waits that follow progress, not a clock (testing/readiness.py, testing/timeouts.py): a server, a command or
a test that keeps working is waited for past any fixed bound; one that sits idle, or exits, fails."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tsbench.testing.readiness import cpu_seconds, descendants, run, tree_cpu_seconds, wait_ready

BUSY = "import sys, time\nend = time.monotonic() + 3\nwhile time.monotonic() < end: pass\nopen(sys.argv[1], 'w').close()\ntime.sleep(30)"


def test_a_working_server_is_waited_for_past_the_stall_bound_and_an_idle_one_fails(tmp_path):
    flag = tmp_path / "ready"
    busy = subprocess.Popen([sys.executable, "-c", BUSY, str(flag)])
    try:
        started = time.monotonic()
        wait_ready(busy, flag.exists, stall_s=1.0, poll_s=0.1)  # 3 s of CPU before ready: progress, not a stall
        assert time.monotonic() - started > 1.0
    finally:
        busy.kill()
        busy.wait()
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(RuntimeError, match="no progress for 1 s"):
            wait_ready(idle, lambda: False, stall_s=1.0, poll_s=0.1)
    finally:
        idle.kill()
        idle.wait()
    log = tmp_path / "log"
    log.write_text("boom: no model\n")
    gone = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(RuntimeError, match=r"exited \(3\): boom: no model"):
        wait_ready(gone, lambda: False, log=log, poll_s=0.1)


SLOW = "import sys, time\nend = time.monotonic() + 2\nwhile time.monotonic() < end: pass\nprint('done')"


def test_run_waits_for_a_working_command_past_the_stall_bound_and_kills_an_idle_one():
    done = run([sys.executable, "-c", SLOW], stall_s=1.0, text=True)  # 2 s of CPU: progress, not a stall
    assert done.returncode == 0 and done.stdout == "done\n"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run([sys.executable, "-c", "import time; time.sleep(60)"], stall_s=1.0)
    assert time.monotonic() - started < 30
    fed = run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], input="abc", text=True)
    assert fed.stdout == "ABC\n"


def test_the_tree_counts_the_cpu_of_live_grandchildren(tmp_path):
    flag = tmp_path / "busy"
    busy = "import sys, time\nwhile time.process_time() < 1: pass\nopen(sys.argv[1], 'w').close()\ntime.sleep(30)"
    code = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {busy!r}, {str(flag)!r}])"
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        wait_ready(parent, flag.exists, stall_s=60.0, poll_s=0.1)
        assert descendants(parent.pid)  # the grandchild is still sleeping
        assert tree_cpu_seconds(parent.pid) - cpu_seconds(parent.pid) >= 0.9  # its busy CPU second
    finally:
        parent.kill()
        parent.wait()


INNER = """
import time

import pytest


@pytest.mark.timeout(1)
def test_working_past_its_timeout():
    end = time.monotonic() + 3
    while time.monotonic() < end:
        pass


@pytest.mark.timeout(1)
def test_idle_past_its_timeout():
    time.sleep(20)
"""

INNER_CONFTEST = """
from tsbench.testing.timeouts import LoadAwareTimeout


def pytest_configure(config):
    config.pluginmanager.register(LoadAwareTimeout(recheck_s=0.5, load=lambda: 10.0), "load-aware")
"""


def test_a_timeout_marker_waits_for_a_working_test_on_a_loaded_machine_and_fails_an_idle_one(tmp_path):
    """At a load factor of 10 a test still computing at its 1 s timeout goes on; a sleeping one fails at 1 s."""
    (tmp_path / "conftest.py").write_text(INNER_CONFTEST)
    (tmp_path / "test_inner.py").write_text(INNER)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(tmp_path)]
    done = run(command, text=True, cwd=tmp_path)
    assert "1 failed, 1 passed" in done.stdout, done.stdout[-3000:]
    assert "FAILED test_inner.py::test_idle_past_its_timeout - Failed: Timeout" in done.stdout


def test_a_loaded_machine_asks_a_working_tree_for_a_smaller_share_of_a_core(monkeypatch):
    """2 % of a core counts as working on a quiet machine; at a load factor of 10 a tenth of that does, and
    a polling loop's thousandth never does, whatever the load."""
    from types import SimpleNamespace

    from tsbench.testing import readiness

    clock, cpu, load = [0.0], [0.0], [1.0]
    monkeypatch.setattr(readiness, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    monkeypatch.setattr(readiness, "tree_cpu_seconds", lambda pid: cpu[0])
    monkeypatch.setattr(readiness, "load_factor", lambda: load[0])

    def advanced_after(wall_s: float, cpu_s: float) -> bool:
        progress = readiness.Progress(1)
        clock[0] += wall_s
        cpu[0] += cpu_s
        return progress.advanced()

    assert advanced_after(100, 2.0) and not advanced_after(100, 0.5)  # quiet: 2 % of a core
    load[0] = 10.0
    assert advanced_after(100, 0.5) and not advanced_after(100, 0.1)  # load 20 on 2 cores: 0.2 %
    load[0] = 1000.0
    assert not advanced_after(100, 0.002)  # a polling loop (0.002 %) is no progress at any load
