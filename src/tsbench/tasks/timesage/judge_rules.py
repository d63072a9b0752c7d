"""`judge/rules`: the offline, deterministic judge, for tests, the demo and runs without a judge
model. It stands in for a careful human reader (spec "The offline judge"): it answers the paper's
judge prompts (A.5.2) from the structured context they were rendered from, in the shape a model's
reply would have, reading the report for meaning (reading.py, statements.py):
- coverage: the keypoint's value stated about its subject, named by any of its names; a list of
  options or numbers about one subject is a hedge and states nothing; the axis is corrected for
  guessing (a label stated wrong costs 1 / (options - 1) of a keypoint, as substance does);
- claims: one value about one subject each, this period's first, at most 10;
- verify: a claim about a keypoint for now is supported when it is the keypoint's value and
  contradicts it otherwise; restated context (a table cell, the last release) counts neither way,
  and a stale or invented figure is speculation;
- quality: each rubric signal's `check` on the report's prose (listing and hedging clauses removed),
  credited in proportion to the report's substance (`substance` in the reply: the share of keypoints
  stated correctly, corrected for guessing), so writing that states nothing of the period earns 0.
A short report is read as making as many claims as the period has keypoints (axes.py, any judge): the
ones it does not make are unverified, as a report with no verifiable claim scores 0.
Every table labels the scores it produced, since it reads meaning by rules, not as a model does.
"""

from __future__ import annotations

import json
import re

from tsbench.tasks.timesage.clauses import clauses, dates_in, is_listing, mentions, numbers_in
from tsbench.tasks.timesage.judge import RULES_JUDGE, JudgeCall
from tsbench.tasks.timesage.reading import Reading, read, sentences
from tsbench.tasks.timesage.statements import claim_list, keypoint_coverage, substance, verdict

__all__ = ["RulesJudge", "check_signal", "word_coverage"]


def word_coverage(truth_text: str, text: str) -> float:
    """1 / 0.5 / 0: all, some or none of a truth text's content words are in the text (judged
    answer fields such as a stated cause, where the answer is itself about the subject)."""
    words = [w for w in re.findall(r"[a-z0-9_.%-]+", truth_text.lower()) if len(w) > 2]
    hits = sum(mentions(text, w) for w in words)
    return 1.0 if words and hits == len(words) else 0.5 if hits else 0.0


class RulesJudge:
    """`judge/rules` (see the module docstring)."""

    name = RULES_JUDGE
    reads_context = True
    substance_gate = True  # quality is credited by the `substance` its replies carry (axes.py)
    grounds_judgements = True  # a judgement counts only beside a reading of the period stated right (statements.py)

    def reading(self, c: dict) -> Reading:
        return read(c["report"], c["lexicon"])

    def __call__(self, call: JudgeCall) -> str:
        return getattr(self, f"_{call.kind}")(call.context)

    def _coverage(self, c: dict) -> str:
        if c.get("keypoint") is None:  # a judged answer field: the answer text is about the subject
            sprayed = is_listing(c["report"], c.get("enums", []))  # "a rose, b fell, c ..." names no one cause
            covered = 0.0 if sprayed else word_coverage(str(c.get("truth_text") or c.get("truth")), c["report"])
        else:
            covered, _ = keypoint_coverage(self.reading(c), c["lexicon"], c["keypoint"])
        return json.dumps({"verdict": {1.0: "YES", 0.5: "PARTIAL"}.get(covered or 0.0, "NO")})

    def _claims(self, c: dict) -> str:
        return json.dumps({"claims": [text for text, _ in claim_list(self.reading(c), c["lexicon"])]})

    def _verify(self, c: dict) -> str:
        reading = self.reading(c)
        found = dict(claim_list(reading, c["lexicon"])).get(c["claim"])
        outcome = "speculation" if found is None else verdict(reading, c["lexicon"], found)
        return json.dumps({"verdict": outcome})

    def _quality(self, c: dict) -> str:
        reading = self.reading(c)
        dropped = set(reading.listing) | {claim.clause for claim in reading.claims if claim.subject in reading.hedged}
        prose = "\n".join(
            text for i, text in enumerate(sentences(c["report"], c["lexicon"].get("unit", ""))) if i not in dropped
        )
        hits, partial, misses, violations = [], [], [], []
        readable = {**c, "report": prose}
        for signal in c["required"]:
            outcome = check_signal(signal, readable)
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
                "substance": round(substance(reading, c["lexicon"]), 6),
                "rationale": "rules judge: rubric checks, credited by the share of keypoints stated correctly",
            }
        )


_DIRECTION = re.compile(
    r"\b(?:up|down|flat|higher|lower|rise|rises|rising|fall|falls|falling|increase|decrease|upward|downward|"
    r"stable|steady|improv\w*|deteriorat\w*|eas\w*|tighten\w*|strengthen\w*|weaken\w*)\b",
    re.IGNORECASE,
)
_FILE = re.compile(r"timeseries\.csv|gt_source/", re.IGNORECASE)
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
        words = "|".join(re.escape(str(w).strip().lower().replace("_", " ")) for w in check["words"] if str(w).strip())
        pattern = re.compile(rf"(?<![\w])(?:{words})(?![\w])") if words else None
        said = [part for part in clauses(report) if pattern and pattern.search(part.lower().replace("_", " "))]
        if not said:
            return 0.0
        if "evidence" in signal["text"].lower():  # "... with evidence": a figure, date or file beside it
            backed = any(numbers_in(part) or dates_in(part) or _FILE.search(part) for part in said)
            return 1.0 if backed else 0.5
        return 1.0
    if kind == "number_unit":
        if re.search(rf"\d(?:[\d.,]*)\s*(?:{'|'.join(re.escape(u) for u in check['units'])})", report, re.IGNORECASE):
            return 1.0
        return 0.5 if numbers_in(report) else 0.0
    if kind == "number":
        return 1.0 if numbers_in(report) else 0.0
    if kind == "percent":
        with_percent = [part for part in clauses(report) if re.search(r"\d\s*%|\d\s*percent", part, re.IGNORECASE)]
        if not with_percent:
            return 0.0
        if "outlook" in signal["text"].lower():  # an outlook is a direction; a bare "60 % confidence" is half of it
            return 1.0 if any(_DIRECTION.search(part) for part in with_percent) else 0.5
        return 1.0
    if kind == "cites":
        named = any(name.split("/")[-1].lower() in low for name in c.get("prior_docs", []))
        prior = re.search(r"\b(prior|previous|last) (release|report|bulletin|note)", low)
        if "timeseries.csv" in low or named or prior:
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
