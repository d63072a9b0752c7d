"""Rollouts: G episodes per task through the real harness, driven by the live policy, then scored.

Each episode gets its own `PolicyChatModel` (policy.py) over a shared `BatchingEngine`, so its
turns' token ids are kept exactly as generated; `assemble_sequence` lays them end to end and marks
which ids the model generated (mask 1) and which it was shown (prompt, template glue, sandbox
observations: mask 0).

Failures: running out of context (the prompt leaves no room under max_seq_len) or hitting an
episode cap is the policy's doing: the rollout keeps its tokens, scores 0 and counts as a forced
final. A sandbox crash or an internal error is not: the rollout is marked `infra_failure` and its
whole group is left out of the update.
"""

from __future__ import annotations

import json
import re
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from tsbench.tasks.anomalyxl.rowplan import RowPlan, materialize
from tsbench.tasks.anomalyxl.seeds import derive_seed
from tsbench.harness import EpisodeError, EpisodeResult, EpisodeTask, HarnessConfig
from tsbench.harness.runtime.sandbox import SandboxError
from tsbench.models.base import ChatModel, Message, ModelError
from tsbench.tasks.anomalyxl.scoring import metrics as score_metrics
from tsbench.train import rewards as rw
from tsbench.train.policy import BatchingEngine, ChatTokens, PolicyChatModel

_CLASS_SPAN = re.compile(r"<class>(.*?)</class>", re.DOTALL)


def assemble_sequence(turns: Sequence[tuple[Sequence[int], Sequence[int]]]) -> tuple[list[int], list[int]]:
    """One episode's ids and loss mask from its turns (prompt ids, output ids), in order.

    Turn k's prompt must begin with every id of the turns before it (prompt + output), which is how
    PolicyChatModel builds it; the ids it adds (template glue, observation, generation prompt) get
    mask 0, the model's outputs mask 1.
    """
    ids: list[int] = []
    mask: list[int] = []
    for number, (prompt, output) in enumerate(turns, 1):
        prompt, output = list(prompt), list(output)
        if prompt[: len(ids)] != ids:
            raise ValueError(f"turn {number}'s prompt does not extend the ids of the turns before it")
        shown = prompt[len(ids):]
        ids += shown + output
        mask += [0] * len(shown) + [1] * len(output)
    return ids, mask


@dataclass
class Rollout:
    plan: RowPlan
    index: int  # position in its group
    final_message: str = ""
    turns: int = 0
    code_cells: int = 0
    forced_final: bool = False
    input_tokens: int = 0
    output_tokens: int = 0  # T_i: tokens the model generated, all turns
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    latency_s: float = 0.0
    error_type: str | None = None
    error: str | None = None
    infra_failure: bool = False
    # scoring
    score: float = 0.0  # s_i: the task's scorer on the final message (on the <class> span for composite)
    valid: bool = False
    parsed: Any = None
    metrics: dict[str, Any] = field(default_factory=dict)
    composite: rw.Composite | None = None
    # filled by the trainer
    reward: float = 0.0
    advantage: float = 0.0
    kappa: float = 0.0
    token_penalty: float = 0.0
    fail_penalty: float = 0.0
    dropped: bool = False


@dataclass
class RolloutSettings:
    harness: Callable[[ChatModel, EpisodeTask, HarnessConfig], EpisodeResult]
    harness_config: HarnessConfig
    model_name: str = "policy"
    max_new_tokens: int = 4096
    max_seq_len: int = 65536
    temperature: float = 1.0
    workers: int = 8
    seed: int = 0
    reward: str = "anomalyxl"  # or "composite"
    composite_weights: tuple[float, float, float] = rw.COMPOSITE_WEIGHTS
    judge: ChatModel | None = None


def episode_task(plan: RowPlan, values: np.ndarray, *, composite: bool) -> EpisodeTask:
    question = plan.question + (f"\n\n{rw.FORMAT_INSTRUCTIONS}" if composite else "")
    return EpisodeTask(plan.id, plan.category, plan.regime, question, list(plan.channel_names), values, list(plan.options))


def collect_rollouts(
    plans: Sequence[RowPlan],
    group_size: int,
    engine: BatchingEngine,
    chat: ChatTokens,
    settings: RolloutSettings,
    *,
    step: int,
    on_episode: Callable[[Rollout], None] | None = None,
) -> list[list[Rollout]]:
    """G scored rollouts for every task, grouped by task in the order of `plans`."""
    composite = settings.reward == "composite"
    tasks = [episode_task(p, materialize(p.plan), composite=composite) for p in plans]
    jobs = [(t, g) for t in range(len(plans)) for g in range(group_size)]

    def run(job: tuple[int, int]) -> Rollout:
        t, g = job
        rollout = run_episode(plans[t], tasks[t], g, engine, chat, settings, step=step)
        score_rollout(rollout, settings)
        if on_episode is not None:
            on_episode(rollout)
        return rollout

    with ThreadPoolExecutor(max_workers=max(1, settings.workers), thread_name_prefix="rollout") as pool:
        done = list(pool.map(run, jobs))
    return [done[t * group_size:(t + 1) * group_size] for t in range(len(plans))]


