"""TimeClaw's episodic memory around any harness: retrieved precedents prefix the question.

The wrapper lives here, not in harness/, because it reads a bank built from results; a harness
knows nothing of runs. Precedents carry summaries and trajectories, never their answers.
"""

from __future__ import annotations

from dataclasses import replace

from tsbench.harness import EpisodeError, EpisodeResult, EpisodeTask, Harness, HarnessConfig
from tsbench.timeclaw.bank import recall


def with_memory(task: EpisodeTask, cfg: HarnessConfig) -> tuple[EpisodeTask, dict]:
    """The task with retrieved precedents' summaries prefixed to its question, and a transcript
    event saying what was retrieved."""
    prefix, event = recall(
        cfg.memory_bank,
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
        top_k=cfg.top_k,
        pool=cfg.memory_pool,
        family_filter=cfg.memory_family_filter,
        exclude_self=cfg.memory_exclude_self,
        embedder=cfg.embedder,
    )
    if not prefix:
        return task, event
    return replace(task, question=f"{prefix}\n\n{task.question}"), event


def remembering(harness: Harness) -> Harness:
    """`harness`, with the memory prefix when the config names a bank (and top_k > 0)."""

    def run(agent, task: EpisodeTask, cfg: HarnessConfig) -> EpisodeResult:
        if not cfg.memory_bank or cfg.top_k <= 0:
            return harness(agent, task, cfg)
        task, event = with_memory(task, cfg)
        try:
            result = harness(agent, task, cfg)
        except EpisodeError as exc:
            if exc.result is not None:
                exc.result.transcript.insert(0, event)
            raise
        result.transcript.insert(0, event)
        return result

    return run
