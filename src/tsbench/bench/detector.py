"""The detector on its largest row: one all-channels row of 16 x 131,072 (a real AnomalyXL row,
planned and materialised, nothing on disk), in a fresh process, wall clock and CPU time (the CPU
figure does not move with other work on the machine). Goal (issue 26): <= 3 s per row."""

from __future__ import annotations

import statistics
import time

from tsbench.bench.common import load_average, measure_in_child, verdict

ROW_GOAL_S = 3.0
REPEATS = 2


def time_row(category: str, length: int, repeats: int = REPEATS) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of `detector.analyse` for `repeats` rows of that cell."""
    from tsbench.baselines import detector
    from tsbench.tasks.anomalyxl.config import preset
    from tsbench.tasks.anomalyxl.rowplan import materialize, plan_row

    detector.analyse(category, list(materialize(plan_row(preset("paper"), "bench", category, 16384, 0).plan)))
    out = []
    for index in range(repeats):
        values = list(materialize(plan_row(preset("paper"), "bench", category, length, index).plan))
        wall, cpu = time.perf_counter(), time.process_time()
        detector.analyse(category, values)
        out.append((time.perf_counter() - wall, time.process_time() - cpu))
    return out


def main() -> dict:
    from tsbench.tasks.anomalyxl import labels

    _, peak, timings = measure_in_child(time_row, labels.ALL_CHANNELS, 131072)
    wall = statistics.median(w for w, _ in timings)
    cpu = statistics.median(c for _, c in timings)
    met = verdict(cpu <= ROW_GOAL_S)
    print(
        f"detector (16 x 131072 all-channels row, {len(timings)} rows; {load_average()}):\n"
        f"  per row: CPU median {cpu:.2f} s (min {min(c for _, c in timings):.2f}), wall median {wall:.2f} s, "
        f"peak RSS {peak / 2**30:.2f} GiB; goal <= {ROW_GOAL_S:g} s (CPU): {met}"
    )
    return {"cpu_s": cpu, "wall_s": wall, "goal_s": ROW_GOAL_S, "met": cpu <= ROW_GOAL_S}
