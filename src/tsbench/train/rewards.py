"""Rollout rewards, as pure functions of plain data.

* The paper's penalised reward (timerlm-anomalyxl §4.1): R_i = s_i - lambda_tok * s_i * kappa_i -
  lambda_fail * 1[forced final_i], with kappa_i = T_i / max_j T_j over the G rollouts of one task and
  T the tokens the model generated (all turns, observations excluded). The token cost only bites
  when s_i > 0, which the product s_i * kappa_i already says.
* TimeMaster's composite reward (timemaster §3.3, Appendix G/H): a binary format reward for
  well-formed `<think>`, `<class>`, `<extension>` tags, a binary hard reward for the exact class,
  and a soft reward from an LLM judge (mean of specificity, appropriateness, relevance and depth,
  counted only when the class is right), weighted (0.1, 0.9, 0) or (0.1, 0.9, 1).

Nothing here calls a model: the judge's reply is parsed here, but asked for in rollouts.py.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

from tsbench.tasks.anomalyxl.answer_class import answer_class, gold_class

LAMBDA_TOK = 0.1
LAMBDA_FAIL = 0.25
COMPOSITE_WEIGHTS = (0.1, 0.9, 0.0)  # (format, hard, soft); TimeMaster's case studies use soft = 1
JUDGE_CRITERIA = ("specificity", "appropriateness", "relevance", "depth")


# -- the paper's penalised reward ----------------------------------------------------------------
@dataclass(frozen=True)
class Penalised:
    reward: float
    kappa: float  # group-normalised token cost in [0, 1]
    token_penalty: float  # lambda_tok * s * kappa (0 when s == 0)
    fail_penalty: float  # lambda_fail when the episode was forced to its final turn, else 0


def token_costs(tokens: Sequence[int]) -> list[float]:
    """kappa_i = T_i / max_j T_j; all zeros when no rollout generated anything."""
    most = max(tokens, default=0)
    return [t / most if most > 0 else 0.0 for t in tokens]


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


# -- TimeMaster's composite reward ---------------------------------------------------------------
_TAGGED = re.compile(
    r"\A\s*<think>(?P<think>.*?)</think>\s*<class>(?P<cls>.*?)</class>\s*"
    r"<extension>(?P<ext>.*?)</extension>\s*\Z",
    re.DOTALL,
)
_TAG = re.compile(r"</?(think|class|extension)>")

FORMAT_INSTRUCTIONS = (
    "Structure your FINAL answer (the reply without code) in exactly three tagged parts, in this order and "
    "nothing outside them: your step-by-step reasoning about the series inside <think></think>; your answer, "
    "in exactly the format the question asks for, inside <class></class>; then a recommendation, suggestion "
    "or interpretation that follows from your reasoning and answer inside <extension></extension>."
)


@dataclass(frozen=True)
class Tagged:
    think: str
    cls: str
    extension: str


def parse_tagged(text: str) -> Tagged | None:
    """The three spans when the message is exactly <think>..</think><class>..</class><extension>..</extension>
    (white space around them allowed), each tag once, with non-empty reasoning and class; else None."""
    match = _TAGGED.match(text or "")
    if match is None:
        return None
    if len(_TAG.findall(text)) != 6:  # a tag nested or repeated inside a span
        return None
    think, cls, ext = (match.group(k).strip() for k in ("think", "cls", "ext"))
    if not think or not cls:
        return None
    return Tagged(think, cls, ext)


def format_reward(text: str) -> float:
    return 1.0 if parse_tagged(text) is not None else 0.0


def hard_reward(category: str, gold: dict, class_text: str) -> float:
    predicted = answer_class(category, gold, class_text)
    return 1.0 if predicted is not None and predicted == gold_class(category, gold) else 0.0


def judge_prompt(tagged: Tagged) -> str:
    """What the soft-reward judge reads (TimeMaster H.3, in our words), asking for four scores."""
    return (
        "You grade the recommendation part of a time-series analysis. The analysis had three parts.\n\n"
        f"Reasoning:\n{tagged.think}\n\nPrediction:\n{tagged.cls}\n\nRecommendation:\n{tagged.extension}\n\n"
        "Rate the recommendation from 0.0 to 1.0 on each criterion:\n"
        "- specificity: tailored to this prediction and context rather than generic;\n"
        "- appropriateness: suitable given the prediction and the reasoning;\n"
        "- relevance: follows logically from the reasoning and the predicted class;\n"
        "- depth: shows domain knowledge, with concrete actions or next steps.\n"
        "Vague advice such as 'be careful' scores low unless justified; informative, actionable, "
        "context-aware advice scores high.\n"
        'Reply with one JSON object and nothing else: {"specificity": x, "appropriateness": x, '
        '"relevance": x, "depth": x}'
    )


def parse_judge_scores(reply: str) -> float | None:
    """Mean of the four criteria from the judge's JSON, or a lone number if that is all it gave;
    clipped to [0, 1]; None when nothing usable is there."""
    text = reply or ""
    for start in [m.start() for m in re.finditer(r"\{", text)]:
        end = text.find("}", start)
        if end < 0:
            break
        try:
            obj: Any = json.loads(text[start : end + 1])
        except ValueError:
            continue
        if isinstance(obj, dict) and all(k in obj for k in JUDGE_CRITERIA):
            values = [_unit(obj[k]) for k in JUDGE_CRITERIA]
            if all(v is not None for v in values):
                return sum(values) / len(values)  # type: ignore[arg-type]
    numbers = re.findall(r"-?\d+(?:\.\d+)?", text)
    if len(numbers) == 1:
        return _unit(float(numbers[0]))
    return None


def _unit(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return min(1.0, max(0.0, float(value)))


@dataclass(frozen=True)
class Composite:
    reward: float
    format: float
    hard: float
    soft: float


def composite_reward(
    fmt: float, hard: float, soft: float | None, weights: Sequence[float] = COMPOSITE_WEIGHTS
) -> Composite:
    """r = w_fmt * r_fmt + w_hard * r_hard + w_soft * r_soft, the soft part gated on a correct class."""
    w_fmt, w_hard, w_soft = weights
    soft_value = (soft or 0.0) if hard > 0 else 0.0
    return Composite(w_fmt * fmt + w_hard * hard + w_soft * soft_value, fmt, hard, soft_value)
