"""AnomalyXL whose rows take a while to load (`SlowToLoad`), so an episode is surely in flight when a
test takes its Ray node away (tests/test_ray_node_loss.py). Rows travel by path: workers load them."""

from __future__ import annotations

import time

from tsbench.tasks.anomalyxl.taskset import AnomalyXL

LOAD_S = 2.0


class SlowToLoad(AnomalyXL):
    def load(self, ref):
        time.sleep(LOAD_S)
        return super().load(ref)


class CpuHolder:
    """A Ray actor that only holds its CPU, so that no episode worker can be placed there."""

    def ready(self) -> bool:
        return True
