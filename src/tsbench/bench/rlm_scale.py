"""The recursive harness's throughput at concurrency 1, 8 and 32, beside its floors (issue 47).

Each row is one rlm episode of a scripted policy (three cells, then an answer) that waits a fixed
`latency_s` per reply, a local stand-in for a model server. Episodes run on `concurrency` threads
with the run's jail pool (one per concurrent episode, budget = rows), as the thread executor runs
them. Beside them, measured in the same run:

- the bare episode: the same replies, waits and cells on a bare ipykernel (no jail, no pool), one
  after the other, started in front of the first reply: what one row costs with nothing hidden;
- the kernel start's CPU (a bare ipykernel launched and booted: the CPU of its process), and the
  CPU floor of a run: kernel-start CPU x rows / usable cores, what no run of these rows can beat
  on this machine once every start is off the critical path.

Printed: rows/s at each concurrency, c8/c1 (goal >= 6.5) and c32's wall against the CPU floor (goal
<= 1.3x); each run's wall over its own CPU spread on the cores (1 = every core busy with this run;
above it, the run waited: for the model, or on a shared machine for cores other work held); and the
host's overhead: its own CPU per row (harness, jupyter_client, pool; not the kernels, not the
sampler's scans of /proc) over an episode's wall at c1 (goal < 10 %), the row's wall split into model
wait, host CPU and the rest (kernel work and waits). All with the load average. The module runs
against an earlier checkout too (PYTHONPATH; its sampler has no host CPU: said so) for a before/after
measured side by side.
"""

from __future__ import annotations

import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tsbench.baselines.scripted import ANALYSIS_CELL
from tsbench.bench.common import load_average, verdict
from tsbench.core.episode import EpisodeTask
from tsbench.models.base import Completion

SCALING_GOAL, FLOOR_GOAL, HOST_SHARE_GOAL = 6.5, 1.3, 0.10
LATENCY_S = 0.2
# The reference policy's analysis first (scripted/zscore's cell: robust z-scores, scipy.ndimage), then two light cells.
CELLS = (
    ANALYSIS_CELL,
    "import numpy as np\nz = (series[channels[0]] - series[channels[0]].mean()) / series[channels[0]].std()\nint(np.argmax(abs(z)))",
    "float(abs(z).max())",
)


class SleepyCells:
    """Three code cells (scripted/zscore's analysis, then two light ones), then an answer; each reply
    after `latency_s` (a model server's wait)."""

    name = "scripted/three-cells"

    def __init__(self, latency_s: float = LATENCY_S) -> None:
        self.latency_s = latency_s

    def generate(self, messages, **kwargs) -> Completion:
        time.sleep(self.latency_s)
        turn = sum(m.role == "assistant" for m in messages)
        if turn < len(CELLS):
            return Completion(text=f"```python\n{CELLS[turn]}\n```")
        return Completion(text='{"present": false}')

    def close(self) -> None:
        pass


def _task(index: int) -> EpisodeTask:
    values = np.random.default_rng(index).standard_normal((2, 4096)).astype(np.float32)
    return EpisodeTask(f"row{index}", "localize", "precise", "Is there an anomaly?", ["a", "b"], values, [])


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def kernel_start_cpu(repeats: int = 3) -> float:
    """CPU seconds of one bare ipykernel's launch and boot (numpy, scipy, the series), its process's own."""
    from tsbench.bench.tree import TreeSampler
    from tsbench.harness.runtime.bare import BareKernel

    spent = []
    series = {"a": _task(0).values[0]}
    for _ in range(repeats):
        with BareKernel() as bare:
            with TreeSampler() as tree:  # the kernel's CPU since its launch, as last seen once booted
                bare.boot(series)
            spent.append(tree.descendants_cpu_s)
    return statistics.median(spent)


def bare_episode_seconds(rows: int, latency_s: float = LATENCY_S) -> float:
    """Seconds per row of the same replies and cells on bare ipykernels, one row after another."""
    from tsbench.harness.runtime.bare import BareKernel

    policy = SleepyCells(latency_s)
    began = time.perf_counter()
    for index in range(rows):
        task = _task(index)
        with BareKernel() as bare:
            bare.boot({name: task.values[i] for i, name in enumerate(task.channel_names)})
            bare.run(f"channels = {task.channel_names!r}")
            messages = []
            from tsbench.models.base import Message

            for turn in range(len(CELLS) + 1):
                completion = policy.generate(messages)
                messages.append(Message("assistant", completion.text))
                if turn < len(CELLS):
                    bare.run(CELLS[turn])
    return (time.perf_counter() - began) / rows


