"""The pool of pre-started jails: one jail per episode, destroyed after it, a dead one replaced,
nothing left behind at shutdown, the series still entering by value."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from tsbench.harness.runtime import SandboxError, check_jail
from tsbench.harness.runtime.pool import JailPool, use_pool
from tsbench.harness.runtime.sandbox import Sandbox

try:
    check_jail()
except SandboxError as exc:  # pragma: no cover - hosts without bubblewrap
    pytest.skip(f"no jail here: {exc}", allow_module_level=True)


def _children() -> set[int]:
    """Pids of this process's live child processes."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def _kernel_pid(box: Sandbox) -> int:
    return box._kernel_manager.provisioner.process.pid


@pytest.fixture(scope="module")
def pool():
    with JailPool(1) as jails, use_pool(jails):
        assert jails.wait_ready(120)
        yield jails


def test_each_episode_gets_its_own_jail_destroyed_after(pool):
    roots, pids = [], []
    for value in (3.0, 5.0):
        assert pool.wait_ready(120)
        before = pool.stats["warm"]
        with Sandbox({"a": np.full(8, value)}) as box:
            assert pool.stats["warm"] == before + 1  # taken from the pool, not started cold
            assert box.start_seconds < 1.0
            assert box.run("float(series['a'].sum()), L, channels").result_repr == f"({8 * value}, 8, ['a'])"
            assert box.run("leak = 1; 'leak' in dir()").result_repr == "True"
            roots.append(box._root)
            pids.append(_kernel_pid(box))
        assert not Path(roots[-1]).exists()  # the private directory went with the episode
        with pytest.raises(ProcessLookupError):
            os.kill(pids[-1], 0)
    assert roots[0] != roots[1] and pids[0] != pids[1]


def test_nothing_crosses_episodes(pool):
    assert pool.wait_ready(120)
    with Sandbox({"a": np.ones(4)}) as first:
        first.run("secret = 'episode one'; open('note.txt', 'w').write('x')")
    assert pool.wait_ready(120)
    with Sandbox({"b": np.zeros(4)}) as second:
        assert second.run("'secret' in dir(), __import__('os').path.exists('note.txt'), channels").result_repr == (
            "(False, False, ['b'])"
        )


def test_series_enters_by_value_and_context_json_is_filled(pool):
    assert pool.wait_ready(120)
    values = np.random.default_rng(0).standard_normal(1000)
    with Sandbox({"x": values}) as box:
        assert box.run("float(series['x'][17])").result_repr == repr(float(values[17]))
        assert box.run("import json; json.load(open('context.json'))['x'] == series['x'].tolist()").result_repr == (
            "True"
        )
        # warmed ahead (pool.WARM_MODULES), yet nothing of it is in the episode's namespace
        assert box.run("import sys; 'scipy.ndimage' in sys.modules, 'ndimage' in dir()").result_repr == "(True, False)"
        written = box.run("open('series.npz', 'wb')")  # the bound file is the host's: read-only here
        assert "Read-only" in written.stdout + (written.error or "")
        assert box.run("import os; os._exit(3)").restarted  # a restart reloads the series from the same file
        assert box.run("float(series['x'][17])").result_repr == repr(float(values[17]))


def test_dead_prestarted_jail_is_replaced(pool):
    assert pool.wait_ready(120)
    with pool._cond:
        victim = pool._ready[0]
    os.killpg(_kernel_pid(victim), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while victim._kernel_manager.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    dead_before = pool.stats["dead"]
    with Sandbox({"a": np.arange(3.0)}) as box:
        assert box.run("float(series['a'].sum())").result_repr == "3.0"
    assert pool.stats["dead"] == dead_before + 1
    assert victim._root is None  # the dead one was destroyed
    assert pool.wait_ready(120)


def test_other_bounds_start_cold_and_the_pool_follows(tmp_path):
    shared = tmp_path / "cache.txt"
    shared.write_text("compiled")
    with JailPool(1) as jails, use_pool(jails):
        assert jails.wait_ready(120)
        with Sandbox({"a": np.ones(2)}, memory_bytes=3 * 2**30) as box:  # launched with other bounds
            assert box.run("1+1").result_repr == "2"
        assert jails.stats["cold"] == 1
        assert jails.wait_ready(120)
        with Sandbox({"a": np.ones(2)}, memory_bytes=3 * 2**30) as box:
            assert box.run("2+2").result_repr == "4"
        assert jails.stats["warm"] == 1
        with Sandbox({"a": np.ones(2)}, files={"f.txt": b"hi"}) as box:  # files enter before launch: cold
            assert box.run("open('f.txt').read()").result_repr == "'hi'"
        assert jails.stats["warm"] == 1
        for _ in range(2):  # read-only paths: the first starts cold, the next is pre-started with them
            assert jails.wait_ready(120)
            with Sandbox({"a": np.ones(2)}, readonly_paths=[shared]) as box:
                assert box.run(f"open({str(shared)!r}).read()").result_repr == "'compiled'"
        assert jails.stats["warm"] == 2


def test_shutdown_leaves_no_processes_or_directories():
    before = _children()
    jails = JailPool(2)
    assert jails.wait_ready(120)
    with jails._cond:
        roots = [box._root for box in jails._ready]
    assert len(_children() - before) >= 2
    jails.close()
    deadline = time.monotonic() + 10
    while _children() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _children() - before == set()
    assert not any(Path(root).exists() for root in roots)


def test_a_budget_boots_no_jail_beyond_the_runs_episodes():
    """A run of two episodes at concurrency 4 boots two jails, not four plus replacements."""
    with JailPool(2, budget=2) as jails, use_pool(jails):
        assert jails.wait_ready(120)
        for value in (1.0, 2.0):
            with Sandbox({"a": np.full(4, value)}) as box:
                assert box.run("float(series['a'].sum())").result_repr == repr(4 * value)
        time.sleep(0.5)
        assert jails.stats["warm"] == 2 and jails.ready == 0 and jails._booting == 0 and jails._serial == 2
