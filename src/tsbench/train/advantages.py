"""Group-relative advantages, pure.

`dr-grpo` (the paper's default, Dr. GRPO): A_i = R_i - mean_j R_j, no division by the group's std.
`grpo` (TimeMaster eq. 6): A_i = (R_i - mean_j R_j) / (std_j R_j + eps), std over the group (1/G).
A group whose rewards are all equal carries no signal (every A_i would be 0) and is dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

ADVANTAGES = ("dr-grpo", "grpo")
STD_EPS = 1e-6
ZERO_VARIANCE_TOL = 1e-12  # rewards this close count as equal


@dataclass(frozen=True)
class GroupAdvantages:
    advantages: list[float]
    dropped: bool  # zero reward variance: every advantage is 0 and the group is left out of the loss
    mean: float
    std: float


def group_advantages(rewards: Sequence[float], mode: str = "dr-grpo", eps: float = STD_EPS) -> GroupAdvantages:
    if mode not in ADVANTAGES:
        raise ValueError(f"advantage must be one of {', '.join(ADVANTAGES)} (got {mode!r})")
    if not rewards:
        raise ValueError("a group needs at least one reward")
    values = [float(r) for r in rewards]
    mean = sum(values) / len(values)
    std = math.sqrt(sum((r - mean) ** 2 for r in values) / len(values))
    if max(values) - min(values) <= ZERO_VARIANCE_TOL:
        return GroupAdvantages([0.0] * len(values), True, mean, std)
    if mode == "dr-grpo":
        advantages = [r - mean for r in values]
    else:
        advantages = [(r - mean) / (std + eps) for r in values]
    return GroupAdvantages(advantages, False, mean, std)


def batch_advantages(groups: Sequence[Sequence[float]], mode: str = "dr-grpo", eps: float = STD_EPS) -> list[GroupAdvantages]:
    """One GroupAdvantages per group (each group = the G rollouts of one task)."""
    return [group_advantages(g, mode, eps) for g in groups]
