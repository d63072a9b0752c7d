"""`--executor ray` on a real Ray cluster that this module starts on 127.0.0.1 (2 worker CPUs, token
auth on) and stops: same rows as the thread executor, a worker killed mid-run, a driver killed
and resumed, error rows, Ctrl-C, and the one-line hint when Ray is not installed."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tsbench import results as schema
from tsbench.core.config import build
from tsbench.eval.config import EvalConfig
from tsbench.eval.episode import EpisodeJob
from tsbench.eval.executors import Abandoned
from tsbench.eval.executors.ray_cluster import choose_mode
from tsbench.eval.runner import run_eval
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.base import SampleRef
from tsbench.testing.readiness import wait_until

SRC = Path(__file__).parents[1] / "src"
FAMILIES = Path(__file__).parent / "families"
sys.path.insert(0, str(FAMILIES))
# Fast detector categories from both regime files (the all-channels ones take seconds a row).
CATEGORIES = [lb.PRESENCE, lb.START_TIME, lb.LOCALIZE, lb.MAGNITUDE]
LIMIT = 1
ROWS = len(CATEGORIES) * LIMIT
DETECTOR = {"model": "detector/default", "harness": "direct"}


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """test/kills-its-kernel as an installed plugin (tests/families/kernel_killer.py), for the workers."""
    from kernel_killer import install_policy

    return install_policy(tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def cluster(plugin_site):
    """A head node with 2 CPUs (so 2 worker processes) on 127.0.0.1, this process its driver.
    Ray reads its settings (auth mode, loopback only) when imported: it is imported here first."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("needs the ray extra: pip install 'tsbench[ray]'")
    from ray_head import driven_cluster

    with driven_cluster([str(SRC), str(FAMILIES), str(plugin_site)], num_cpus=2) as head:
        yield head


def config(small_data: Path, out: Path, **settings) -> EvalConfig:
    return build(
        EvalConfig,
        {
            "data": [str(small_data)],
            "categories": CATEGORIES,
            "limit_per_category": LIMIT,
            "concurrency": 2,
            "out": str(out),
            **DETECTOR,
            **settings,
        },
    )


def rows(run_dir: Path) -> dict:
    samples = pd.read_parquet(run_dir / schema.SAMPLES)
    assert samples["error_type"].isna().all(), samples["error"].dropna().tolist()
    assert not samples.duplicated(["id", "epoch"]).any()
    return {(r.id, r.epoch): (r.score, r.parsed_answer) for r in samples.itertuples()}


def journal_keys(run_dir: Path) -> list[tuple[str, int]]:
    """Every complete journal line's key, duplicates kept (the reader would hide them)."""
    keys = []
    for line in (run_dir / schema.JOURNAL).read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by kill -9
        keys.append((record["id"], record["epoch"]))
    return keys


@pytest.fixture(scope="module")
def by_threads(small_data, tmp_path_factory):
    return rows(run_eval(config(small_data, tmp_path_factory.mktemp("threads") / "run")))


def episode_workers(head) -> list[tuple[int, str]]:
    """(pid, title) of this cluster's EpisodeWorker processes: children of its own raylet only."""
    raylet = head.head_node.all_processes["raylet"][0].process.pid
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            title = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == raylet and title.startswith("ray::EpisodeWorker"):
            found.append((int(entry.name), title))
    return found


def test_without_ray_the_cli_says_how_to_install_it(small_data, tmp_path, monkeypatch, capsys):
    from tsbench.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets without the extra
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "tsbench",
            "eval",
            "--model",
            "detector/default",
            "--data",
            str(small_data),
            "--limit-per-category",
            "1",
            "--executor",
            "ray",
            "--out",
            str(tmp_path / "run"),
        ],
    )
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert (
        "Traceback" not in err
        and err.strip().splitlines()[-1] == "error: --executor ray needs Ray: pip install 'tsbench[ray]'"
    )


