"""The judge behind coverage, faithfulness and quality: the paper's prompts (A.5.2), their reply
parsers, the offline `judge/rules`, and the run's cache of judge calls.

A judge is any callable `JudgeCall -> reply text`. A model judge (built by the eval layer from a
plain `prompt -> text` callable) reads only `call.prompt`; the offline rules judge answers the same
questions from `call.context` (the structured inputs the prompt was rendered from) by literal and
numeric matching, and its replies have the shape a model's would, so one parser serves both.
Every call is cached by the sha256 of the judge name and prompt (a judge that reads the context
hashes that too), so re-scoring a run costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tsbench.core.text import strip_reasoning

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


Judge = Callable[[JudgeCall], str]


class ModelJudge:
    """A judge that is a model: `complete(prompt) -> reply text`, injected by the eval layer."""

    reads_context = False

    def __init__(self, name: str, complete: Callable[[str], str]):
        self.name = name
        self._complete = complete

    def __call__(self, call: JudgeCall) -> str:
        return self._complete(call.prompt)


# ------------------------------------------------------------------------------ text matching --

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
        found = sum(mentions(report, item if not isinstance(item, dict) else next(iter(item.values()), ""))
                    for item in truth)
        return 1.0 if found == len(truth) else 0.5 if found else 0.0
    return 1.0 if mentions(report, truth) else 0.0


# ------------------------------------------------------------------------------- the rules judge --

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
    """`judge/rules`: offline and deterministic; literal and numeric matching only. Every table
    labels scores it produced, since it cannot read meaning the way a model judge does."""

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
        return json.dumps({"required_hits": hits, "required_partial": partial, "required_misses": misses,
                           "forbidden_violations": violations, "rationale": "rules judge: literal checks"})


_QUOTE = re.compile(r"(said|stated|according to)[^\"]{0,40}\"[^\"]{12,}\"|\"[^\"]{12,}\"[^\"]{0,20}(said|stated)",
                    re.IGNORECASE)


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
        if "timeseries.csv" in low or named or re.search(r"\b(prior|previous|last) (release|report|bulletin|note)", low):
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
                return json.loads(text[start:end + 1])
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
                if signal not in out and (signal.lower() == text or (text and (text in signal.lower() or signal.lower() in text))):
                    out.append(signal)
                    break
        return out

    hits = place(value.get("required_hits"), required)
    partial = [s for s in place(value.get("required_partial"), required) if s not in hits]
    misses = [s for s in required if s not in hits and s not in partial]
    return {"hits": hits, "partial": partial, "misses": misses,
            "violations": place(value.get("forbidden_violations"), forbidden)}


# ------------------------------------------------------------------------------------ cache --

class JudgeCache:
    """judge_cache.jsonl in a run directory: one line per distinct call, appended and flushed;
    None keeps the cache in memory only. Safe to share between threads."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else None
        self._replies: dict[str, str] = {}
        self._lock = threading.Lock()
        if self.path is not None and self.path.exists():
            for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    entry = json.loads(line)
                    self._replies[entry["key"]] = entry["reply"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue  # a torn last line from a killed run

    @staticmethod
    def key(judge: Any, call: JudgeCall) -> str:
        basis = f"{getattr(judge, 'name', 'judge')}\n{call.kind}\n{call.prompt}"
        if getattr(judge, "reads_context", False):
            basis += "\n" + json.dumps(call.context, sort_keys=True, default=str)
        return hashlib.sha256(basis.encode()).hexdigest()

    def get(self, key: str) -> str | None:
        with self._lock:
            return self._replies.get(key)

    def put(self, key: str, judge_name: str, kind: str, reply: str) -> None:
        with self._lock:
            if key in self._replies:
                return
            self._replies[key] = reply
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps({"key": key, "judge": judge_name, "kind": kind, "reply": reply}) + "\n")

    def __len__(self) -> int:
        return len(self._replies)


class Asker:
    """One row's access to the judge: every call through the cache, counted."""

    def __init__(self, judge: Judge, cache: JudgeCache | None = None):
        self.judge = judge
        self.cache = cache if cache is not None else JudgeCache()
        self.calls = 0
        self.hits = 0
        self.errors = 0

    @property
    def name(self) -> str:
        return getattr(self.judge, "name", "judge")

    def ask(self, call: JudgeCall) -> str | None:
        """The reply, or None when the judge failed (counted in `errors`; the axis goes unscored)."""
        self.calls += 1
        key = JudgeCache.key(self.judge, call)
        cached = self.cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        try:
            reply = self.judge(call)
        except Exception:  # a judge outage leaves the axis unscored, never a 0
            self.errors += 1
            return None
        self.cache.put(key, self.name, call.kind, reply)
        return reply
