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


__all__ = ["EpisodeError", "EpisodeOutcome", "EpisodeResult", "EpisodeTask", "TaskInfo"]
