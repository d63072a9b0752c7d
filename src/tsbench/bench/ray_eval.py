"""`--executor ray` against threads on the same rows: detector rows/s with 1 and 2 workers (the
detector is CPU-bound: threads share one GIL, Ray workers are processes), and the scheduling
overhead per episode.

Both executors get the same plain-data jobs (the small preset's test split, file order) and are
timed at the executor, after a warm-up run of a few rows on the same executor (workers started,
agents built): rows/s is rows over the wall time of the timed run; the overhead of an episode is
the gap between two consecutive records of a one-worker run minus the later episode's own time
(its `latency_s`). A Ray worker holds one CPU, so Ray sets its OMP_NUM_THREADS to 1; a thread
runs with numpy's default thread pools and may use more than one core. Runs alternate (threads 1, ray 1, threads 2, ray 2) so that a change in the
machine's other load falls on both executors.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import tempfile
import time
from pathlib import Path

from tsbench.bench.common import verdict
from tsbench.eval.episode import EpisodeJob
from tsbench.tasks.base import SampleRef

MODEL, HARNESS = "detector/default", "direct"


def _jobs(data_dir: Path) -> list[EpisodeJob]:
    from tsbench.tasks.anomalyxl.rows import read_index

    jobs = []
    for path in sorted(data_dir.glob("test-*.parquet")):
        for rid in read_index(path)["id"]:
            jobs.append(EpisodeJob(SampleRef("anomalyxl", str(path), rid), 0, MODEL, HARNESS))
    return jobs


def _timed(executor, jobs: list[EpisodeJob], workers: int) -> dict:
    began = time.perf_counter()
    executor.run(jobs[: 2 * workers], lambda r: None)  # warm-up: every worker up, its agent built
    startup = time.perf_counter() - began
    arrivals: list[tuple[float, float, bool]] = []
    began = time.perf_counter()
    executor.run(jobs, lambda r: arrivals.append((time.perf_counter(), r["latency_s"], r["error_type"] is None)))
    wall = time.perf_counter() - began
    assert len(arrivals) == len(jobs) and all(ok for _, _, ok in arrivals), "every row should finish"
    gaps = [b[0] - a[0] - b[1] for a, b in zip(arrivals, arrivals[1:])]
    return {"rows_s": len(arrivals) / wall, "warmup_s": startup, "overhead_s": statistics.median(gaps), "wall_s": wall}


def _spin(_: int) -> int:
    total = 0
    for i in range(3_000_000):
        total += i * i
    return total


def machine_ratio() -> float:
    """Pure-Python work in 2 processes vs 1, now: the most any executor can gain from a second
    worker on this machine under its current load (about 2 on 2 idle cores)."""
    import multiprocessing as mp

    rates = {}
    for n in (1, 2):
        with mp.get_context("spawn").Pool(n) as pool:
            pool.map(_spin, range(n))  # processes started before the clock
            began = time.perf_counter()
            pool.map(_spin, range(2 * n))
            rates[n] = 2 * n / (time.perf_counter() - began)
    return rates[2] / rates[1]


def _threads(jobs: list[EpisodeJob], workers: int) -> dict:
    from tsbench.eval.executors.threads import ThreadExecutor

    executor = ThreadExecutor(concurrency=workers)
    try:
        return _timed(executor, jobs, workers)
    finally:
        executor.close()


def _ray(jobs: list[EpisodeJob], workers: int) -> dict:
    from tsbench.eval.executors.ray import RayExecutor

    executor = RayExecutor(workers=workers)
    try:
        return _timed(executor, jobs, workers)
    finally:
        executor.close()


def main() -> dict:
    if importlib.util.find_spec("ray") is None:
        print("ray executor: skipped (pip install 'tsbench[ray]')")
        return {}
    from tsbench.eval.executors.ray_cluster import connect
    from tsbench.tasks.anomalyxl.config import preset
    from tsbench.tasks.anomalyxl.generate import generate_split

    with tempfile.TemporaryDirectory() as tmp:
        generate_split(preset("small"), "test", tmp)
        jobs = _jobs(Path(tmp) / "seed42")
        result: dict = {"rows": len(jobs)}
        ray, _ = connect(None, 2)  # one local cluster (127.0.0.1, 2 CPUs) for both Ray runs
        try:
            result["machine_before"] = machine_ratio()
            for workers in (1, 2):
                result[f"threads_{workers}"] = _threads(jobs, workers)
                result[f"ray_{workers}"] = _ray(jobs, workers)
            result["machine_after"] = machine_ratio()
        finally:
            ray.shutdown()
    t1, t2, r1, r2 = (result[k] for k in ("threads_1", "threads_2", "ray_1", "ray_2"))
    scaling = r2["rows_s"] / r1["rows_s"]
    overhead_ms = (r1["overhead_s"] - t1["overhead_s"]) * 1000
    result["ray_scaling_met"], result["overhead_met"] = scaling >= 1.6, overhead_ms <= 50
    print(
        f"ray executor ({MODEL} under {HARNESS}, {len(jobs)} rows of the small preset, after a warm-up; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs):\n"
        f"  threads     1: {t1['rows_s']:5.2f} rows/s   2: {t2['rows_s']:5.2f} rows/s   ratio {t2['rows_s'] / t1['rows_s']:.2f}\n"
        f"  ray workers 1: {r1['rows_s']:5.2f} rows/s   2: {r2['rows_s']:5.2f} rows/s   ratio {scaling:.2f} "
        f"(goal >= 1.6: {verdict(result['ray_scaling_met'])})\n"
        f"  ray 2 workers vs threads 2: {r2['rows_s'] / t2['rows_s']:.2f}x  (a Ray worker: 1 CPU, OMP_NUM_THREADS=1; "
        f"a thread: numpy's own thread pools)\n"
        f"  this machine now, pure Python in 2 processes vs 1: {result['machine_before']:.2f} before, "
        f"{result['machine_after']:.2f} after (the ceiling for the ratios above)\n"
        f"  scheduling overhead per episode (median, 1 worker): ray {r1['overhead_s'] * 1000:6.1f} ms  "
        f"threads {t1['overhead_s'] * 1000:6.1f} ms  difference {overhead_ms:6.1f} ms "
        f"(goal <= 50: {verdict(result['overhead_met'])})\n"
        f"  warm-up ({2} rows a worker, start-up included): ray 1 {r1['warmup_s']:.1f} s, ray 2 {r2['warmup_s']:.1f} s, "
        f"threads 1 {t1['warmup_s']:.1f} s, threads 2 {t2['warmup_s']:.1f} s"
    )
    return result


if __name__ == "__main__":
    main()
