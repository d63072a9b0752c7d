"""TimeMaster's reward (timemaster §3.3, eq. 3-5, H.3) as pure functions of text, with the choices of
its public code (langfengQ/TimeMaster, verl/utils/reward_score) as settings whose defaults are the
paper's:

* format: <think>, <class> and an optional <extension>, each once, in that order, none inside another,
  with non-empty reasoning and class (the main results have no extension; the paper's Figure 2 output
  `<think>..</think><class>Desktop</class>` is well formed). 1 or 0.
* hard: the class in <class> equals the gold class, compared case-insensitively (the public code
  lower-cases both sides). 1 or 0.
* soft: an LLM judge reads reasoning, prediction and extension and returns ONE float in [0, 1], the mean
  of specificity, appropriateness, relevance and depth (H.3); asked at temperature 1.0; capped at 0.4
  when the extension is generic advice; counted only with the right class and a non-empty extension.
* total: w_fmt * format + w_hard * hard + w_soft * soft, (0.1, 0.9, 0) in the main results; with a judge
  the public code's soft weight is 0.5 (the paper's case studies use 1.0).

Nothing here calls a model: train/timemaster_judge.py asks the judge with `judge_prompt` and reads the
reply with `parse_judge_reply`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

TAGS = ("think", "class", "extension")
_TAG = re.compile(r"<(/?)(think|class|extension)\s*>", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE]-?\d+)?")
JUDGE_CRITERIA = ("specificity", "appropriateness", "relevance", "depth")
# Advice the public code treats as generic (its soft score is capped): further tests, history, examination,
# referral, confirming the diagnosis.
GENERIC_ADVICE = (
    r"further (diagnostic )?tests",
    r"clinical history",
    r"physical examination",
    r"refer to (a )?specialist",
    r"confirm the diagnosis",
)
EXTENSION_INSTRUCTION = (
    "Finally, provide an additional recommendation, suggestion, or interpretation based on your reasoning and "
    "prediction. This part MUST be enclosed within <extension> </extension> tags."
)


@dataclass(frozen=True)
class TimeMasterReward:
    """The reward's settings; defaults are the paper's (and, where it is silent, its public code's)."""

    format_weight: float = 0.1
    hard_weight: float = 0.9
    soft_weight: float = 0.5  # applies only when a judge scores the extension
    require_extension: bool = False  # True: the three-part format of the soft-reward runs is required
    case_sensitive: bool = False
    judge_temperature: float = 1.0
    judge_max_tokens: int = 32
    judge_attempts: int = 3  # replies that hold no usable float are asked again, then score 0
    generic_cap: float = 0.4
    generic_advice: tuple[str, ...] = GENERIC_ADVICE


DEFAULT = TimeMasterReward()


@dataclass(frozen=True)
class Tagged:
    think: str
    cls: str
    extension: str  # "" when the output has none


def parse_output(text: str | None, *, require_extension: bool = False) -> Tagged | None:
    """The spans of a well-formed output (see the module doc), None when the format is broken. Text
    around the tags is allowed; tag names are matched case-insensitively."""
    found = [(m.group(1) == "/", m.group(2).lower(), m.start(), m.end()) for m in _TAG.finditer(text or "")]
    names = [(closing, name) for closing, name, _, _ in found]
    three = [(closing, name) for name in TAGS for closing in (False, True)]
    if names != three and (require_extension or names != three[:4]):
        return None
    spans = [text[found[k][3] : found[k + 1][2]].strip() for k in range(0, len(found), 2)]  # type: ignore[index]
    if not spans[0] or not spans[1]:
        return None
    return Tagged(spans[0], spans[1], spans[2] if len(spans) > 2 else "")


def format_reward(text: str | None, settings: TimeMasterReward = DEFAULT) -> float:
    return float(parse_output(text, require_extension=settings.require_extension) is not None)


def class_text(text: str | None) -> str | None:
    """What the output puts inside its last <class>...</class>, or None (a well-formed output has one)."""
    found = re.findall(r"<class>(.*?)</class>", text or "", re.IGNORECASE | re.DOTALL)
    return found[-1].strip() if found else None


def same_class(predicted: str | None, gold: str, *, case_sensitive: bool = False) -> bool:
    if predicted is None:
        return False
    a, b = predicted.strip(), gold.strip()
    return a == b if case_sensitive else a.lower() == b.lower()


def hard_reward(predicted: str | None, gold: str, settings: TimeMasterReward = DEFAULT) -> float:
    """Eq. 3: 1 when the predicted class is the gold class."""
    return float(same_class(predicted, gold, case_sensitive=settings.case_sensitive))


def judge_prompt(tagged: Tagged) -> str:
    """The soft reward's judge prompt (TimeMaster H.3): four criteria, ONE float back."""
    return (
        "You are an expert assistant evaluating a model-generated reasoning, classification, and recommendation "
        "output. The goal is to assess the quality of the recommendation (i.e., extension) based on the "
        "following structured output:\n\n"
        f"Reasoning: {tagged.think}\nPrediction: {tagged.cls}\nExtension: {tagged.extension}\n\n"
        "Score the extension on each of the following four criteria from 0.0 to 1.0, then return only the "
        "average score as a single float (e.g., 0.625).\n"
        "Evaluation criteria:\n"
        "1. Specificity - Is the extension clearly tailored to the predicted class or context, avoiding generic "
        "language?\n"
        "2. Appropriateness - Is the recommendation suitable given the prediction and reasoning?\n"
        "3. Relevance - Does the extension logically follow from the preceding reasoning and predicted class?\n"
        "4. Depth - Does the extension demonstrate domain knowledge, including detailed actions or next-step "
        "considerations?\n"
        "Instructions:\n"
        '- Penalize vague or generic outputs (e.g., "be careful") unless well-justified.\n'
        "- Reward informative, actionable, and context-aware suggestions.\n"
        "- Return only a single float between 0.0 and 1.0."
    )


def parse_judge_reply(reply: str | None) -> float | None:
    """The judge's float: the reply's only number, in [0, 1] (else None: ask again). A JSON object with
    the four criteria is read as their mean, so a judge that answers in parts still counts."""
    text = (reply or "").strip()
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            obj = json.loads(text[start : end + 1])
        except ValueError:
            obj = None
        if isinstance(obj, dict) and all(_unit(obj.get(k)) is not None for k in JUDGE_CRITERIA):
            return sum(_unit(obj[k]) for k in JUDGE_CRITERIA) / len(JUDGE_CRITERIA)  # type: ignore[misc]
    numbers = _NUMBER.findall(text)
    if len(numbers) != 1:
        return None
    return _unit(float(numbers[0]))


def _unit(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value) if 0.0 <= value <= 1.0 else None


def cap_generic(extension: str, score: float, settings: TimeMasterReward = DEFAULT) -> float:
    """The public code's penalty: generic advice scores at most `generic_cap`."""
    lowered = extension.lower()
    if any(re.search(pattern, lowered) for pattern in settings.generic_advice):
        return min(score, settings.generic_cap)
    return score


def wants_judge(tagged: Tagged | None, hard: float) -> bool:
    """The soft reward is asked for only with the right class and a non-empty extension."""
    return tagged is not None and hard > 0 and bool(tagged.extension)


def composite(fmt: float, hard: float, soft: float | None, settings: TimeMasterReward = DEFAULT) -> float:
    """Eq. 5, the soft part counted only with the right class (eq. 4)."""
    gated = (soft or 0.0) if hard > 0 else 0.0
    return settings.format_weight * fmt + settings.hard_weight * hard + settings.soft_weight * gated


def reward(text: str, gold: str, soft: float | None = None, settings: TimeMasterReward = DEFAULT) -> dict[str, float]:
    """Every part of one output's reward: format, hard, soft (as given, gated) and the total."""
    fmt = format_reward(text, settings)
    hard = hard_reward(class_text(text), gold, settings)
    gated = (soft or 0.0) if hard > 0 else 0.0
    return {"format": fmt, "hard": hard, "soft": gated, "total": composite(fmt, hard, soft, settings)}
