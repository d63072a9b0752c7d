"""AnomalyXL's training stream: fresh generator tasks every step, with the negatives curriculum.

Curriculum (timerlm-anomalyxl §4.1): anomaly-free cases are withheld for the first `warm_steps`
steps (220 of 300 by default), so early rollouts cannot learn to over-use "no anomaly": localize's
p_present is 1.0 and localize-all-channels' min_k is 1; afterwards both return to the generator's
values (0.8 and 0). The trainer records the cut-over and checks it on --resume.

Task j of step s: step s draws its (category, length) cells from a generator seeded by (seed,
"grpo", s), and the task is row INDEX_BASE + (s - 1) * tasks_per_step + j of the `train` split,
so no row repeats within a run, a resumed run draws exactly the rows it would have drawn, and no
task is a row of the generated train/val/test files.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tsbench.core.errors import UserError
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.config import GenConfig, preset
from tsbench.tasks.anomalyxl.rowplan import materialize, plan_row
from tsbench.tasks.anomalyxl.rows import Row
from tsbench.tasks.anomalyxl.seeds import derive_seed
from tsbench.tasks.base import Sample, SampleRef, TrainingRequest, TrainingStream, row_sample

WARM_P_PRESENT = 1.0
WARM_MIN_K = 1
INDEX_BASE = 1_000_000
TRAIN_SPLIT = "train"
GRIDS = ("paper", "small")
OPTIONS = ("preset", "lengths")


def generator_config(
    step: int,
    warm_steps: int,
    *,
    preset_name: str = "paper",
    seed: int = 0,
    lengths: list[int] | tuple[int, ...] | None = None,
) -> GenConfig:
    """The generator's settings for one step (steps count from 1): the preset (its p_present and
    min_k are the paper's 0.8 and 0), the curriculum on top while step <= warm_steps."""
    cfg = preset(preset_name, seed=seed)
    if lengths:
        cfg.single_lengths = cfg.multi_lengths = tuple(sorted(set(lengths)))
    if step <= warm_steps:
        cfg = dataclasses.replace(cfg, p_present=WARM_P_PRESENT, min_k=max(cfg.min_k, WARM_MIN_K))
    return cfg


def request_problems(request: TrainingRequest) -> list[str]:
    """What is wrong with a training request for AnomalyXL, one line each."""
    found = []
    categories = request.categories or lb.PRECISE_CATEGORIES
    unknown = [c for c in categories if c not in lb.ALL_CATEGORIES]
    if unknown:
        found.append(f"unknown --categories {', '.join(unknown)} for family anomalyxl")
    if any(c in lb.MCQ_CATEGORIES for c in categories):
        found.append("anomalyxl trains on precise (Localize) tasks; MCQ templates are not generated per step")
    extra = sorted(set(request.options) - set(OPTIONS))
    if extra:
        found.append(f"family anomalyxl has no training option {', '.join(extra)}")
    lengths = request.options.get("lengths")
    if lengths is not None and (not lengths or min(lengths) < 16):
        found.append("--lengths must be series lengths >= 16")
    if (request.options.get("preset") or "paper") not in GRIDS:
        found.append(f"--preset must be one of {', '.join(GRIDS)}")
    if request.data:
        found.append("family anomalyxl draws fresh generator tasks every step: --data does not apply")
    return found


class GeneratorStream(TrainingStream):
    """Fresh AnomalyXL tasks, pure functions of (request, step, j)."""

    def __init__(self, family: str, request: TrainingRequest):
        problems = request_problems(request)
        if problems:
            raise UserError("; ".join(problems))
        self.family = family
        self.request = request
        self.categories = tuple(request.categories or lb.PRECISE_CATEGORIES)
        self.preset = request.options.get("preset") or "paper"
        self.lengths = request.options.get("lengths")

    def generator(self, step: int) -> GenConfig:
        return generator_config(
            step, self.request.warm_steps, preset_name=self.preset, seed=self.request.seed, lengths=self.lengths
        )

    def plan(self, step: int, j: int) -> Row:
        gen = self.generator(step)
        cells = [(c, n) for c in self.categories for n in gen.lengths_for(c)]
        if not cells:
            raise UserError("no (category, length) cells to draw training tasks from")
        tasks = self.request.tasks_per_step
        picks = np.random.default_rng(derive_seed(self.request.seed, "grpo", step)).integers(len(cells), size=tasks)
        category, length = cells[int(picks[j])]
        return plan_row(gen, TRAIN_SPLIT, category, length, INDEX_BASE + (step - 1) * tasks + j)

    def sample(self, step: int, j: int) -> Sample:
        plan = self.plan(step, j)
        return row_sample(SampleRef(self.family, "", plan.id), plan, materialize(plan.plan))

    def step_metrics(self, step: int) -> dict[str, float]:
        gen = self.generator(step)
        return {"p_present": float(gen.p_present), "min_k": float(gen.min_k)}
