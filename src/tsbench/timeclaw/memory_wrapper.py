"""TimeClaw's episodic memory around a harness: retrieved precedents prefix the question.

The wrapper lives here, not in harness/, because it reads a bank built from results; a harness
knows nothing of runs. Precedents carry summaries and trajectories, never their answers. It wraps
only a harness that declares the memory capability (harness/base.py), single episodes and chains
alike; `episode_setup` is how eval and training get a harness and its settings from a run's,
with the wrapper where [memory] names a bank and every setting that does not apply
refused.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tsbench.harness import (
    EpisodeError,
    EpisodeOutcome,
    EpisodeResult,
    EpisodeTask,
    Harness,
    MemorySettings,
    get_harness,
    memory_for,
)
from tsbench.harness.base import After
from tsbench.models.base import Agent
from tsbench.timeclaw.bank import recall


def with_memory(task: EpisodeTask, memory: MemorySettings) -> tuple[EpisodeTask, dict]:
    """The task with retrieved precedents' summaries prefixed to its question, and a transcript
    event saying what was retrieved."""
    prefix, event = recall(
        memory.memory_bank,
        row_id=task.row_id,
        category=task.category,
        regime=task.regime,
        question=task.question,
        channel_names=task.channel_names,
        values=task.values,
        options=task.options,
        timestamps=task.meta.get("time_s"),
        meta=task.meta,
        descriptor=task.meta.get("memory_descriptor"),
        top_k=memory.top_k,
        pool=memory.memory_pool,
        family_filter=memory.memory_family_filter,
        exclude_self=memory.memory_exclude_self,
        embedder=memory.embedder,
    )
    if not prefix:
        return task, event
    return replace(task, question=f"{prefix}\n\n{task.question}"), event


class Remembering(Harness):
    """`inner` with the memory prefix on every task it plays; its capabilities are the inner harness's."""

    def __init__(self, inner: Harness, memory: MemorySettings):
        if not inner.memory:
            raise ValueError(f"harness {inner.name} has no memory capability")
        self.inner, self.memory_settings = inner, memory
        self.name = inner.name
        self.settings_class = inner.settings_class
        for capability, value in inner.capabilities().items():
            setattr(self, capability, value)

    def settings(self, given: Any) -> Any:
        return self.inner.settings(given)

    def pairing_problem(self, agent: Agent, cfg: Any) -> str | None:
        return self.inner.pairing_problem(agent, cfg)

    def prepare(self) -> None:
        self.inner.prepare()

    def run(self, agent: Agent, task: EpisodeTask, cfg: Any) -> EpisodeResult:
        task, event = with_memory(task, self.memory_settings)
        try:
            result = self.inner.run(agent, task, cfg)
        except EpisodeError as exc:
            if exc.result is not None:
                exc.result.transcript.insert(0, event)
            raise
        result.transcript.insert(0, event)
        return result

    def run_chain(
        self, agent: Agent, tasks: list[EpisodeTask], cfg: Any, after: After | None = None
    ) -> list[EpisodeOutcome]:
        remembered = [with_memory(task, self.memory_settings) for task in tasks]

        def told(index: int, outcome: EpisodeOutcome) -> str | None:
            if outcome.result is not None:
                outcome.result.transcript.insert(0, remembered[index][1])
            return after(index, outcome) if after is not None else None

        return self.inner.run_chain(agent, [task for task, _ in remembered], cfg, told)


def episode_setup(harness: str | Harness, settings: Any, memory: MemorySettings | None = None) -> tuple[Harness, Any]:
    """(the harness to play, its own settings) from a run's: the memory wrapper around it when [memory]
    names a bank (and top_k > 0); a setting the harness does not have, memory's included where it has no
    memory capability, is a UserError (one line)."""
    inner = get_harness(harness) if isinstance(harness, str) else harness
    remembered = memory_for(inner, memory)
    return (inner if remembered is None else Remembering(inner, remembered)), inner.settings(settings)


__all__ = ["Remembering", "episode_setup", "with_memory"]
