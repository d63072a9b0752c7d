"""One episode as plain data (`EpisodeJob`), and the one function that runs it anywhere.

A job names its sample by reference (family, file, id), its agent by spec string and its harness
by name, so a thread, a process or a Ray worker on another machine can run it from the job
alone. The record it returns is the results schema's row; the coordinator journals it.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field

from tsbench.eval.agents import AgentCache
from tsbench.harness import EpisodeOutcome, HarnessConfig, get_harness, play
from tsbench.results.records import apply_outcome, apply_score, finish, new_record
from tsbench.tasks import get_taskset
from tsbench.tasks.base import Sample, SampleRef
from tsbench.timeclaw.memory_wrapper import remembering


@dataclass(frozen=True)
class EpisodeJob:
    ref: SampleRef
    epoch: int
    model: str
    harness: str
    harness_config: HarnessConfig = field(default_factory=HarnessConfig)
    model_options: tuple[tuple[str, object], ...] = ()  # (name, value) pairs, None values dropped

    @property
    def key(self) -> tuple[str, int]:
        return (self.ref.id, self.epoch)


def execute_job(job: EpisodeJob, agents: AgentCache, sample: Sample | None = None) -> dict:
    """Load the sample (unless it came along, e.g. through Ray's object store), play the episode,
    score it, build its record. Never raises for model, jail or episode failures: those are the
    record's error; a bad sample reference raises."""
    taskset = get_taskset(job.ref.family)
    sample = sample if sample is not None else taskset.load(job.ref)
    started = time.perf_counter()
    record = new_record(
        sample_id=job.ref.id, epoch=job.epoch, family=job.ref.family,
        columns={"category": sample.task.category, **sample.columns}, model=job.model, harness=job.harness,
        depth=job.harness_config.depth, gold=sample.gold,
    )
    agent = agents.get(job.model, dict(job.model_options))
    outcome = play(agent, remembering(get_harness(job.harness)), sample.task, job.harness_config)
    apply_outcome(record, outcome)
    if outcome.finished:
        scored = taskset.score(sample.task.category, sample.gold, outcome.result.final_message)
        apply_score(record, score=scored.score, valid=scored.valid, parsed=scored.parsed,
                    answer_error=scored.error, metrics=scored.metrics)
    return finish(record, time.perf_counter() - started)


def failed_record(job: EpisodeJob, exc: BaseException, kind: str = "internal") -> dict:
    """The error row for a job that could not run at all (its worker died, its sample would not
    load): recorded, never scored, run again on resume."""
    record = new_record(sample_id=job.ref.id, epoch=job.epoch, family=job.ref.family, columns={}, model=job.model,
                        harness=job.harness, depth=job.harness_config.depth, gold=None)
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    apply_outcome(record, EpisodeOutcome(None, kind, detail))
    return finish(record, 0.0)
