"""A Ray worker node lost mid-run (its raylet and workers SIGKILLed, as a machine that goes down):
the run never hangs and records every row once. Two raylets on 127.0.0.1 (a head and a worker node,
one CPU each: the issue's layout, `--workers` equal to the cluster's CPUs); the executor is driven
directly with rows that take 2 s to load (tests/families/slow_rows.py), so an episode is in flight
on the node when it goes. Marked slow: a cluster of its own, about a minute on an idle machine."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tsbench.eval.episode import EpisodeJob
from tsbench.tasks.base import SampleRef

SRC = Path(__file__).parents[1] / "src"
FAMILIES = Path(__file__).parent / "families"
sys.path.insert(0, str(FAMILIES))
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
ROWS = 6
# The head marks a silent node dead after ~10 missed 1 s checks (Ray's default: 5 missed 3 s checks,
# each waiting 10 s): the test's wait for it, not a deadline; a loaded machine still answers in 5 s.
HEALTH_CHECKS = {"health_check_period_ms": 1000, "health_check_timeout_ms": 5000, "health_check_failure_threshold": 10}


@pytest.fixture(scope="module")
def cluster():
    if importlib.util.find_spec("ray") is None:
        pytest.skip("needs the ray extra: pip install 'tsbench[ray]'")
    from ray_head import driven_cluster

    with driven_cluster([str(SRC), str(FAMILIES)], num_cpus=1, _system_config=HEALTH_CHECKS) as head:
        yield head


def _jobs(small_data: Path) -> list[EpisodeJob]:
    path = str(small_data / "test-coarse.parquet")
    ids = pd.read_parquet(path, columns=["id"])["id"].tolist()[:ROWS]
    return [EpisodeJob(SampleRef("slow_rows:SlowToLoad", path, rid), 0, "detector/default", "direct") for rid in ids]


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def lose(cluster, node) -> None:
    """The node goes down at once: its workers and then its raylet and other processes SIGKILLed."""
    raylet = node.all_processes["raylet"][0].process.pid
    for pid in _children(raylet):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    cluster.remove_node(node, allow_graceful=False)


def running_on(node) -> bool:
    """Whether an EpisodeWorker of `node` is playing an episode (its process title says `.run`)."""
    raylet = node.all_processes["raylet"][0].process.pid
    for pid in _children(raylet):
        try:
            title = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if title.startswith("ray::EpisodeWorker") and ".run" in title:
            return True
    return False


def play_and_lose(cluster, executor, jobs, node) -> list[dict]:
    """Run `jobs`; the first time a record arrives while `node` plays an episode, lose `node`."""
    records: list[dict] = []
    lost: list[bool] = []

    def on_record(record: dict) -> None:
        records.append(record)
        if not lost and running_on(node):
            lost.append(True)
            lose(cluster, node)

    started = time.monotonic()
    executor.run(jobs, on_record)
    assert lost, "no episode was in flight on the node to lose"
    print(f"run with a lost node: {time.monotonic() - started:.1f} s")
    return records


def test_a_node_lost_mid_run_its_episode_is_played_again_elsewhere(cluster, small_data):
    from tsbench.eval.executors.ray import RayExecutor

    node = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    executor = RayExecutor(workers=2, address=cluster.address, data="path", placement_s=30)
    try:
        jobs = _jobs(small_data)
        records = play_and_lose(cluster, executor, jobs, node)
    finally:
        executor.close()
    assert sorted(r["id"] for r in records) == sorted(j.ref.id for j in jobs)  # each row once
    assert all(r["error_type"] is None and r["score"] is not None for r in records), [r["error"] for r in records]
    assert all(r["worker"].startswith("ray:") and r["node"] for r in records)


def test_a_node_lost_with_no_spare_capacity_ends_its_episodes_as_error_rows(cluster, small_data):
    """The head's CPU held by another actor: every worker is on the node, and none can be placed after it."""
    import ray
    from slow_rows import CpuHolder

    from tsbench.eval.executors.ray import WORKER_LOST, RayExecutor

    hold = ray.remote(num_cpus=1)(CpuHolder).remote()
    ray.get(hold.ready.remote())
    node = cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    executor = RayExecutor(workers=2, address=cluster.address, data="path", placement_s=5)
    try:
        jobs = _jobs(small_data)
        started = time.monotonic()
        records = play_and_lose(cluster, executor, jobs, node)
        took = time.monotonic() - started
    finally:
        executor.close()
        ray.kill(hold)
    assert sorted(r["id"] for r in records) == sorted(j.ref.id for j in jobs)  # the run finished, each row once
    errors = [r for r in records if r["error_type"] is not None]
    assert errors and all(r["error_type"] == WORKER_LOST and r["score"] is None for r in errors)
    assert all("no Ray worker left to play it" in r["error"] and "no spare capacity" in r["error"] for r in errors)
    assert not any("on each of" in r["error"] for r in errors)  # no retries spent on attempts that never started
    assert took < 300
