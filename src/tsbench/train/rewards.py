"""Rewards, as pure functions of plain data, and the TRL reward functions built from them.

* The paper's penalised reward (timerlm-anomalyxl §4.1): R_i = s_i - lambda_tok * s_i * kappa_i -
  lambda_fail * 1[forced final_i], kappa_i = T_i / max_j T_j over the G rollouts of one task, T the
  tokens the model generated (all turns, observations excluded). The token cost applies only when
  s_i > 0. To TRL it is three reward functions (score, token cost, forced final) whose
  `reward_weights` are (1, lambda_tok, lambda_fail), so each part is logged on its own.
* TimeMaster's composite reward (timemaster §3.3; pure parts in timemaster_reward.py, which reads a
  reply as the public code does unless `format_rule = "paper"`): a binary format reward, a binary hard
  reward (the class the reply names equals the gold class, as the family's `answer_class` / `gold_class`
  say) and a soft reward from an LLM judge (one float, counted only when the class is right), weighted
  (0.1, 0.9, 0), or (0.1, 0.9, 0.5) with a judge (the public code's weight).

A rollout that never generated (the jail crashed or did not start, a bug, or the policy's own failure before
its first reply: a prompt over max_seq_len) reaches TRL with score None (`rewarded_scores`): every reward
function returns None for it, and TRL leaves such a row out of its group's mean and std and gives it an
advantage of 0 (trl/trainer/grpo_trainer.py, `unscorable_mask`). A rollout that generated and then failed
keeps its score 0 and the forced-final penalty: its replies are what the penalty teaches against.
Nothing here calls a model: the judge is asked in rollouts.py (train/timemaster_judge.py).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tsbench.core.class_tags import first_span, with_extension_sentence
from tsbench.tasks.base import TaskFamily
from tsbench.train import timemaster_reward as tm

LAMBDA_TOK = 0.1
LAMBDA_FAIL = 0.25
ZERO_VARIANCE_TOL = 1e-12


# -- the paper's penalised reward ----------------------------------------------------------------
def token_costs(tokens: Sequence[int]) -> list[float]:
    """kappa_i = T_i / max_j T_j; all zeros when no rollout generated anything."""
    most = max(tokens, default=0)
    return [t / most if most > 0 else 0.0 for t in tokens]


@dataclass(frozen=True)
class Penalised:
    reward: float
    kappa: float
    token_penalty: float  # lambda_tok * s * kappa, 0 unless s > 0
    fail_penalty: float  # lambda_fail when the episode was forced to its final turn


def penalised_rewards(
    scores: Sequence[float],
    tokens: Sequence[int],
    forced_final: Sequence[bool],
    *,
    lambda_tok: float = LAMBDA_TOK,
    lambda_fail: float = LAMBDA_FAIL,
) -> list[Penalised]:
    """The penalised reward of every rollout in ONE group (the G rollouts of one task)."""
    if not len(scores) == len(tokens) == len(forced_final):
        raise ValueError("scores, tokens and forced_final must have one entry per rollout")
    out = []
    for s, kappa, forced in zip(scores, token_costs(tokens), forced_final):
        token_penalty = lambda_tok * s * kappa if s > 0 else 0.0
        fail_penalty = lambda_fail if forced else 0.0
        out.append(Penalised(s - token_penalty - fail_penalty, kappa, token_penalty, fail_penalty))
    return out


def groups_of(keys: Sequence[str]) -> list[list[int]]:
    """Row indices grouped by task key, in first-seen order (a group = the G rollouts of one task)."""
    found: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        found.setdefault(key, []).append(i)
    return list(found.values())


def zero_variance(rewards: Sequence[float | None], keys: Sequence[str]) -> list[bool]:
    """Per row: does its group carry no signal (every scored reward equal, or fewer than two scored)?
    Such groups are dropped by masking: their tokens leave the loss, but the batch keeps its size, so
    TRL's normaliser (B x max length for dr_grpo, the sequence count for grpo) still counts them and
    the kept groups' gradient shrinks by the dropped share. DAPO instead refills the batch with new
    groups (`refill_rounds`, rollouts.Environment); metrics.parquet records `dropped_groups` and
    `refilled_groups` per step so the share is visible."""
    out = [False] * len(rewards)
    for members in groups_of(keys):
        scored = [rewards[i] for i in members if rewards[i] is not None]
        flat = len(scored) < 2 or max(scored) - min(scored) <= ZERO_VARIANCE_TOL
        for i in members:
            out[i] = flat
    return out


def rewarded_scores(scores: Sequence[float | None], generated_tokens: Sequence[int]) -> list[float | None]:
    """The score column the reward functions read: None for every rollout that never generated (T_i = 0),
    whatever its recorded score. Such a rollout has no token to credit, so a reward for it (-lambda_fail for
    a prompt over max_seq_len) would only move its group's baseline and every other rollout's advantage."""
    if len(scores) != len(generated_tokens):
        raise ValueError("scores and generated_tokens must have one entry per rollout")
    return [None if t <= 0 else s for s, t in zip(scores, generated_tokens)]


# -- TimeMaster's composite reward (the pure parts live in timemaster_reward.py) ------------------
Tagged = tm.Tagged

FORMAT_INSTRUCTIONS = (
    "Structure your FINAL answer (the reply without code) in tagged parts, in this order: your "
    "step-by-step reasoning about the series inside <think></think>; your answer, in exactly the format the "
    "question asks for, inside <class></class>; then, optionally, a recommendation, suggestion or "
    "interpretation that follows from your reasoning and answer inside <extension></extension>."
)


def composite_settings(rewards: Any) -> tm.TimeMasterReward:
    """TimeMaster's reward settings of a RewardConfig (format rule, weights; the soft part when judged)."""
    return tm.TimeMasterReward(
        format_rule=rewards.format_rule,
        format_weight=rewards.format_weight,
        hard_weight=rewards.hard_weight,
        soft_weight=rewards.soft,
    )


