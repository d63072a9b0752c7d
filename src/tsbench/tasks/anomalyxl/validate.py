"""Checks on generator settings, so bad arguments fail in one clear line before any work starts."""

from __future__ import annotations

from tsbench.core.errors import UserError
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.config import GenConfig


def check_config(cfg: GenConfig) -> None:
    unknown = [c for c in cfg.categories if c not in lb.PRECISE_CATEGORIES]
    if unknown:
        raise UserError(f"unknown categories {unknown}; choose from {', '.join(lb.PRECISE_CATEGORIES)}")
    if not cfg.categories:
        raise UserError("no categories selected")
    lo, hi = cfg.width_range
    if not (8 <= lo <= hi):
        raise UserError(
            f"--width-range must satisfy 8 <= A <= B (got {lo} {hi}); seasonality needs >= 2 cycles of period >= 4"
        )
    for length in set(cfg.single_lengths) | set(cfg.multi_lengths):
        if length < 4 * hi or length < 512:
            raise UserError(
                f"length {length} is too short: every L must be >= max(512, 4 x the widest window = {4 * hi})"
            )
    m_lo, m_hi = cfg.magnitude_range
    if not (0 < m_lo <= m_hi):
        raise UserError(f"--magnitude-range must satisfy 0 < A <= B (got {m_lo} {m_hi})")
    if not 0.0 <= cfg.p_present <= 1.0:
        raise UserError(f"--p-present must be in [0, 1] (got {cfg.p_present})")
    if not 0 <= cfg.min_k <= cfg.max_k <= min(3, cfg.n_channels_all):
        raise UserError(f"--min-k must be in 0..{cfg.max_k} (got {cfg.min_k})")
    weights = cfg.noise_weights
    if len(weights) != 3 or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise UserError(
            f"--noise-weights takes three non-negative weights (white, red, ar1) with a positive sum (got {weights})"
        )
    for name in ("rows_per_cell", "val_rows", "train_rows"):
        if getattr(cfg, name) < 0:
            raise UserError(f"--{name.replace('_', '-')} must be >= 0")
