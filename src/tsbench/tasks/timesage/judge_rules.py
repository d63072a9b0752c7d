"""`judge/rules`: the offline, deterministic judge, for tests, the demo and runs without a judge
model. It answers the paper's judge prompts (A.5.2) from the structured context they were rendered
from, in the shape a model's reply would have, following the same protocol steps:
- coverage: the keypoint's value stated about its subject (clauses.bound_coverage); a bare list of
  labels or numbers earns nothing;
- claims: at most 10 clause-level claims of the (cut) report (sentences and `;` parts of four or more
  words; a model judge splits finer, into single facts);
- verify: a claim naming a keypoint's subject and asserting a value for this period is checked
  against that keypoint first (tier 1 when it conveys it, contradicts_keypoint when it conveys none:
  a stale or wrong value is not "encyclopedic"); a claim with no number, date or label (or only the
  period the prompt names), or one that only lists its source files, is general knowledge (it
  counts neither way); a claim that sprays values, or states another value than a
  keypoint's about that keypoint's subject, is not supported; otherwise it is supported when its
  numbers, dates and labels are all in the keypoints' truths (tier 1) or in those and the cutoff-valid
  context (tier 2), where a figure from an earlier release or row supports only a claim that says it
  is about that earlier period (stale figures stated as current are speculation);
- quality: each rubric signal's `check`, run on the report's prose (listing clauses removed); an
  "outlook with its confidence" needs a direction beside the percentage (a bare "60 % confidence"
  is a partial hit: the hard rubric's outlook is a direction with its probability).
Every table labels the scores it produced, since it cannot read meaning the way a model judge does.
"""

from __future__ import annotations

import json
import re

from tsbench.tasks.timesage.clauses import (
    bound_coverage,
    clauses,
    dates_in,
    is_listing,
    mentions,
    names_subject,
    number_matches,
    numbers_in,
    phrase,
    prose,
)
from tsbench.tasks.timesage.judge import RULES_JUDGE, JudgeCall

__all__ = ["RulesJudge", "check_signal", "dates_in", "mentions", "numbers_in", "split_claims", "word_coverage"]

# Words that place a claim in an earlier period ("in the previous week", "a year earlier", "the prior
# release said"); "since the previous release" describes a change to now and places nothing earlier.
_EARLIER = re.compile(
    r"\b(?:in|during|for|at|of) the (?:previous|prior|last|preceding) (?:week|month|release|period|quarter|year|"
    r"report|bulletin|day)\b|\b(?:a|one|\d+) (?:year|month|week|day|period|quarter)s? (?:earlier|ago|before)\b|"
    r"\b(?:previous|prior|last) (?:release|report|bulletin|note)\b[^.;]{0,40}\b(?:said|stated|reported|named|gave)\b",
    re.IGNORECASE,
)
_LINE_DATE = re.compile(r"(?:date=|gt_source/)(\d{4}-\d{2}(?:-\d{2})?)")


def about_earlier(claim: str, period: str) -> bool:
    """The claim places itself before the target period (an earlier date or words that say so)."""
    return bool(_EARLIER.search(claim)) or any(d < period for d in dates_in(claim) if period)


def current_lines(lines: list[str], period: str) -> list[str]:
    """The reference lines not dated before the target period (the current row, the brief): what a
    claim about this period may rest on."""
    return [line for line in lines if not any(d < period for d in _LINE_DATE.findall(line))]


def word_coverage(truth_text: str, text: str) -> float:
    """1 / 0.5 / 0: all, some or none of a truth text's content words are in the text (judged
    answer fields such as a stated cause, where the answer is itself about the subject)."""
    words = [w for w in re.findall(r"[a-z0-9_.%-]+", truth_text.lower()) if len(w) > 2]
    hits = sum(mentions(text, w) for w in words)
    return 1.0 if words and hits == len(words) else 0.5 if hits else 0.0


MAX_SPLIT_ITEMS = 6  # a clause naming more items of one set than this is a spray, judged whole


