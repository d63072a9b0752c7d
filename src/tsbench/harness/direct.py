"""The `direct` harness: a reference policy answers from the task itself, series included.

No model reads messages here, so nothing a chat harness withholds is withheld: results of this
harness are reference points (see baselines/), labelled as such and never ranked with models.
"""

from __future__ import annotations

import time

from tsbench.core.episode import EpisodeResult, EpisodeTask
from tsbench.harness.base import Harness
from tsbench.harness.settings import HarnessSettings
from tsbench.models.base import Agent


class Direct(Harness[HarnessSettings]):
    """`direct`: `agent.answer(task)` is the final message."""

    reference = True
    memory = False  # the policy reads the task, not a prompt a precedent could prefix

    def run(self, agent: Agent, task: EpisodeTask, cfg: HarnessSettings) -> EpisodeResult:
        if agent.chats():
            raise TypeError(f"harness direct plays reference policies only, not {agent.name!r}")
        started = time.perf_counter()
        text = agent.answer(task)
        result = EpisodeResult(final_message=text, turns=1, latency_s=time.perf_counter() - started)
        result.transcript = [{"role": "user", "content": task.question}, {"role": "policy", "content": text}]
        return result
