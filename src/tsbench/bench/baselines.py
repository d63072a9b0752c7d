"""Baseline costs: classical feature extraction per row at each L, head training, detector per row.

Rows are real AnomalyXL rows (planned and materialised by the generator, nothing written to
disk), one per (category, L) cell of the paper grid, so the numbers are what `tsbench eval` and
`tsbench sft-baseline` pay per row. Each measurement runs in a fresh process (`measure_in_child`)
so its peak RSS is its own; stumpy's kernels are loaded (or compiled) before the clock starts.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from tsbench.bench.common import measure_in_child

REPEATS = 3  # rows per cell


def _rows(category: str, length: int, repeats: int):
    from tsbench.tasks.anomalyxl.config import preset
    from tsbench.tasks.anomalyxl.rowplan import materialize, plan_row

    cfg = preset("paper")
    for i in range(repeats):
        plan = plan_row(cfg, "bench", category, length, i)
        yield plan, materialize(plan.plan)


def _cells() -> list[tuple[str, int]]:
    from tsbench.tasks.anomalyxl import labels as lb
    from tsbench.tasks.anomalyxl.config import preset

    cfg = preset("paper")
    return (
        [(lb.LOCALIZE, n) for n in cfg.single_lengths]
        + [(lb.ALL_CHANNELS, n) for n in cfg.multi_lengths]
        + [(lb.LEAD_LAG, n) for n in cfg.multi_lengths]
    )


def time_features(category: str, length: int, repeats: int = REPEATS) -> float:
    """Mean seconds to featurise one row (all its channels, plus cross features where they apply)."""
    from tsbench.baselines import feature_cache
    from tsbench.baselines import features as F

    F.warm_up()
    rows = list(_rows(category, length, repeats))
    started = time.perf_counter()
    for plan, values in rows:
        feature_cache.compute_row(values, plan.channel_names)
    return (time.perf_counter() - started) / len(rows)


def time_detector(category: str, length: int, repeats: int = REPEATS) -> float:
    from tsbench.baselines import detector

    rows = list(_rows(category, length, repeats))
    started = time.perf_counter()
    for _plan, values in rows:
        detector.analyse(category, list(values))
    return (time.perf_counter() - started) / len(rows)


def time_heads(data_dir: str, out: str, replicate: int) -> tuple[int, float]:
    """(training examples, seconds) to fit all 16 heads on cached features, the table tiled `replicate` times."""
    from tsbench.baselines import classical, feature_cache

    files = classical.data_files(Path(data_dir))
    cache = feature_cache.extract_features(files, Path(out) / "features", workers=1)
    examples = list(classical.iter_examples(files, cache)) * replicate
    started = time.perf_counter()
    classical.fit_heads(examples)
    return len(examples), time.perf_counter() - started


def _small_data(tmp: str) -> str:
    from tsbench.tasks.anomalyxl.config import preset
    from tsbench.tasks.anomalyxl.generate import generate_split

    cfg = preset("small")
    for split in ("train", "val"):
        generate_split(cfg, split, tmp)
    return str(Path(tmp) / f"seed{cfg.seed}")


def main() -> dict:
    result: dict = {"features": {}, "detector": {}}
    print("baselines (one fresh process per measurement; seconds per row, peak RSS of that process):")
    for category, length in _cells():
        seconds, peak, per_row = measure_in_child(time_features, category, length)
        result["features"][f"{category}/{length}"] = {"s_per_row": per_row, "peak_rss_GiB": peak / 2**30}
        print(
            f"  classical features  {category:24s} L={length:6d}  {per_row:7.3f} s/row  peak RSS {peak / 2**30:.2f} GiB"
        )
    for category, length in _cells():
        seconds, peak, per_row = measure_in_child(time_detector, category, length)
        result["detector"][f"{category}/{length}"] = {"s_per_row": per_row, "peak_rss_GiB": peak / 2**30}
        print(
            f"  detector            {category:24s} L={length:6d}  {per_row:7.3f} s/row  peak RSS {peak / 2**30:.2f} GiB"
        )
    with tempfile.TemporaryDirectory() as tmp:
        data = _small_data(tmp)
        for replicate in (1, 35):
            _, peak, (n, head_s) = measure_in_child(time_heads, data, tmp, replicate)
            result[f"heads_x{replicate}"] = {"examples": n, "seconds": head_s, "peak_rss_GiB": peak / 2**30}
            print(
                f"  head training       16 heads on {n:5d} examples (small preset x{replicate:2d})  {head_s:6.2f} s  peak RSS {peak / 2**30:.2f} GiB"
            )
    return result


if __name__ == "__main__":
    main()
