"""The judge behind coverage, faithfulness and quality: the paper's prompts (A.5.2) and their
reply parsers. The offline judge is in judge_rules.py, the run's cache of calls in judge_cache.py.

A judge is any callable `JudgeCall -> reply text`. A model judge (built by the eval layer from a
plain `prompt -> text` callable) reads only `call.prompt`; the offline rules judge answers the same
questions from `call.context` (the structured inputs the prompt was rendered from) by literal and
numeric matching, and its replies have the shape a model's would, so one parser serves both.
Every call is cached by the sha256 of the judge name and prompt (a judge that reads the context
hashes that too), so re-scoring a run costs nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tsbench.core.text import strip_reasoning
from tsbench.tasks.base import JudgeReply

RULES_JUDGE = "judge/rules"
VERDICTS = ("tier1_supported", "tier2_supported", "tier3_general_knowledge", "contradicts_keypoint", "speculation")
SUPPORTED = VERDICTS[:2]  # tier 1 + tier 2; general knowledge counts neither way (axes.faithfulness_share)
GENERAL_KNOWLEDGE = VERDICTS[2]

# The paper's four judge prompts (A.5.2), same questions and reply formats, in tsbench's wording.
COVERAGE_PROMPT = """Does the report below convey one predefined analytical content unit (ACU)? Answer with exactly one word: YES, PARTIAL or NO.

Content unit
- description: {description}
- question to check: {verify}

Report:
{report}

Your whole reply must be one of YES, PARTIAL, NO."""

CLAIMS_PROMPT = """Break the report below into atomic claims that can be verified: no more than 10. A claim states ONE scalar fact (a single number, named entity, date, direction or classification); never merge several facts into one claim. Leave out markdown headings, bullet labels, rhetorical or hedging sentences and definitions. Write every claim so that it stands on its own and can be checked against a data source. Reply with a JSON list of strings only, without any other text.

Report:
{report}"""

VERIFY_PROMPT = """Check one atomic factual claim against the reference sources below.

Claim: {claim}

Reference sources:
{references}

Choose exactly one verdict: tier1_supported (a keypoint states it), tier2_supported (the context states it), tier3_general_knowledge (only for encyclopedic facts that no reference contradicts), contradicts_keypoint (it clearly conflicts with a keypoint), speculation (no reference supports it). Reply with JSON: {{"verdict": "<one of these>"}}"""

QUALITY_PROMPT = """Score only the WRITING of the report below: how well it fits its genre, how it is structured, how readable it is. Do NOT judge whether its facts are right; another scorer checks that.

Period of the issue: {period}
Genre for this tier: {genre}
Signals the report must show:
{required}
Signals the report must not show:
{forbidden}
An example of a good report:
{exemplar}

Report to score:
{report}

Reply with JSON: {{"required_hits": ["<signal>", ...], "required_partial": ["<signal>", ...], "required_misses": ["<signal>", ...], "forbidden_violations": ["<signal>", ...], "rationale": "<one sentence>"}}"""


@dataclass(frozen=True)
class JudgeCall:
    kind: str  # coverage | claims | verify | quality
    prompt: str
    context: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


Judge = Callable[[JudgeCall], "str | JudgeReply"]


class ModelJudge:
    """A judge that is a model: `complete(prompt) -> JudgeReply` (or plain text), injected by the eval layer."""

    reads_context = False

    def __init__(self, name: str, complete: Callable[[str], str | JudgeReply]):
        self.name = name
        self._complete = complete

    def __call__(self, call: JudgeCall) -> str | JudgeReply:
        return self._complete(call.prompt)


# ---------------------------------------------------------------------------------- parsing --


def parse_coverage(reply: str) -> float | None:
    found = re.search(r"\b(YES|PARTIAL|NO)\b", strip_reasoning(reply), re.IGNORECASE)
    return None if found is None else {"YES": 1.0, "PARTIAL": 0.5, "NO": 0.0}[found.group(1).upper()]


def _json_value(reply: str, opener: str, closer: str) -> Any:
    text = strip_reasoning(reply)
    start = text.find(opener)
    while start != -1:
        end = text.rfind(closer)
        while end > start:
            try:
                return json.loads(text[start : end + 1])
            except json.JSONDecodeError:
                end = text.rfind(closer, start, end)
        start = text.find(opener, start + 1)
    return None


def parse_claims(reply: str, limit: int = 10) -> list[str] | None:
    value = _json_value(reply, "[", "]")
    if not isinstance(value, list):
        return None
    return [str(item).strip() for item in value if str(item).strip()][:limit]


def parse_verdict(reply: str) -> str | None:
    value = _json_value(reply, "{", "}")
    if isinstance(value, dict) and value.get("verdict") in VERDICTS:
        return value["verdict"]
    found = re.search("|".join(VERDICTS), strip_reasoning(reply))
    return found.group(0) if found else None


def parse_quality(reply: str, required: list[str], forbidden: list[str]) -> dict | None:
    """The judge's lists mapped back onto the rubric's signals (exact, then case-insensitive
    containment); a signal the judge did not place counts as a miss. A `substance` share in [0, 1]
    (the rules judge's) is kept."""
    value = _json_value(reply, "{", "}")
    if not isinstance(value, dict):
        return None

    def place(names: Any, pool: list[str]) -> list[str]:
        out = []
        for name in names if isinstance(names, list) else []:
            text = str(name).strip().lower()
            for signal in pool:
                if signal not in out and (
                    signal.lower() == text or (text and (text in signal.lower() or signal.lower() in text))
                ):
                    out.append(signal)
                    break
        return out

    hits = place(value.get("required_hits"), required)
    partial = [s for s in place(value.get("required_partial"), required) if s not in hits]
    misses = [s for s in required if s not in hits and s not in partial]
    placed = {
        "hits": hits,
        "partial": partial,
        "misses": misses,
        "violations": place(value.get("forbidden_violations"), forbidden),
    }
    substance = value.get("substance")  # judge/rules' share of keypoints stated right (axes: its judges only)
    if isinstance(substance, (int, float)) and not isinstance(substance, bool) and 0.0 <= substance <= 1.0:
        placed["substance"] = float(substance)
    return placed