def rlm_run(rows: int, concurrency: int, latency_s: float = LATENCY_S) -> dict:
    """Wall and CPU (this process and its reaped children) of `rows` rlm episodes at `concurrency`."""
    from tsbench.bench.tree import TreeSampler
    from tsbench.harness.rlm import RLMSettings, run_rlm
    from tsbench.harness.runtime.pool import JailPool, use_pool

    cfg = RLMSettings()
    policy = SleepyCells(latency_s)
    began = time.perf_counter()
    with TreeSampler() as tree, JailPool(min(concurrency, rows), budget=rows) as jails, use_pool(jails):
        with ThreadPoolExecutor(concurrency) as pool:
            results = list(pool.map(lambda i: run_rlm(policy, _task(i), cfg, image=False), range(rows)))
        stats = dict(jails.stats)
    wall = time.perf_counter() - began
    cpu, host_cpu = tree.cpu_s, getattr(tree, "host_cpu_s", None)  # None: an earlier checkout's sampler
    answered = sum(r.final_message == '{"present": false}' and r.code_cells == len(CELLS) for r in results)
    return {
        "rows": rows,
        "concurrency": concurrency,
        "wall": wall,
        "cpu": cpu,
        "host_cpu": host_cpu,
        "answered": answered,
        "pool": stats,
    }


def measure(rows_by_concurrency: dict[int, int] | None = None, latency_s: float = LATENCY_S) -> dict:
    rows_by_concurrency = rows_by_concurrency or {1: 8, 8: 32, 32: 64}
    start_cpu = kernel_start_cpu()
    bare = bare_episode_seconds(3, latency_s)
    runs = {c: rlm_run(n, c, latency_s) for c, n in rows_by_concurrency.items()}
    return {"kernel_start_cpu": start_cpu, "bare_episode_s": bare, "runs": runs, "cores": cores()}


def report(m: dict) -> list[str]:
    runs, start_cpu, n_cores = m["runs"], m["kernel_start_cpu"], m["cores"]
    rate = {c: r["rows"] / r["wall"] for c, r in runs.items()}
    lines = [
        f"rlm scale ({LATENCY_S * 1000:.0f} ms per reply, {len(CELLS)} cells then an answer; {load_average()}):",
        f"  kernel start CPU {start_cpu:.2f} s; bare episode {m['bare_episode_s']:.2f} s per row "
        f"({1 / m['bare_episode_s']:.2f} rows/s, no jail, start in front)",
    ]
    for c, r in runs.items():
        floor = start_cpu * r["rows"] / n_cores
        lines.append(
            f"  c{c}: {r['rows']} rows in {r['wall']:.1f} s = {rate[c]:.2f} rows/s, CPU {r['cpu']:.1f} s "
            f"(host {'?' if r.get('host_cpu') is None else format(r['host_cpu'], '.1f')} s), "
            f"{r['answered']}/{r['rows']} answered, pool {r['pool']}; CPU floor {floor:.1f} s "
            f"(wall / floor {r['wall'] / floor:.2f}; wall / (own CPU / cores) {r['wall'] * n_cores / r['cpu']:.2f}, 1 = "
            "every core busy with this run)"
        )
    if 1 in rate and 8 in rate:
        scaling = rate[8] / rate[1]
        lines.append(f"  rows/s c8 / c1 {scaling:.2f} (goal >= {SCALING_GOAL:g}): {verdict(scaling >= SCALING_GOAL)}")
    if 1 in runs:
        lines.append(host_overhead_line(runs[1]))
    if 32 in runs:
        ratio = runs[32]["wall"] / (start_cpu * runs[32]["rows"] / n_cores)
        lines.append(f"  c32 wall / CPU floor {ratio:.2f} (goal <= {FLOOR_GOAL:g}): {verdict(ratio <= FLOOR_GOAL)}")
    return lines


def host_overhead_line(run: dict, latency_s: float = LATENCY_S) -> str:
    """An episode's wall at c1 split into model wait, the host's own CPU and the rest (the kernel's work and
    the waits for it); the host's share against its goal. Older results carry no host CPU: said so."""
    per_row = run["wall"] / run["rows"]
    model_wait = (len(CELLS) + 1) * latency_s
    if run.get("host_cpu") is None:
        return "  host overhead: not measured (this run's sampler has no host CPU)"
    host = run["host_cpu"] / run["rows"]
    share = host / per_row
    return (
        f"  c1 episode {per_row:.2f} s = model wait {model_wait:.2f} s + host CPU {host:.3f} s + kernel and the rest "
        f"{per_row - model_wait - host:.2f} s; host overhead {100 * share:.1f} % of the episode "
        f"(goal < {100 * HOST_SHARE_GOAL:g} %): {verdict(share < HOST_SHARE_GOAL)}"
    )


def main() -> dict:
    from tsbench.harness.runtime.jail import check_jail

    check_jail()
    m = measure()
    print("\n".join(report(m)))
    return m


if __name__ == "__main__":
    import json
    import sys

    plan = json.loads(sys.argv[1]) if len(sys.argv) > 1 else None
    m = measure({int(k): v for k, v in plan.items()} if plan else None)
    print("\n".join(report(m)))
    print("JSON", json.dumps({k: v for k, v in m.items()}, default=str))
