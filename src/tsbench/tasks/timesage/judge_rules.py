"""`judge/rules`: the offline, deterministic judge (literal and numeric matching), for tests, the
demo and runs without a judge model. It answers the paper's judge prompts from the structured
context they were rendered from, in the shape a model's reply would have; every table labels the
scores it produced, since it cannot read meaning the way a model judge does.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tsbench.tasks.timesage.judge import RULES_JUDGE, JudgeCall

_DATE = re.compile(r"\b\d{4}-\d{2}(?:-\d{2})?\b")
_NUM = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?")


def dates_in(text: str) -> set[str]:
    return set(_DATE.findall(text))


def numbers_in(text: str) -> list[float]:
    """Numbers written in the text, dates left out ("2024-11" is a date, not 2024 and -11)."""
    cleaned = _DATE.sub(" ", text.replace("\u2212", "-"))
    found = []
    for token in _NUM.findall(cleaned):
        try:
            found.append(float(token.replace(",", "")))
        except ValueError:
            continue
    return found


def number_matches(x: float, y: float) -> bool:
    return abs(x - y) <= max(0.005, 0.005 * abs(y))


def phrase(value: Any) -> str:
    return str(value).strip().lower().replace("_", " ")


def mentions(text: str, value: Any) -> bool:
    """Whether the text states `value`: a number (to rounding), else the label or phrase, case-
    and underscore-insensitive, on word boundaries."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return any(number_matches(n, float(value)) for n in numbers_in(text))
    wanted = phrase(value)
    if not wanted:
        return False
    haystack = text.lower().replace("_", " ")
    return re.search(rf"(?<![\w]){re.escape(wanted)}(?![\w])", haystack) is not None


def literal_coverage(truth: Any, report: str) -> float | None:
    """1 / 0.5 / 0 for a truth the report can state literally; None for a truth with no literal
    form (booleans, dicts). Lists: all items 1, some 0.5, none 0."""
    if truth is None or isinstance(truth, (bool, dict)):
        return None
    if isinstance(truth, list):
        if not truth:
            return None
        found = sum(
            mentions(report, item if not isinstance(item, dict) else next(iter(item.values()), "")) for item in truth
        )
        return 1.0 if found == len(truth) else 0.5 if found else 0.0
    return 1.0 if mentions(report, truth) else 0.0


_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


def split_claims(report: str, limit: int = 10) -> list[str]:
    """Sentences and bullet lines with at least four words, headers and labels dropped."""
    claims = []
    for part in _SENTENCE.split(report):
        text = part.strip().lstrip("-*#>•0123456789. )").strip()
        if len(text.split()) < 4 or text.endswith(":"):
            continue
        claims.append(text)
        if len(claims) == limit:
            break
    return claims


class RulesJudge:
    """`judge/rules` (see the module docstring)."""

    name = RULES_JUDGE
    reads_context = True

    def __call__(self, call: JudgeCall) -> str:
        return getattr(self, f"_{call.kind}")(call.context)

    def _coverage(self, c: dict) -> str:
        covered = literal_coverage(c.get("truth"), c["report"])
        if covered is None and c.get("truth_text"):
            words = [w for w in re.findall(r"[a-z0-9_.%-]+", str(c["truth_text"]).lower()) if len(w) > 2]
            hits = sum(mentions(c["report"], w) for w in words)
            covered = 1.0 if words and hits == len(words) else 0.5 if hits else 0.0
        return {1.0: "YES", 0.5: "PARTIAL"}.get(covered or 0.0, "NO")

    def _claims(self, c: dict) -> str:
        return json.dumps(split_claims(c["report"]))

    def _verify(self, c: dict) -> str:
        claim = c["claim"]
        tier1, tier2 = "\n".join(c["tier1"]), "\n".join(c["tier2"])
        numbers = numbers_in(claim)
        claim_dates = dates_in(claim)
        labels = {phrase(v) for options in c.get("labels", {}).values() for v in options}
        said = {label for label in labels if mentions(claim, label)}
        truths = {phrase(v) for v in c.get("truth_labels", [])}

        def grounded(reference: str) -> bool:
            ref_numbers = numbers_in(reference)
            number_ok = all(any(number_matches(n, r) for r in ref_numbers) for n in numbers)
            dates_ok = claim_dates <= dates_in(reference)
            labels_ok = all(mentions(reference, label) for label in said)
            return number_ok and dates_ok and labels_ok

        if (numbers or claim_dates or said) and grounded(tier1):
            verdict = "tier1_supported"
        elif said - truths and not said & truths:
            verdict = "contradicts_keypoint"
        elif (numbers or claim_dates or said) and grounded(tier1 + "\n" + tier2):
            verdict = "tier2_supported"
        elif not numbers and not claim_dates and not said:
            verdict = "tier3_general_knowledge"
        else:
            verdict = "speculation"
        return json.dumps({"verdict": verdict})

    def _quality(self, c: dict) -> str:
        hits, partial, misses, violations = [], [], [], []
        for signal in c["required"]:
            outcome = check_signal(signal, c)
            (hits if outcome == 1.0 else partial if outcome == 0.5 else misses).append(signal["text"])
        for signal in c["forbidden"]:
            if check_signal(signal, c) == 1.0:
                violations.append(signal["text"])
        return json.dumps(
            {
                "required_hits": hits,
                "required_partial": partial,
                "required_misses": misses,
                "forbidden_violations": violations,
                "rationale": "rules judge: literal checks",
            }
        )


_QUOTE = re.compile(
    r"(said|stated|according to)[^\"]{0,40}\"[^\"]{12,}\"|\"[^\"]{12,}\"[^\"]{0,20}(said|stated)", re.IGNORECASE
)


def check_signal(signal: dict, c: dict) -> float:
    """1 hit, 0.5 partial, 0 miss for one rubric signal, by its `check` (keyword overlap without one)."""
    report, check = c["report"], signal.get("check") or {}
    kind = check.get("kind")
    low = report.lower()
    if kind == "period":
        return 1.0 if c["period"] in report else 0.0
    if kind == "any":
        return 1.0 if any(mentions(report, w) for w in check["words"]) else 0.0
    if kind == "number_unit":
        if re.search(rf"\d(?:[\d.,]*)\s*(?:{'|'.join(re.escape(u) for u in check['units'])})", report, re.IGNORECASE):
            return 1.0
        return 0.5 if numbers_in(report) else 0.0
    if kind == "number":
        return 1.0 if numbers_in(report) else 0.0
    if kind == "percent":
        return 1.0 if re.search(r"\d\s*%|\d\s*percent", report, re.IGNORECASE) else 0.0
    if kind == "cites":
        named = any(name.split("/")[-1].lower() in low for name in c.get("prior_docs", []))
        if (
            "timeseries.csv" in low
            or named
            or re.search(r"\b(prior|previous|last) (release|report|bulletin|note)", low)
        ):
            return 1.0
        return 0.5 if re.search(r"\b(csv|table|data)\b", low) else 0.0
    if kind == "current_doc":
        target = c.get("target_name", "")
        return 1.0 if target and (target.lower() in low or target.split("/")[-1].lower() in low) else 0.0
    if kind == "quotes":
        return 1.0 if _QUOTE.search(report) else 0.0
    words = [w for w in re.findall(r"[a-z]{4,}", signal["text"].lower())]
    if not words:
        return 0.0
    share = sum(w in low for w in words) / len(words)
    return 1.0 if share >= 0.6 else 0.5 if share >= 0.3 else 0.0
