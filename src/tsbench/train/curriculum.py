"""The negatives curriculum and the per-step task stream.

Curriculum (timerlm-anomalyxl §4.1): anomaly-free cases are withheld for the first `warm_steps`
steps (220 of 300 by default), so early rollouts cannot learn to over-use "no anomaly": localize's
p_present is 1.0 and localize-all-channels' min_k is 1; afterwards both return to the generator's
values (0.8 and 0). The cut-over is recorded in train.json and checked on --resume.

Task stream: TRL reads a dataset of task KEYS ("step-000003/task-01"), one row per task, in order;
its sampler repeats each key G times. A key names its task completely: step s draws its cells from
a generator seeded by (seed, "grpo", s), and task j of step s is row INDEX_BASE + (s - 1) *
tasks_per_step + j of the `train` split, so no row repeats within a run, a resumed run draws
exactly the rows it would have drawn, and no task is a row of the generated train/val/test files.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from tsbench.core.episode import EpisodeTask
from tsbench.tasks.anomalyxl.config import GenConfig, preset
from tsbench.tasks.anomalyxl.rowplan import RowPlan, materialize, plan_row
from tsbench.tasks.anomalyxl.seeds import derive_seed

WARM_P_PRESENT = 1.0
WARM_MIN_K = 1
INDEX_BASE = 1_000_000
TRAIN_SPLIT = "train"
_KEY = re.compile(r"^step-(\d+)/task-(\d+)$")


def generator_config(step: int, warm_steps: int, *, preset_name: str = "paper", seed: int = 0,
                     lengths: list[int] | tuple[int, ...] | None = None) -> GenConfig:
    """The generator's settings for one step (steps count from 1): the preset (its p_present and
    min_k are the paper's 0.8 and 0), the curriculum on top while step <= warm_steps."""
    cfg = preset(preset_name, seed=seed)
    if lengths:
        cfg.single_lengths = cfg.multi_lengths = tuple(sorted(set(lengths)))
    if step <= warm_steps:
        cfg = dataclasses.replace(cfg, p_present=WARM_P_PRESENT, min_k=max(cfg.min_k, WARM_MIN_K))
    return cfg


def task_key(step: int, j: int) -> str:
    return f"step-{step:06d}/task-{j:02d}"


def parse_key(key: str) -> tuple[int, int]:
    match = _KEY.match(key)
    if match is None:
        raise ValueError(f"not a task key: {key!r}")
    return int(match.group(1)), int(match.group(2))


class TaskStream:
    """Fresh tasks for every step, named by key; pure functions of (settings, seed, step, j)."""

    def __init__(self, tasks: Any, *, steps: int, warm_steps: int, tasks_per_step: int, seed: int):
        self.tasks = tasks  # a TaskConfig
        self.steps = steps
        self.warm_steps = warm_steps
        self.tasks_per_step = tasks_per_step
        self.seed = seed

    def keys(self) -> list[str]:
        return [task_key(s, j) for s in range(1, self.steps + 1) for j in range(self.tasks_per_step)]

    def generator(self, step: int) -> GenConfig:
        return generator_config(step, self.warm_steps, preset_name=self.tasks.preset, seed=self.seed,
                                lengths=self.tasks.lengths)

    def plan(self, key: str) -> RowPlan:
        step, j = parse_key(key)
        gen = self.generator(step)
        cells = [(c, n) for c in self.tasks.categories for n in gen.lengths_for(c)]
        if not cells:
            raise ValueError("no (category, length) cells to draw tasks from")
        picks = np.random.default_rng(derive_seed(self.seed, "grpo", step)).integers(len(cells), size=self.tasks_per_step)
        category, length = cells[int(picks[j])]
        return plan_row(gen, TRAIN_SPLIT, category, length, INDEX_BASE + (step - 1) * self.tasks_per_step + j)


def episode_task(plan: RowPlan, extra_instructions: str = "") -> EpisodeTask:
    """The harness's view of a planned row: question (plus any format instructions) and values, never gold."""
    question = plan.question + (f"\n\n{extra_instructions}" if extra_instructions else "")
    return EpisodeTask(plan.id, plan.category, plan.regime, question, list(plan.channel_names),
                       materialize(plan.plan), list(plan.options))


def record_columns(plan: RowPlan) -> dict[str, Any]:
    """The results-schema columns of a planned row (as a Taskset's Sample.columns)."""
    return {"category": plan.category, "split": plan.split, "regime": plan.regime, "length": plan.length,
            "n_channels": len(plan.channel_names)}
