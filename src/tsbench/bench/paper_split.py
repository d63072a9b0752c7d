"""The paper's test split (800 precise + 248 MCQ rows) under the rlm harness, scripted/zscore at
concurrency 8 (issue 47): wall, CPU (host and every kernel, sampled from /proc), host and tree peak
RSS, rows/s, against the CPU floor (a bare kernel's start CPU x rows / usable cores).

The whole split is ~1,050 kernel starts; `--fraction F` runs the first F of its rows as eval's
--limit draws them (spread over categories and lengths, shuffled by the seed), which is how it is run
on a loaded machine. `--data DIR` takes an already generated paper split; otherwise it is generated
first, outside the clock. The eval runs in a fresh process, so its peak RSS is its own. Goals: host
peak RSS <= 400 MiB whatever the fraction (the rows in flight, not the row groups read, hold memory).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from tsbench.bench.common import load_average, measure_in_child, verdict

HOST_RSS_GOAL = 400 * 2**20
PAPER_ROWS = 800 + 248
CONCURRENCY = 8


def eval_rows(data_dir: str, rows: int, concurrency: int = CONCURRENCY) -> dict:
    """In this process (run it in a fresh one): an rlm eval of `rows` rows, sampled as it runs."""
    from tsbench.bench.tree import TreeSampler
    from tsbench.eval.config import EvalConfig
    from tsbench.eval.runner import run_eval

    with tempfile.TemporaryDirectory() as tmp:
        cfg = EvalConfig(
            model="scripted/zscore",
            harness="rlm",
            data=[data_dir],
            regime="both",
            limit=rows,
            concurrency=concurrency,
            out=str(Path(tmp) / "run"),
        )
        began = time.perf_counter()
        with TreeSampler(0.2) as tree:
            out = run_eval(cfg)
        wall = time.perf_counter() - began
        records = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines() if line.strip()]
    return {
        "rows": len(records),
        "errors": sum(r.get("error_type") is not None for r in records),
        "wall": wall,
        "cpu": tree.cpu_s,
        "host_peak": tree.peak_host_rss,
        "tree_peak": tree.peak_rss,
    }


def paper_data(tmp: str) -> str:
    from tsbench.tasks.anomalyxl.config import preset
    from tsbench.tasks.anomalyxl.generate import generate_split, update_manifest

    cfg = preset("paper")
    # with its manifest, as `tsbench generate` writes it: eval reads the files' hashes there (hashing 1 GB costs ~7 CPU-s)
    update_manifest(cfg, tmp, {"test": generate_split(cfg, "test", tmp)})
    return str(next(Path(tmp).glob("seed*")))


def main(fraction: float = 1.0, data: str | None = None) -> dict:
    from tsbench.bench.rlm_scale import cores, kernel_start_cpu
    from tsbench.harness.runtime.jail import check_jail

    check_jail()
    rows = max(1, round(PAPER_ROWS * fraction))
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = data or paper_data(tmp)
        start_cpu = kernel_start_cpu()
        _, child_peak, m = measure_in_child(eval_rows, data_dir, rows)
    floor = start_cpu * m["rows"] / cores()
    host = max(m["host_peak"], child_peak)
    print(
        f"paper split, rlm, scripted/zscore, c{CONCURRENCY}: {m['rows']} of {PAPER_ROWS} rows (fraction "
        f"{fraction:g}{'' if fraction >= 1 else ', INCOMPLETE: a fraction of the split'}; {m['errors']} error rows; "
        f"{load_average()}):\n"
        f"  wall {m['wall']:.1f} s, CPU {m['cpu']:.1f} s (host and kernels), {m['rows'] / m['wall']:.2f} rows/s; "
        f"CPU floor {floor:.1f} s (kernel start {start_cpu:.2f} CPU-s x rows / {cores()} cores): wall / floor "
        f"{m['wall'] / floor:.2f}\n"
        f"  peak RSS: host {host / 2**20:.0f} MiB (goal <= {HOST_RSS_GOAL / 2**20:.0f}: "
        f"{verdict(host <= HOST_RSS_GOAL)}), tree (host + kernels at one moment) {m['tree_peak'] / 2**20:.0f} MiB"
    )
    return {**m, "fraction": fraction, "floor": floor, "kernel_start_cpu": start_cpu, "host_peak": host}