def atomic(text: str, set_enums: list[dict]) -> list[str]:
    """A clause about a set field naming several of its items ("The top components are north,
    west") as one claim per item ("... north", "... west"): the paper's decomposition gives each
    claim ONE named entity, so a wrong item is its own unsupported claim beside the right ones.
    `set_enums`: {"subject": the field's name as words, "options": its items' labels}."""
    low = text.lower().replace("_", " ")
    best: list[int] = []
    for group in set_enums:
        if not mentions(text, group["subject"]):
            continue
        starts = []
        for option in dict.fromkeys(phrase(o) for o in group["options"]):
            hit = re.search(rf"(?<![\w]){re.escape(option)}(?![\w])", low)
            if hit:
                starts.append(hit.start())
        if len(starts) > len(best):
            best = sorted(starts)
    prefix, ends = text[: best[0]] if best else "", [*best[1:], len(text)]
    if not 2 <= len(best) <= MAX_SPLIT_ITEMS or len(prefix.split()) < 2:  # no "<subject> is" to repeat
        return [text]
    return [prefix + re.sub(r"[\s,;]*(?:and|or)?[\s,;]*$", "", text[a:b]) for a, b in zip(best, ends)]


def split_claims(report: str, limit: int = 10, set_enums: list[dict] | None = None) -> list[str]:
    """Sentences and bullet lines with at least four words, headers and labels dropped; a clause
    naming several items of a set field split into one claim per item (`atomic`)."""
    found = []
    for part in clauses(report):
        text = part.lstrip("-*#>•0123456789. )").strip()
        if len(text.split()) < 4 or text.endswith(":"):
            continue
        for claim in atomic(text, set_enums or []):
            found.append(claim)
            if len(found) == limit:
                return found
    return found


def conflicts(claim: str, keypoint: dict, period: str) -> bool:
    """The claim names the keypoint's subject and states another value for it (a label of its
    field other than the truth, or numbers none of which is the truth, with no word placing them
    in an earlier period)."""
    truth, terms = keypoint.get("truth"), keypoint.get("terms") or []
    if truth is None or isinstance(truth, (bool, list, dict)) or not names_subject(claim, terms):
        return False
    if about_earlier(claim, period):
        return False
    if isinstance(truth, (int, float)):
        numbers = numbers_in(claim)
        return bool(numbers) and not any(number_matches(n, float(truth)) for n in numbers)
    said = [o for o in keypoint.get("options") or [] if mentions(claim, o)]
    return bool(said) and not any(phrase(o) == phrase(truth) for o in said)


_IDENTIFIER = re.compile(r"\b[a-z][a-z0-9]*_[a-z0-9_]+\b")


def keypoint_claim(claim: str, keypoints: list[dict], period: str, enums: list[list[str]]) -> str | None:
    """A claim naming a keypoint's subject and asserting a value for it (a number, a date, a label or
    a series name) about this period is not encyclopedic (paper A.5.2: general knowledge only "if the
    claim is encyclopedic and not contradicting any reference"): tier 1 when it conveys the keypoint
    (the coverage check run on the claim), a contradiction when it conveys none of the keypoints it
    names, None (undecided: the usual checks) when it conveys part or names no subject."""
    labels = {label for group in enums for label in group}
    asserts = numbers_in(claim) or dates_in(claim) - {period} or _IDENTIFIER.search(claim)
    asserts = asserts or any(mentions(claim, label) for label in labels)
    if not asserts or _EARLIER.search(claim):
        return None
    named = [kp for kp in keypoints if kp.get("field") and names_subject(claim, kp.get("terms") or [])]
    scores = []
    for kp in named:
        text = str(kp.get("truth_text") or "")
        if not dates_in(text) and any(d < period for d in dates_in(claim)):
            continue  # the claim places itself earlier by its date
        covered = bound_coverage(kp, claim, kp.get("options") or [], enums)
        if covered is None and text:
            covered = bound_coverage({**kp, "truth": text}, claim, kp.get("options") or [], enums)
        if covered is None and text:
            covered = word_coverage(text, claim)
        scores.append(covered or 0.0)
    if not scores:
        return None
    if max(scores) == 1.0:
        return "tier1_supported"
    return "contradicts_keypoint" if max(scores) == 0.0 else None


_SOURCE_NAME = re.compile(r"timeseries\.csv|gt_source/[\w.-]+", re.IGNORECASE)


_CITATION_WORDS = frozenset(
    "evidence source sources see cited from and the a of in prior previous last release releases report reports "
    "file files data table csv row rows cells cell based on per".split()
)


def is_citation(claim: str) -> bool:
    """A line that only names its sources ("Evidence: timeseries.csv and the prior release
    gt_source/..."): a citation, not an atomic fact about the data (A.5.2 decomposition: one number,
    entity, date, direction or classification), so it counts neither way."""
    if not _SOURCE_NAME.search(claim):
        return False
    rest = re.findall(r"[a-z0-9_%-]+", _SOURCE_NAME.sub(" ", claim).lower())
    return all(word in _CITATION_WORDS for word in rest)


