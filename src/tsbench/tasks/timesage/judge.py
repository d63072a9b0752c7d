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
SUPPORTED = VERDICTS[:3]

COVERAGE_PROMPT = """You are checking whether a report communicates a predefined content unit (ACU). Reply with exactly one of: YES, PARTIAL, NO.

Content unit:
description: {description}
verification question: {verify}

Report:
{report}

Reply with the single word YES, PARTIAL, or NO and nothing else."""

CLAIMS_PROMPT = """Decompose this report into AT MOST 10 atomic, verifiable claims. Each claim must be ONE scalar fact: one number, one named entity, one date, one direction, one classification -- never a compound sentence with multiple facts. Skip markdown headers, bullet labels, rhetorical sentences, hedges, and definitional preambles. Each claim should be standalone and grounded enough to verify against a data source. Return a JSON list of strings, no prose around it.

Report:
{report}"""

VERIFY_PROMPT = """Verify a single atomic factual claim against reference sources.

Claim: {claim}

Reference sources:
{references}

Pick exactly one verdict from this set: tier1_supported (keypoint says so), tier2_supported (context says so), tier3_general_knowledge (only if the claim is encyclopedic and not contradicting any reference), contradicts_keypoint (clearly conflicts with a keypoint), speculation (unsupported by any reference). Return JSON: {{"verdict": "<one>"}}"""

QUALITY_PROMPT = """You are scoring a report's WRITING quality only -- its genre conformance, structure, and readability. DO NOT score for factual correctness; that is evaluated separately by a different scorer.

Issue period: {period}
Tier genre: {genre}
Required signals:
{required}
Forbidden signals:
{forbidden}
Exemplar of a good report:
{exemplar}

Report to score:
{report}

Return JSON: {{"required_hits": ["<signal>", ...], "required_partial": ["<signal>", ...], "required_misses": ["<signal>", ...], "forbidden_violations": ["<signal>", ...], "rationale": "<one sentence>"}}"""


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


def parse_quality(reply: str, required: list[str], forbidden: list[str]) -> dict[str, list[str]] | None:
    """The judge's lists mapped back onto the rubric's signals (exact, then case-insensitive
    containment); a signal the judge did not place counts as a miss."""
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
    return {
        "hits": hits,
        "partial": partial,
        "misses": misses,
        "violations": place(value.get("forbidden_violations"), forbidden),
    }
