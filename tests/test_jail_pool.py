"""The pool of pre-started jails: one jail per episode, destroyed after it, a dead one replaced,
nothing left behind at shutdown, the series still entering by value."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tsbench.harness.runtime import SandboxError, check_jail
from tsbench.harness.runtime.pool import JailPool, use_pool
from tsbench.harness.runtime.sandbox import Sandbox
from tsbench.testing.readiness import wait_until

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


def booted(pool: JailPool) -> None:
    """Wait until every jail of the pool is ready, while this process tree works at booting them (a loaded
    machine boots slowly; a fixed clock would fail it)."""
    wait_until(lambda: pool.wait_ready(0.5))


def _kernel_pid(box: Sandbox) -> int:
    return box._kernel_manager.provisioner.process.pid


@pytest.fixture(scope="module")
def pool():
    with JailPool(1) as jails, use_pool(jails):
        booted(jails)
        yield jails


def test_each_episode_gets_its_own_jail_destroyed_after(pool):
    roots, pids = [], []
    for value in (3.0, 5.0):
        booted(pool)
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
    booted(pool)
    with Sandbox({"a": np.ones(4)}) as first:
        first.run("secret = 'episode one'; open('note.txt', 'w').write('x')")
    booted(pool)
    with Sandbox({"b": np.zeros(4)}) as second:
        assert second.run("'secret' in dir(), __import__('os').path.exists('note.txt'), channels").result_repr == (
            "(False, False, ['b'])"
        )


def test_series_enters_by_value_and_context_json_is_filled(pool):
    booted(pool)
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
    booted(pool)
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
    booted(pool)


def test_other_bounds_start_cold_and_the_pool_follows(tmp_path):
    shared = tmp_path / "cache.txt"
    shared.write_text("compiled")
    with JailPool(1) as jails, use_pool(jails):
        booted(jails)
        with Sandbox({"a": np.ones(2)}, memory_bytes=3 * 2**30) as box:  # launched with other bounds
            assert box.run("1+1").result_repr == "2"
        assert jails.stats["cold"] == 1
        booted(jails)
        with Sandbox({"a": np.ones(2)}, memory_bytes=3 * 2**30) as box:
            assert box.run("2+2").result_repr == "4"
        assert jails.stats["warm"] == 1
        with Sandbox({"a": np.ones(2)}, files={"f.txt": b"hi"}) as box:  # files enter before launch: cold
            assert box.run("open('f.txt').read()").result_repr == "'hi'"
        assert jails.stats["warm"] == 1
        for _ in range(2):  # read-only paths: the first starts cold, the next is pre-started with them
            booted(jails)
            with Sandbox({"a": np.ones(2)}, readonly_paths=[shared]) as box:
                assert box.run(f"open({str(shared)!r}).read()").result_repr == "'compiled'"
        assert jails.stats["warm"] == 2


def test_shutdown_leaves_no_processes_or_directories():
    before = _children()
    jails = JailPool(2)
    booted(jails)
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
        booted(jails)
        for value in (1.0, 2.0):
            with Sandbox({"a": np.full(4, value)}) as box:
                assert box.run("float(series['a'].sum())").result_repr == repr(4 * value)
        time.sleep(0.5)
        assert jails.stats["warm"] == 2 and jails.ready == 0 and jails._booting == 0 and jails._serial == 2


def test_a_claim_takes_the_boot_in_flight_rather_than_starting_cold():
    """Claimed before its one boot is done, the pool's jail is still the one that will be ready first:
    the claim waits for it (no second, cold boot on the same cores)."""
    with JailPool(1, budget=1) as jails, use_pool(jails):
        with Sandbox({"a": np.full(4, 2.0)}) as box:
            assert box.run("float(series['a'].sum())").result_repr == "8.0"
        assert (jails.stats["warm"], jails.stats["waited"], jails.stats["cold"]) == (1, 1, 0)


def test_claims_are_served_in_arrival_order():
    """Two claims waiting on the pool: the first to arrive gets the first jail that becomes ready."""
    import threading

    from tsbench.harness.runtime.behind import started_behind

    with JailPool(2, budget=2) as jails, use_pool(jails):
        booted(jails)
        with jails._cond:  # take both jails aside, a boot shown in flight: claims now wait for one
            held, jails._ready = jails._ready, []
            jails._booting += 1
        roots: dict[str, str] = {}

        def episode(name: str) -> None:
            with started_behind(Sandbox({"a": np.ones(2)})) as box:
                assert box.run("float(series['a'].sum())").result_repr == "2.0"
                roots[name] = str(box._root)

        threads = {name: threading.Thread(target=episode, args=(name,)) for name in ("first", "second")}
        with jails._cond:
            for count, name in enumerate(threads, 1):
                threads[name].start()
                while len(jails._waiting) < count:
                    jails._cond.wait(0.05)
            expected = {"first": str(held[0]._root), "second": str(held[1]._root)}
            jails._ready.append(held[0])  # one jail ready: the first claim's, though both wait
            jails._cond.notify_all()
        wait_until(lambda: not threads["first"].is_alive(), poll_s=0.05)
        assert roots == {"first": expected["first"]}
        with jails._cond:
            jails._ready.append(held[1])
            jails._booting -= 1
            jails._cond.notify_all()
        wait_until(lambda: not threads["second"].is_alive(), poll_s=0.05)
    assert roots == expected


def test_the_episode_goes_on_while_its_jail_starts_and_a_failed_start_still_fails_it(tmp_path):
    from tsbench.harness.runtime.behind import started_behind

    # `files` start cold whatever pool is in use: the kernel is launched on the starter thread
    with started_behind(Sandbox({"a": np.ones(3)}, files={"f.txt": b"x"})) as box:
        assert box.start_seconds is None  # the block (the first model call) runs before the kernel is up
        assert box.run("float(series['a'].sum())").result_repr == "3.0"
        assert box.start_seconds is not None and box.restarts == 0  # the kernel outlived the start's thread
        assert box.run("open('f.txt').read()").result_repr == "'x'"
    assert box._root is None
    with pytest.raises(SandboxError, match="does not exist"):
        with started_behind(Sandbox({"a": np.ones(3)}, readonly_paths=[tmp_path / "missing"])):
            pass  # no cell ran: leaving the block still reports the jail that never started


def test_pool_sizing_follows_waiting_claims_rate_and_cores():
    from tsbench.harness.runtime.pool import boot_workers, target_jails

    assert target_jails(8, 0, None, 2.0) == 8  # before any rate: the run's concurrency
    assert target_jails(8, 0, 1.0, 2.0) == 3  # one claim a second, 2 s boots: two ahead and one spare
    assert target_jails(8, 5, 1.0, 2.0) == 5  # every waiting claim gets a boot
    cores = len(os.sched_getaffinity(0))
    assert target_jails(8, 0, 100.0, 2.0) == 8 + cores  # never past the concurrency and a boot per core
    assert target_jails(1, 0, 0.5, 4.0) == min(3, 1 + cores)  # concurrency 1, boots twice an episode: two ahead
    assert boot_workers(32) == min(32, cores) and boot_workers(1) == 1  # one boot per core on a quiet machine
    assert boot_workers(32, 3.0) == min(32, 3 * cores)  # boots taking 3x their CPU: three per core
    assert boot_workers(32, 0.5) == min(32, cores)


def test_a_boots_cpu_is_read_from_its_own_tree_as_a_scan_of_every_process_reads_it():
    from tsbench.harness.runtime.pool import _scanned_tree_cpu_seconds, tree_cpu_seconds

    burn = "import sys, time; sum(range(3 * 10**6)); sys.stdout.write('x'); sys.stdout.flush(); time.sleep(30)"
    child = f'python3 -c "{burn}" & python3 -c "{burn}"; wait'
    proc = subprocess.Popen(["sh", "-c", child], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout.read(2) == b"xx"  # both grandchildren have spent their CPU
        walked, scanned = tree_cpu_seconds(proc.pid), _scanned_tree_cpu_seconds(proc.pid)
        assert walked > 0 and abs(walked - scanned) <= 0.02, (walked, scanned)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert tree_cpu_seconds(proc.pid) == 0.0  # gone