def composite_question(taskset: TaskFamily, rewards: Any, question: str) -> str:
    """The question a rollout sees. Under the composite reward: a family whose questions already ask for the
    tags (`answer_tags`, TimerBed: the paper's prompt) keeps its question, plus the paper's extension sentence
    when the soft reward is scored; any other family gets FORMAT_INSTRUCTIONS appended."""
    if rewards.reward != "composite":
        return question
    if taskset.answer_tags:
        return with_extension_sentence(question) if rewards.soft > 0 else question
    return f"{question}\n\n{FORMAT_INSTRUCTIONS}"


def as_asked(taskset: TaskFamily, rewards: Any, task: Any) -> Any:
    """The task with its question as the reward asks it (`RewardScheme.question`): what every rollout sees."""
    question = rewards.scheme.question(taskset, rewards, task.question)
    return task if question == task.question else dataclasses.replace(task, question=question)


def read_reply(
    taskset: TaskFamily, category: str, gold: Any, message: str, settings: tm.TimeMasterReward
) -> tm.Reading:
    """What the composite reward reads in a reply: the family's `answer_class` names the classes."""
    return tm.read(message, lambda text: taskset.answer_class(category, gold, text), settings)


def scored_text(taskset: TaskFamily, message: str) -> str:
    """What the family's scorer reads in a composite run: the whole reply when the family's scorer reads the
    tags itself (`answer_tags`), else the first <class> span."""
    return message if taskset.answer_tags else first_span(message)


# -- TRL reward functions ------------------------------------------------------------------------
# TRL calls each with the prompts (our task keys), the decoded completions and every column the
# rollout function returned, one value per rollout; they return one reward (or None) per rollout.
RewardFn = Callable[..., list]


@dataclass(frozen=True)
class RewardScheme:
    """One reward of the table: its TRL reward functions and weights, the question a rollout sees under it, the
    part of the final message the task's scorer reads, and what its settings (a RewardConfig) must satisfy."""

    build: Callable[[Any, TaskFamily], tuple[list[RewardFn], list[float]]]
    question: Callable[[TaskFamily, Any, str], str] = lambda taskset, rewards, question: question
    scored_text: Callable[[TaskFamily, str], str] = lambda taskset, message: message
    problems: Callable[[Any], list[str]] = lambda rewards: []
    judged: bool = False  # a soft weight above 0 asks the judge (rollouts.Environment)


