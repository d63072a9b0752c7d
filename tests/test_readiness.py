"""The real-server fixtures' start-up wait (testing/readiness.py): a server that keeps working is waited
for past any fixed stall bound; one that sits idle, or exits, fails with its log."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tsbench.testing.readiness import wait_ready

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
