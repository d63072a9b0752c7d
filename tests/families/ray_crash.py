"""AnomalyXL with one row that kills whatever process loads it: the row that keeps failing, for
tests/test_ray_executor.py. Only Ray workers load rows when files travel by path."""

from __future__ import annotations

import os

from tsbench.tasks.anomalyxl.taskset import AnomalyXL

KILLER_ID = "kill-the-worker"


class KillsItsWorker(AnomalyXL):
    def load(self, ref):
        if ref.id == KILLER_ID:
            os._exit(17)
        return super().load(ref)
