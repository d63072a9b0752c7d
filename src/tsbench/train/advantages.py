"""Group-relative advantages with a named choice of the standard deviation they are divided by.

GRPO's advantage of rollout i in a group is (R_i - mean) / (std + eps). Which std is a published-number
question: TimeMaster's eq. 6 writes the population sigma (divide by G), while the authors' training code
(verl's compute_grpo_outcome_advantage: torch.std, Bessel-corrected) and TRL (nanstd, Bessel-corrected)
divide by the sample std (G - 1), so the paper's tables were trained with "sample" (x sqrt((G-1)/G) of
eq. 6's advantage: 0.894 at G = 5). "sample" stays the default; "population" is eq. 6 as written.
Both use TRL's eps (1e-4) so the two differ only in the sigma. Unscorable rollouts (NaN reward) are left
out of their group's mean and std, as TRL does, and get advantage 0.
"""

from __future__ import annotations

import numpy as np

ADVANTAGE_STDS = ("sample", "population")
TRL_EPS = 1e-4  # TRL's GRPOTrainer: advantages / (std_rewards + 1e-4)


def group_advantages(rewards, group: int, *, std: str = "sample", eps: float = TRL_EPS) -> np.ndarray:
    """(R - group mean) / (group std + eps) for consecutive groups of `group` rewards (NaN: unscorable).

    `std` "sample" divides the squared deviations by n - 1 (TRL, verl), "population" by n (eq. 6), where n
    counts the group's scorable rewards; a group of one scorable reward has std 0 either way."""
    if std not in ADVANTAGE_STDS:
        raise ValueError(f"advantage std must be one of {', '.join(ADVANTAGE_STDS)}, not {std!r}")
    values = np.asarray(rewards, dtype=np.float64)
    if group < 1 or values.size % group:
        raise ValueError(f"{values.size} rewards do not split into groups of {group}")
    grouped = values.reshape(-1, group)
    scored = ~np.isnan(grouped)
    n = scored.sum(axis=1, keepdims=True)
    mean = np.nansum(grouped, axis=1, keepdims=True) / np.maximum(n, 1)
    squares = np.where(scored, (grouped - mean) ** 2, 0.0).sum(axis=1, keepdims=True)
    dof = n - 1 if std == "sample" else n
    sigma = np.sqrt(np.where(dof > 0, squares / np.maximum(dof, 1), 0.0))
    advantages = np.where(scored, (grouped - mean) / (sigma + eps), 0.0)
    return advantages.reshape(-1)
