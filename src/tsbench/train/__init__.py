"""Post-training: pure reward / advantage / loss functions, rollout collection through the harness,
and the GRPO trainer (`train_grpo`). Importing this package is cheap; torch loads with the trainer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tsbench.train.grpo import GRPOConfig, RichProgress, load_grpo_config, train_grpo

__all__ = ["GRPOConfig", "RichProgress", "load_grpo_config", "train_grpo"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from tsbench.train import grpo

        return getattr(grpo, name)
    raise AttributeError(f"module 'tsbench.train' has no attribute {name!r}")
