"""The task curriculum and the per-step task stream.

Curriculum (timerlm-anomalyxl §4.1): anomaly-free cases are withheld for the first 220 of 300 steps,
so early rollouts cannot learn to over-use "no anomaly": localize's p_present is 1.0 and
localize-all-channels' min_k is 1; afterwards both return to the generator's values (0.8 and 0).
The cut-over is a fraction of the run, so a shorter run keeps the same shape.

Task stream: step s draws its tasks from a generator seeded by (seed, "grpo", s), and task j of step
s gets the row index INDEX_BASE + (s - 1) * tasks_per_step + j in the `train` split, so no row
repeats within a run, a resumed run draws exactly the rows it would have drawn, and no task is a
row of the generated train/val/test files (those use small indices).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tsbench.tasks.anomalyxl.config import GenConfig, preset
from tsbench.tasks.anomalyxl.rowplan import RowPlan, plan_row
from tsbench.tasks.anomalyxl.seeds import derive_seed

CURRICULUM_FRACTION = 220 / 300
WARM_P_PRESENT = 1.0
WARM_MIN_K = 1
INDEX_BASE = 1_000_000
TRAIN_SPLIT = "train"


def warm_steps(total_steps: int, fraction: float = CURRICULUM_FRACTION) -> int:
    """How many of the first steps run without anomaly-free cases (220 of 300 by default)."""
    return int(round(total_steps * fraction))


def in_warm_phase(step: int, total_steps: int, fraction: float = CURRICULUM_FRACTION) -> bool:
    """Steps count from 1."""
    return step <= warm_steps(total_steps, fraction)


def generator_config(
    step: int,
    total_steps: int,
    *,
    fraction: float = CURRICULUM_FRACTION,
    preset_name: str = "paper",
    seed: int = 0,
    lengths: tuple[int, ...] | None = None,
) -> GenConfig:
    """The generator's settings for one step: the preset (its p_present and min_k are the paper's
    0.8 and 0), the curriculum on top during the warm phase, and optional lengths for every category."""
    cfg = preset(preset_name, seed=seed)
    if lengths:
        cfg.single_lengths = cfg.multi_lengths = tuple(sorted(set(lengths)))
    if in_warm_phase(step, total_steps, fraction):
        cfg = dataclasses.replace(cfg, p_present=WARM_P_PRESENT, min_k=max(cfg.min_k, WARM_MIN_K))
    return cfg


def sample_tasks(gen: GenConfig, categories: tuple[str, ...], step: int, n_tasks: int, seed: int) -> list[RowPlan]:
    """The step's fresh tasks: cells (category, L) drawn uniformly, row indices unique in the run."""
    cells = [(c, n) for c in categories for n in gen.lengths_for(c)]
    if not cells:
        raise ValueError("no (category, length) cells to draw tasks from")
    rng = np.random.default_rng(derive_seed(seed, "grpo", step))
    picks = rng.integers(len(cells), size=n_tasks)
    first = INDEX_BASE + (step - 1) * n_tasks
    return [plan_row(gen, TRAIN_SPLIT, *cells[int(k)], first + j) for j, k in enumerate(picks)]
