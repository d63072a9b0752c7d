"""What a harness takes (one task, never its gold) and gives back (one final message + a trace), and
the error that ends an episode at one of its caps."""

from __future__ import annotations

from tsbench.core.deadline import BudgetSpent
from tsbench.core.episode import EpisodeOutcome, EpisodeResult, EpisodeTask, TaskInfo


class EpisodeError(BudgetSpent):
    """The episode hit a cap (tokens, wall clock); the row is recorded as an error, not scored.
    A BudgetSpent: raised inside a sub_rlm episode it ends the row, never becomes a cell's observation."""

    def __init__(self, kind: str, message: str, result: EpisodeResult | None = None):
        super().__init__(kind, message)
        self.kind = kind
        self.result = result


KERNEL_LOST = "kernel_lost"  # the error kind of an episode whose kernel died or was restarted mid-cell


def end_if_kernel_lost(cell, result: EpisodeResult | None) -> None:
    """A cell after which the sandbox had to restart the kernel (it died: a crash, the memory bound, a
    signal; or it would not stop when interrupted) ends the episode as an error row, retried on resume:
    whatever the policy answered next would be scored as its answer to a lost kernel."""
    if getattr(cell, "restarted", False):
        why = (cell.error or "kernel restarted").strip().splitlines()[-1][:300]
        raise EpisodeError(KERNEL_LOST, f"the episode's kernel was lost mid-cell ({why})", result)


__all__ = [
    "KERNEL_LOST",
    "EpisodeError",
    "end_if_kernel_lost",
    "EpisodeOutcome",
    "EpisodeResult",
    "EpisodeTask",
    "TaskInfo",
]