def test_a_file_goes_by_path_only_when_every_node_sees_the_drivers_bytes():
    mine = (100, "ab")
    assert choose_mode(mine, [mine, mine]) == "path"
    assert choose_mode(mine, []) == "path"
    assert choose_mode(mine, [mine, None]) == "object"  # a node without the file
    assert choose_mode(mine, [(100, "cd")]) == "object"  # another file at the same path
    assert choose_mode(None, [None]) == "path"  # only the workers could read it: let them


def test_ray_rows_equal_the_thread_executors(cluster, small_data, tmp_path, by_threads):
    import ray

    assert all(node["NodeManagerAddress"] == "127.0.0.1" for node in ray.nodes())
    assert cluster.address.startswith("127.0.0.1:")
    run_dir = run_eval(config(small_data, tmp_path / "path", executor="ray", ray_address=cluster.address))
    by_path = rows(run_dir)
    assert by_path == by_threads and len(by_path) == ROWS
    samples = pd.read_parquet(run_dir / schema.SAMPLES)  # where each row was played
    assert (samples["node"] == socket.gethostname()).all()
    assert samples["worker"].str.fullmatch(r"ray:[0-9a-f]{8}@\d+").all()


def test_a_kernel_harness_runs_jailed_on_the_workers(cluster, small_data, tmp_path):
    """rlm episodes through Ray: each worker checks its own node's jail and plays the episode in it."""
    settings = {"model": "scripted/zscore", "harness": "rlm", "categories": ["localize"], "limit_per_category": 1}
    local = rows(run_eval(config(small_data, tmp_path / "threads", **settings)))
    remote = rows(
        run_eval(config(small_data, tmp_path / "ray", executor="ray", ray_address=cluster.address, **settings))
    )
    assert remote == local and len(remote) == 1


def test_a_kernel_lost_on_a_worker_is_an_error_row(cluster, plugin_site, small_data, tmp_path, monkeypatch, request):
    """The policy's code SIGKILLs its kernel on the worker (tests/test_kernel_lost.py: with threads)."""
    from kernel_killer import SPEC, forget_plugins, use_here

    use_here(plugin_site, monkeypatch)  # the driver checks the policy's name too
    request.addfinalizer(forget_plugins)
    settings = {"model": SPEC, "harness": "rlm", "categories": ["localize"], "limit_per_category": 1}
    run_dir = run_eval(config(small_data, tmp_path / "ray", executor="ray", ray_address=cluster.address, **settings))
    row = pd.read_parquet(run_dir / schema.SAMPLES).iloc[0]
    assert row["error_type"] == "kernel_lost" and pd.isna(row["score"]) and "kernel died" in row["error"]
    assert row["worker"].startswith("ray:")


def test_a_worker_killed_mid_run_loses_and_repeats_no_row(cluster, small_data, tmp_path, by_threads, monkeypatch):
    """Rows shipped through the object store here (the test before sent them by path)."""
    monkeypatch.setenv("TSBENCH_RAY_DATA", "object")
    killed = []

    def kill_one_running_worker(progress) -> None:
        if progress.done == 1 and not killed:
            workers = episode_workers(cluster)
            running = [pid for pid, title in workers if ".run" in title] or [pid for pid, _ in workers]
            os.kill(running[0], signal.SIGKILL)
            killed.append(running[0])

    run_dir = run_eval(config(small_data, tmp_path / "run", executor="ray"), on_update=kill_one_running_worker)
    assert killed
    assert rows(run_dir) == by_threads
    keys = journal_keys(run_dir)
    assert len(keys) == ROWS and len(set(keys)) == ROWS
    assert json.loads((run_dir / schema.RUN_JSON).read_text())["complete"]


def test_a_killed_driver_resumes_where_it_stopped(cluster, small_data, tmp_path, by_threads):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "tsbench.cli",
        "eval",
        "--model",
        "detector/default",
        "--harness",
        "direct",
        "--data",
        str(small_data),
        "--categories",
        ",".join(CATEGORIES),
        "--limit-per-category",
        str(LIMIT),
        "--executor",
        "ray",
        "--workers",
        "2",
        "--ray-address",
        cluster.address,
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    journal = out / schema.JOURNAL
    # The first row in the journal, or the driver's end: waited for while this process tree (the cluster, its
    # workers and the driver) works, not by a fixed clock.
    wait_until(
        lambda: proc.poll() is not None or (journal.exists() and journal.read_text().count("\n") >= 1), poll_s=0.05
    )
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = len(journal_keys(out))
    assert 1 <= partial < ROWS, "the driver should have been killed mid-way"
    run_eval(config(small_data, out, executor="ray", ray_address=cluster.address))  # the same run, resumed
    assert rows(out) == by_threads
    keys = journal_keys(out)
    assert len(keys) == ROWS and len(set(keys)) == ROWS  # finished rows were not run again


