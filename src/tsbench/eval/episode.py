"""One episode as plain data (`EpisodeJob`), and the one function that runs it anywhere.

A job names its sample by reference (family, file, id), its agent by spec string and its harness
by name, so a thread, a process or a Ray worker on another machine can run it from the job
alone. The records it returns are results-schema rows; the coordinator journals them.

A job carries its harness's own settings (`harness_config`, built and checked by the coordinator,
harness/settings.py) and, when the run names a bank, TimeClaw's [memory] settings, played around the
harness by the memory wrapper. A job may be a chain (TimeSage sequential mode): `ref` then `chain`,
played in order by one agent state through the harness's `run_chain` (harnesses that declare the
chains capability), each sample scored as it ends so the next one can start with its feedback. A
family that scores with a judge gets its options in `scoring`.
"""

from __future__ import annotations

import inspect
import os
import socket
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tsbench.eval.agents import AgentCache
from tsbench.harness import EpisodeOutcome, HarnessSettings, MemorySettings, get_harness, play
from tsbench.models.base import Agent, Message
from tsbench.results.records import apply_outcome, apply_score, finish, new_record
from tsbench.tasks import get_taskset
from tsbench.tasks.base import JudgeReply, Sample, SampleRef


@dataclass(frozen=True)
class EpisodeJob:
    ref: SampleRef
    epoch: int
    model: str
    harness: str
    harness_config: HarnessSettings = field(default_factory=HarnessSettings)  # the harness's own settings
    model_options: tuple[tuple[str, object], ...] = ()  # (name, value) pairs, None values dropped
    chain: tuple[SampleRef, ...] = ()  # samples the same agent state plays after `ref`, in order
    scoring: tuple[tuple[str, object], ...] = ()  # the family scorer's options (judge, run_dir)
    memory: MemorySettings | None = None  # TimeClaw's memory around the harness (None: none)

    @property
    def key(self) -> tuple[str, int]:
        return (self.ref.id, self.epoch)

    @property
    def refs(self) -> tuple[SampleRef, ...]:
        return (self.ref, *self.chain)

    @property
    def keys(self) -> list[tuple[str, int]]:
        return [(ref.id, self.epoch) for ref in self.refs]


_scorers: dict[tuple, Callable] = {}
_scorers_lock = threading.Lock()


def judge_completer(model: Agent, max_tokens: int | None = None) -> Callable[..., JudgeReply]:
    """A judge model as the `prompt -> reply` callable a family's scorer takes, with its tokens and cost.
    Where the model's client takes `response_format`, the callable does too (`structured`): a judge
    asks for its declared JSON reply as structured output."""
    structured = "response_format" in inspect.signature(model.generate).parameters

    def complete(prompt: str, response_format: dict | None = None) -> JudgeReply:
        extra = {"response_format": response_format} if structured and response_format else {}
        completion = model.generate([Message("user", prompt)], max_tokens=max_tokens, temperature=0.0, **extra)
        return JudgeReply(completion.text, completion.input_tokens, completion.output_tokens, completion.cost_usd)

    complete.structured = structured  # type: ignore[attr-defined]
    return complete


def scorer_for(taskset: Any, job: EpisodeJob, agents: AgentCache) -> Callable[[str, Any, str], Any]:
    """taskset.score, or the family's scorer bound to the job's scoring options (one per process)."""
    if not job.scoring:
        return taskset.score
    key = (job.ref.family, job.scoring, id(agents))
    with _scorers_lock:
        if key not in _scorers:
            scoring = dict(job.scoring)
            options = dict(scoring.get("judge_options", ()))  # the judge's own (--judge-base-url ...)
            bound = scoring.get("judge_max_tokens")
            _scorers[key] = taskset.scorer(scoring, lambda spec: judge_completer(agents.get(spec, options), bound))
        return _scorers[key]


def _record(job: EpisodeJob, sample: Sample, outcome: EpisodeOutcome, score, seconds: float) -> tuple[dict, Any]:
    record = new_record(
        sample_id=sample.ref.id,
        epoch=job.epoch,
        family=sample.ref.family,
        columns={"category": sample.task.category, **sample.columns},
        model=job.model,
        harness=job.harness,
        depth=job.harness_config.recursion_depth,
        gold=sample.gold,
    )
    apply_outcome(record, outcome)
    scored = None
    if outcome.finished:
        scored = score(sample.task.category, sample.gold, outcome.result.final_message)
        apply_score(
            record,
            score=scored.score,
            valid=scored.valid,
            parsed=scored.parsed,
            answer_error=scored.error,
            metrics=scored.metrics,
        )
    return finish(record, seconds), scored


def execute_job(job: EpisodeJob, agents: AgentCache, samples: list[Sample] | None = None) -> list[dict]:
    """Load the samples (unless they came along, e.g. through Ray's object store), play them, score
    them, build their records. Never raises for model, jail or episode failures: those are the
    records' errors; a bad sample reference raises."""
    taskset = get_taskset(job.ref.family)
    score = scorer_for(taskset, job, agents)
    agent = agents.get(job.model, dict(job.model_options))
    if samples is None:
        samples = [taskset.load(ref) for ref in job.refs]
    harness = get_harness(job.harness)
    if job.memory is not None:  # TimeClaw's bank and fingerprints load only for a run that recalls
        from tsbench.timeclaw.memory_wrapper import Remembering

        harness = Remembering(harness, job.memory)
    if not job.chain:
        sample = samples[0]
        started = time.perf_counter()
        outcome = play(agent, harness, sample.task, job.harness_config)
        return [_record(job, sample, outcome, score, time.perf_counter() - started)[0]]
    records: list[dict] = []
    clock = [time.perf_counter()]

    def after(index: int, outcome: EpisodeOutcome) -> str | None:
        now = time.perf_counter()
        record, scored = _record(job, samples[index], outcome, score, now - clock[0])
        clock[0] = now
        records.append(record)
        return None if scored is None else taskset.feedback(samples[index], scored)

    harness.run_chain(agent, [s.task for s in samples], harness.settings(job.harness_config), after)
    return records


def failed_record(job: EpisodeJob, exc: BaseException, kind: str = "internal") -> list[dict]:
    """The error rows for a job that could not run at all (its worker died, its sample would not
    load): recorded, never scored, run again on resume."""
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    records = []
    for ref in job.refs:
        record = new_record(
            sample_id=ref.id,
            epoch=job.epoch,
            family=ref.family,
            columns={},
            model=job.model,
            harness=job.harness,
            depth=job.harness_config.recursion_depth,
            gold=None,
        )
        apply_outcome(record, EpisodeOutcome(None, kind, detail))
        records.append(finish(record, 0.0))
    return records


def this_worker(kind: str) -> tuple[str, str]:
    """(node, worker) of the calling thread: this host's name and `<kind>:<thread>@<pid>`."""
    return socket.gethostname(), f"{kind}:{threading.current_thread().name}@{os.getpid()}"


def played_by(records: list[dict], node: str | None, worker: str | None) -> list[dict]:
    """The records with where they were played (the `node` and `worker` columns) filled in."""
    for record in records:
        record.update(node=node, worker=worker)
    return records
