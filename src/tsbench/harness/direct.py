"""The `direct` harness: a reference policy answers from the task itself, series included.

No model reads messages here, so nothing a chat harness withholds is withheld: results of this
harness are reference points (see baselines/), labelled as such and never ranked with models.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from tsbench.core.episode import EpisodeResult, EpisodeTask
from tsbench.harness.episode import HarnessConfig


@runtime_checkable
class DirectPolicy(Protocol):
    name: str
    reference: str  # what it knows that a model does not, shown beside every number

    def answer(self, task: EpisodeTask) -> str: ...

    def close(self) -> None: ...


def run_direct(policy: DirectPolicy, task: EpisodeTask, cfg: HarnessConfig) -> EpisodeResult:
    if not isinstance(policy, DirectPolicy):
        raise TypeError(f"harness direct plays reference policies only, not {getattr(policy, 'name', policy)!r}")
    started = time.perf_counter()
    text = policy.answer(task)
    result = EpisodeResult(final_message=text, turns=1, latency_s=time.perf_counter() - started)
    result.transcript = [{"role": "user", "content": task.question}, {"role": "policy", "content": text}]
    return result
