"""The base of reference policies that read the task itself under the `direct` harness."""

from __future__ import annotations

from typing import ClassVar

from tsbench.models.base import Agent


class DirectPolicy(Agent):
    """Answers from the EpisodeTask, series included (`answer`), never from messages: what it `knows`
    that a model does not is shown beside every number it scores."""

    plays = ("direct",)
    knows: ClassVar[str] = ""

    @classmethod
    def chats(cls) -> bool:
        return False

    def reference(self) -> str:
        return self.knows
