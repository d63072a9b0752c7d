"""One writer per run dir: two real eval processes into one --out, and a lock left by a killed one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from tsbench.results import read_journal
from tsbench.results.lock import LOCK_FILE, RunDirLock
from tsbench.testing.fake_openai_server import FakeOpenAIServer
from tsbench.testing.readiness import communicate, wait_ready

TSBENCH = [sys.executable, "-m", "tsbench.cli"]


def _eval(small_data, out, base_url) -> subprocess.Popen:
    args = [
        "eval",
        "--model",
        "openai/fake-model",
        "--base-url",
        base_url,
        "--harness",
        "single-pass-text",
        "--data",
        str(small_data),
        "--sample-id",
        "test-localize-1024-00001-presence",
        "--out",
        str(out),
    ]
    env = {**os.environ, "OPENAI_API_KEY": "test-key"}
    return subprocess.Popen([*TSBENCH, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_a_second_eval_into_the_same_run_dir_says_who_holds_it_and_exits_2(small_data, tmp_path):
    """The first eval hangs mid-episode on its model call; a second one into its --out stops at once.
    Killed (-9), the first leaves its lock file behind, and a third eval takes the run over."""
    out = tmp_path / "run"
    with FakeOpenAIServer(["hang"], default='ok:{"answer": "Yes"}') as server:
        first = _eval(small_data, out, server.base_url)
        wait_ready(first, lambda: server.request_count >= 1, poll_s=0.1)  # the first one is mid-episode
        assert server.request_count == 1
        second = _eval(small_data, out, server.base_url)
        _, err2 = communicate(second)
        assert second.returncode == 2, err2
        assert f"pid {first.pid} on " in err2 and "being written by" in err2
        assert len(err2.strip().splitlines()) == 1 and "Traceback" not in err2
        assert server.request_count == 1  # the second did no work
        first.kill()
        first.communicate(timeout=60)  # killed: it only has to be reaped
        assert (out / LOCK_FILE).exists()  # a stale lock file: no process holds its lock
        third = _eval(small_data, out, server.base_url)
        _, err3 = communicate(third)
    assert third.returncode == 0, err3
    assert server.request_count == 2
    assert len(read_journal(out)) == 1
    assert len((out / "samples.jsonl").read_text().strip().splitlines()) == 1


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path):
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from tsbench.results.lock import RunDirLock; "
            f"RunDirLock({str(out)!r}); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    try:
        RunDirLock(out)
    except ValueError as exc:
        assert f"pid {holder.pid}" in str(exc)
    else:
        raise AssertionError("the lock of a live process was taken")
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=10)
    assert json.loads((out / LOCK_FILE).read_text())["pid"] == holder.pid  # stale content stays...
    with RunDirLock(out):  # ...but the lock died with its process
        assert json.loads((out / LOCK_FILE).read_text())["pid"] == os.getpid()
    RunDirLock(out).release()  # released: free again