class RulesJudge:
    """`judge/rules` (see the module docstring)."""

    name = RULES_JUDGE
    reads_context = True

    def __call__(self, call: JudgeCall) -> str:
        return getattr(self, f"_{call.kind}")(call.context)

    def _coverage(self, c: dict) -> str:
        if c.get("keypoint") is None:  # a judged answer field: the answer text is about the subject
            sprayed = is_listing(c["report"], c.get("enums", []))  # "a rose, b fell, c ..." names no cause
            covered = 0.0 if sprayed else word_coverage(str(c.get("truth_text") or c.get("truth") or ""), c["report"])
        else:
            covered = bound_coverage(c["keypoint"], c["report"], c.get("options", []), c.get("enums", []))
            if covered is None and c.get("truth_text"):
                covered = bound_coverage(
                    {**c["keypoint"], "truth": c["truth_text"]}, c["report"], c.get("options", []), c.get("enums", [])
                )
        return {1.0: "YES", 0.5: "PARTIAL"}.get(covered or 0.0, "NO")

    def _claims(self, c: dict) -> str:
        return json.dumps(split_claims(c["report"], set_enums=c.get("set_enums")))

    def _verify(self, c: dict) -> str:
        claim, period = c["claim"], c.get("period", "")
        # what the keypoints STATE (their truth texts): a description's list of options or its "last 6
        # releases" supports nothing
        tier1 = "\n".join(c["tier1_values"]) if "tier1_values" in c else "\n".join(c["tier1"])
        tier2 = "\n".join(c["tier2"])
        numbers = numbers_in(claim)
        claim_dates = dates_in(claim)
        labels = {phrase(v) for options in c.get("labels", {}).values() for v in options}
        said = {label for label in labels if mentions(claim, label)}
        truths = {phrase(v) for v in c.get("truth_labels", [])}
        scalar = c.get("scalar_labels")
        single = said if scalar is None else {label for label in said if label in {phrase(x) for x in scalar}}
        enums = c.get("enums") or [list(options) for options in c.get("labels", {}).values()]

        def grounded(reference: str) -> bool:
            ref_numbers = numbers_in(reference)
            number_ok = all(any(number_matches(n, r) for r in ref_numbers) for n in numbers)
            dates_ok = claim_dates <= dates_in(reference)
            labels_ok = all(mentions(reference, label) for label in said)
            return number_ok and dates_ok and labels_ok

        about_keypoint = keypoint_claim(claim, c.get("keypoints", []), period, enums)
        if about_keypoint is not None and not is_listing(claim, enums, c.get("listing_labels", 2)):
            verdict = about_keypoint
        elif not numbers and not said and claim_dates <= {period}:
            verdict = "tier3_general_knowledge"
        elif is_citation(claim):
            verdict = "tier3_general_knowledge"  # a source list ("Evidence: timeseries.csv, gt_source/..."): no fact  # no fact beyond the period the prompt names
        elif is_listing(claim, enums, c.get("listing_labels", 2)):
            verdict = "speculation"
        elif any(conflicts(claim, kp, period) for kp in c.get("keypoints", [])):
            verdict = "contradicts_keypoint"
        elif grounded(tier1):
            verdict = "tier1_supported"
        elif single - truths and not single & truths and not about_earlier(claim, period):
            verdict = "contradicts_keypoint"  # names another state than the truth's (one-label fields only)
        elif about_earlier(claim, period) and grounded("\n".join([tier1, *c.get("tier1_earlier", []), tier2])):
            verdict = "tier2_supported"  # a true statement about the past, placed in the past
        elif grounded(tier1 + "\n" + "\n".join(current_lines(c["tier2"], period))):
            verdict = "tier2_supported"  # otherwise it must hold now: stale figures stated as current are not
        else:
            verdict = "speculation"
        return json.dumps({"verdict": verdict})

    def _quality(self, c: dict) -> str:
        hits, partial, misses, violations = [], [], [], []
        readable = {**c, "report": prose(c["report"], c.get("enums", []), c.get("listing_labels", 2))}
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
                "rationale": "rules judge: literal checks",
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
        said = [part for part in clauses(report) if any(mentions(part, w) for w in check["words"])]
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