def penalised(rewards: Any, taskset: TaskFamily) -> tuple[list[RewardFn], list[float]]:
    """The paper's R = s - lambda_tok s kappa - lambda_fail 1[forced]: three functions, each logged."""
    return [task_score, token_cost, forced_final], [1.0, rewards.lambda_tok, rewards.lambda_fail]


def composite(rewards: Any, taskset: TaskFamily) -> tuple[list[RewardFn], list[float]]:
    """TimeMaster's w_fmt format + w_hard hard + w_soft soft (the judge's, counted with the right class)."""

    settings = composite_settings(rewards)

    def readings(final_message: list, category: list, gold: list, score: list) -> list:
        return [
            None if s is None else (read_reply(taskset, cat, json.loads(g), text, settings), cat, json.loads(g))
            for text, cat, g, s in zip(final_message, category, gold, score)
        ]

    def format_reward(final_message: list, category: list, gold: list, score: list, **_: Any) -> list:
        """1 when the reply is well formed under the format rule (timemaster_reward.read), else 0."""
        return [None if r is None else r[0].format for r in readings(final_message, category, gold, score)]

    def hard_reward(final_message: list, category: list, gold: list, score: list, **_: Any) -> list:
        return [
            None if r is None else tm.hard_reward(r[0], taskset.gold_class(r[1], r[2]))
            for r in readings(final_message, category, gold, score)
        ]

    def soft_reward(final_message: list, category: list, gold: list, score: list, judge_score: list, **_: Any) -> list:
        hard = hard_reward(final_message, category, gold, score)
        return [None if h is None else (j or 0.0) * h for h, j in zip(hard, judge_score)]

    return [format_reward, hard_reward, soft_reward], [rewards.format_weight, rewards.hard_weight, rewards.soft]


def _composite_checks(rewards: Any) -> list[str]:
    return (
        ["--reward composite with a soft weight needs --judge <provider/name>"]
        if rewards.soft > 0 and not rewards.judge
        else []
    )


def _penalised_checks(rewards: Any) -> list[str]:
    return ["--judge only scores the composite reward's soft part (add --reward composite)"] if rewards.judge else []


REWARDS: dict[str, RewardScheme] = {
    "anomalyxl": RewardScheme(penalised, problems=_penalised_checks),
    "composite": RewardScheme(
        composite, question=composite_question, scored_text=scored_text, problems=_composite_checks, judged=True
    ),
}


def reward_functions(rewards: Any, taskset: TaskFamily) -> tuple[list[RewardFn], list[float]]:
    """The reward functions for `rewards.reward` (a RewardConfig) and their weights, from the table."""
    return REWARDS[rewards.reward].build(rewards, taskset)


def task_score(score: list, **_: Any) -> list:
    """s_i: the family's score of the final message."""
    return list(score)


def token_cost(prompts: list, score: list, generated_tokens: list, **_: Any) -> list:
    """-s_i * kappa_i, kappa_i relative to the longest scored rollout of the same task; 0 unless s_i > 0."""
    out: list = [None] * len(score)
    for members in groups_of(prompts):
        scored = [i for i in members if score[i] is not None]
        for i, k in zip(scored, token_costs([generated_tokens[i] for i in scored])):
            out[i] = -score[i] * k if score[i] > 0 else 0.0
    return out


def forced_final(score: list, forced_final: list, **_: Any) -> list:
    """-1 when the episode was forced to its final turn (or ran out of context), else 0."""
    return [None if s is None else (-1.0 if forced else 0.0) for s, forced in zip(score, forced_final)]


def weighted_total(
    functions: Sequence[RewardFn], weights: Sequence[float], prompts: list, columns: dict[str, list]
) -> list[float | None]:
    """What TRL will sum: sum_k w_k * f_k per rollout (None where every function said None)."""
    parts = [fn(prompts=prompts, completions=None, **columns) for fn in functions]
    totals: list[float | None] = []
    for values in zip(*parts):
        scored = [(w, v) for w, v in zip(weights, values) if v is not None]
        totals.append(sum(w * v for w, v in scored) if scored else None)
    return totals