@pytest.fixture(scope="module")
def executor(cluster):
    from tsbench.eval.executors.ray import RayExecutor

    ex = RayExecutor(workers=2, address=cluster.address, retries=1, data="path")
    yield ex
    ex.close()


def _jobs(small_data: Path, family: str = "anomalyxl", ids: tuple[str, ...] = ()) -> list[EpisodeJob]:
    path = str(small_data / "test-coarse.parquet")
    known = pd.read_parquet(path, columns=["id"])["id"].tolist()
    return [EpisodeJob(SampleRef(family, path, rid), 0, "detector/default", "direct") for rid in ids or known]


def test_rows_that_cannot_run_become_error_rows(executor, small_data):
    from ray_crash import KILLER_ID

    good = _jobs(small_data)[0]
    missing = _jobs(small_data, ids=("no-such-row",))[0]
    killer = _jobs(small_data, family="ray_crash:KillsItsWorker", ids=(KILLER_ID,))[0]
    records = []
    executor.run([killer, missing, good], records.append)
    by_id = {r["id"]: r for r in records}
    assert len(records) == 3 == len(by_id)
    assert by_id[good.ref.id]["error_type"] is None and by_id[good.ref.id]["score"] is not None
    assert by_id["no-such-row"]["error_type"] == "internal" and "no row 'no-such-row'" in by_id["no-such-row"]["error"]
    lost = by_id[KILLER_ID]
    assert lost["error_type"] == "worker_lost" and lost["score"] is None
    assert "WorkerLost" in lost["error"] and "on each of 2 attempts that started" in lost["error"]
    assert lost["node"] and lost["worker"].startswith("ray:")  # where it was lost

    executor.placement.forced = "object"  # now the driver loads rows: a missing one never reaches a worker
    try:
        records.clear()
        executor.run([missing], records.append)
    finally:
        executor.placement.forced = "path"
    assert [r["error_type"] for r in records] == ["internal"] and "no row" in records[0]["error"]


def _both_workers_up(ex) -> None:
    """Every worker answered hello: a job then waits for a busy worker only, not for one still booting
    (on a loaded machine the second may answer after the first episode ended: one in flight, not two)."""
    while ex._hello:
        ready, _ = ex.ray.wait(list(ex._hello), num_returns=1)
        ex._greet(ready[0])


def test_first_ctrl_c_waits_for_episodes_in_flight_second_abandons_them(executor, small_data):
    jobs = _jobs(small_data)
    _both_workers_up(executor)

    def interrupted_after(n: int):
        yield from jobs[:n]
        raise KeyboardInterrupt

    records, told = [], []
    with pytest.raises(KeyboardInterrupt) as caught:
        executor.run(interrupted_after(2), records.append, told.append)
    assert not isinstance(caught.value, Abandoned)
    assert told == [2] and sorted(r["id"] for r in records) == sorted(j.ref.id for j in jobs[:2])

    def impatient(record: dict) -> None:
        raise KeyboardInterrupt  # the second Ctrl-C, while waiting for the first record

    with pytest.raises(Abandoned):
        executor.run(interrupted_after(2), impatient, told.append)


def test_the_cluster_examples_are_eval_configs():
    import tomllib

    configs = sorted((Path(__file__).parents[1] / "experiments" / "ray").glob("*.toml"))
    assert configs
    for path in configs:
        cfg = build(EvalConfig, tomllib.loads(path.read_text())["eval"])
        assert cfg.executor == "ray" and cfg.ray_address == "auto" and cfg.concurrency > 1 and cfg.harness == "rlm"
