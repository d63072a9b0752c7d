"""The per-step task keys TRL reads; the tasks themselves come from the family's training stream.

TRL reads a dataset of task KEYS ("step-000003/task-01"), one row per task, in order; its sampler
repeats each key G times. A key names its task completely: task j of step s is
`family.training_stream(request).sample(s, j)`, a pure function of the request, so a resumed run
draws exactly the tasks it would have drawn. (AnomalyXL's negatives curriculum lives with its
generator, in tasks/anomalyxl/curriculum.py.)
"""

from __future__ import annotations

import re

_KEY = re.compile(r"^step-(\d+)/task-(\d+)$")


def task_key(step: int, j: int) -> str:
    return f"step-{step:06d}/task-{j:02d}"


def parse_key(key: str) -> tuple[int, int]:
    match = _KEY.match(key)
    if match is None:
        raise ValueError(f"not a task key: {key!r}")
    return int(match.group(1)), int(match.group(2))


def task_keys(steps: int, tasks_per_step: int) -> list[str]:
    """Every key of a run, in the order TRL reads them."""
    return [task_key(s, j) for s in range(1, steps + 1) for j in range(tasks_per_step)]
