"""Experiment-tracking targets shared by eval and training: which `--report-to` values exist, and
the check that runs before any work starts (an unknown name or a missing package is one line)."""

from __future__ import annotations

from tsbench.core.errors import UserError
from tsbench.core.extras import check

TARGETS = ("tensorboard", "wandb")


def check_targets(targets: list[str] | None) -> list[str]:
    """The --report-to values, checked before a run starts (`none` reports nowhere)."""
    chosen = [t for t in (targets or []) if t != "none"]
    unknown = [t for t in chosen if t not in TARGETS]
    if unknown:
        raise UserError(f"--report-to takes {', '.join(TARGETS)} or none (got {', '.join(unknown)})")
    for target in chosen:
        check(target, extra="tracking", what=f"--report-to {target}")
    return chosen