def run_episode(plan: RowPlan, task: EpisodeTask, index: int, engine: BatchingEngine, chat: ChatTokens,
                settings: RolloutSettings, *, step: int) -> Rollout:
    """One episode; never raises for model, sandbox or episode failures (see the module notes)."""
    session = PolicyChatModel(
        engine, chat, name=settings.model_name, max_new_tokens=settings.max_new_tokens,
        max_seq_len=settings.max_seq_len, temperature=settings.temperature,
        seed=derive_seed(settings.seed, "rollout", step, plan.id, index) % 2**31,
    )
    rollout = Rollout(plan, index)
    started = time.perf_counter()
    result: EpisodeResult | None = None
    with engine.episode():
        try:
            result = settings.harness(session, task, settings.harness_config)
        except ModelError as exc:
            rollout.error_type, rollout.error = exc.kind, str(exc)[:2000]
            rollout.infra_failure = exc.kind != "bad_request"  # bad_request: the context is full
        except EpisodeError as exc:
            result = exc.result
            rollout.error_type, rollout.error = exc.kind, str(exc)[:2000]
        except SandboxError as exc:
            rollout.error_type, rollout.error, rollout.infra_failure = "sandbox", str(exc)[:2000], True
        except Exception as exc:  # a bug must not kill a long run: the group is dropped, the error kept
            rollout.error_type, rollout.infra_failure = "internal", True
            rollout.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}"
    rollout.latency_s = time.perf_counter() - started
    rollout.ids, rollout.mask = assemble_sequence(session.turns)
    rollout.turns = len(session.turns)
    rollout.output_tokens = sum(len(out) for _, out in session.turns)
    rollout.input_tokens = sum(len(prompt) for prompt, _ in session.turns)
    if result is not None:
        rollout.final_message = result.final_message
        rollout.code_cells = result.code_cells
        rollout.forced_final = result.forced_final
        rollout.transcript = result.transcript
    if rollout.error_type is not None and not rollout.infra_failure:
        rollout.final_message = ""
        rollout.forced_final = True  # the budget ran out before an answer: penalised like a forced final
    return rollout


def score_rollout(rollout: Rollout, settings: RolloutSettings) -> None:
    """s_i from the task's scorer; for `composite`, also TimeMaster's format / hard / soft parts."""
    plan = rollout.plan
    if rollout.infra_failure:
        return
    if settings.reward != "composite":
        scored = score_metrics(plan.category, plan.gold, rollout.final_message)
        rollout.score, rollout.valid, rollout.parsed = float(scored["score"]), bool(scored["valid"]), scored["parsed"]
        rollout.metrics = {k: v for k, v in scored.items() if k not in ("score", "parsed")}
        return
    tagged = rw.parse_tagged(rollout.final_message)
    spans = _CLASS_SPAN.findall(rollout.final_message)
    class_text = tagged.cls if tagged else (spans[-1].strip() if spans else "")
    scored = score_metrics(plan.category, plan.gold, class_text)
    rollout.score, rollout.valid, rollout.parsed = float(scored["score"]), bool(scored["valid"]), scored["parsed"]
    fmt = 1.0 if tagged else 0.0
    hard = rw.hard_reward(plan.category, plan.gold, class_text)
    soft = None
    if hard > 0 and tagged is not None and settings.composite_weights[2] > 0 and settings.judge is not None:
        soft = ask_judge(settings.judge, tagged)
    rollout.composite = rw.composite_reward(fmt, hard, soft, settings.composite_weights)
    rollout.metrics = {"format": fmt, "hard": hard, "soft": rollout.composite.soft, "composite": rollout.composite.reward}


def ask_judge(judge: ChatModel, tagged: rw.Tagged) -> float:
    """The soft reward from the LLM judge; 0 when it cannot be reached or its reply has no scores."""
    try:
        reply = judge.generate([Message("user", rw.judge_prompt(tagged))], max_tokens=200, temperature=0.0)
    except Exception:  # a judge outage must not stop training; the rollout simply earns no soft reward
        return 0.0
    value = rw.parse_judge_scores(reply.text)
    return 0.0 if value is None else value


def rollout_record(rollout: Rollout, *, step: int, model: str, harness: str) -> dict[str, Any]:
    """The rollout as one row of the results schema (tsbench.results); `epoch` is its index in the group."""
    from tsbench.core.episode import EpisodeOutcome, EpisodeResult
    from tsbench.results.records import apply_outcome, apply_score, finish, new_record

    plan = rollout.plan
    record = new_record(
        sample_id=plan.id, epoch=rollout.index, family="anomalyxl",
        columns={"split": plan.split, "regime": plan.regime, "category": plan.category, "length": plan.length,
                 "n_channels": len(plan.channel_names), "attributes": {"step": step}},
        model=model, harness=harness, depth=0, gold=plan.gold,
    )
    result = EpisodeResult(final_message=rollout.final_message, turns=rollout.turns, code_cells=rollout.code_cells,
                           forced_final=rollout.forced_final, input_tokens=rollout.input_tokens,
                           output_tokens=rollout.output_tokens, transcript=rollout.transcript)
    failed = rollout.infra_failure
    apply_outcome(record, EpisodeOutcome(result, rollout.error_type if failed else None, rollout.error if failed else None))
    if not failed:
        extra = {"step": step, "reward": rollout.reward, "advantage": rollout.advantage, "kappa": rollout.kappa,
                 "token_penalty": rollout.token_penalty, "fail_penalty": rollout.fail_penalty,
                 "dropped": float(rollout.dropped), **rollout.metrics}
        numbers = {k: v for k, v in extra.items() if isinstance(v, (int, float)) and not isinstance(v, bool) or isinstance(v, bool)}
        apply_score(record, score=rollout.score, valid=rollout.valid, parsed=rollout.parsed,
                    answer_error=rollout.metrics.get("error") if isinstance(rollout.metrics.get("error"), str) else None,
                    metrics={k: float(v) for k, v in numbers.items() if v is not None})
        if rollout.error_type is not None:  # a cap the policy hit: scored (0) and noted
            record["error"] = rollout.error
    return finish(record, rollout.latency_s)
