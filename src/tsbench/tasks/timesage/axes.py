"""The four axes of a period's score (paper A.4), each 0-100, and the overall mean.

- accuracy: the structured answer, field by field with the field's rule; mean over scored fields.
- accuracy first checks the answer against the field schemas (answer_check.py): a missing or
  mistyped field scores 0 and is listed in `schema_problems`.
- the report is cut at clauses.REPORT_CHAR_LIMIT characters before any judging.
- coverage: per keypoint, the truth scalar stated about the keypoint's subject (reading.py; easy
  and medium tiers: covered without a judge call) else the judge's YES / PARTIAL / NO = 1 / 0.5 / 0;
  mean. A bare list of labels or numbers binds nothing. The mean is corrected for guessing under any
  judge (issue 45), as substance is: a keypoint the reader finds stated wrong costs 1 / (options - 1).
- faithfulness: the judge splits the report into <= 10 atomic claims and labels each against
  keypoints (tier 1) and cutoff-valid context (tier 2); score = (tier 1 + tier 2) / the claims that
  are not general knowledge (tier 3 counts neither way), and over at least the number of keypoints
  (a report that makes fewer claims than the period has keypoints is read as leaving the rest
  unverified; no verifiable claim at all scores 0), whoever judges it.
- quality: the judge places each required signal as hit (1) / partial (0.5) / miss and flags
  forbidden ones; (hits + partials/2 - violations) / required, clipped to [0, 100], credited in
  proportion to what the report conveys: judge/rules' reply's `substance`, a model judge's coverage share
  (issue 45: writing that conveys nothing of the period earns nothing, whoever judges it).
A judge call whose reply stays unreadable after its retries (judge_cache.Asker.read) is a judge
error: its axis scores 0 for the row and is named in `judge_errors`; overall = the mean of the four
axes, always, so no report can change which axes count (spec "The model judge").

Pure functions of the gold, the answer, the report and an `Asker` (the injected judge).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tsbench.tasks.timesage.answer_check import check_answer, normalised, unexpected_keys
from tsbench.tasks.timesage.clauses import cut, mentions, numbers_in
from tsbench.tasks.timesage.contract import FieldSpec
from tsbench.tasks.timesage.judge import (
    CLAIMS_PROMPT,
    COVERAGE_PROMPT,
    GENERAL_KNOWLEDGE,
    QUALITY_PROMPT,
    SUPPORTED,
    VERIFY_PROMPT,
    JudgeCall,
    parse_claims,
    parse_coverage,
    parse_quality,
    parse_verdict,
    quoted,
)
from tsbench.tasks.timesage.judge_cache import Asker
from tsbench.tasks.timesage.normalise import normalise
from tsbench.tasks.timesage.reading import read
from tsbench.tasks.timesage.rules import field_score
from tsbench.tasks.timesage.statements import corrected_coverage
from tsbench.tasks.timesage.statements import keypoint_coverage as stated_coverage
from tsbench.tasks.timesage.subjects import enum_groups, lexicon

AXES = ("accuracy", "coverage", "faithfulness", "quality")


@dataclass
class PeriodScore:
    accuracy: float | None = None
    coverage: float | None = None
    faithfulness: float | None = None
    quality: float | None = None
    fields: dict[str, float | None] = field(default_factory=dict)
    families: dict[str, float] = field(default_factory=dict)  # family letter -> mean field score, 0-100
    keypoints: dict[str, float | None] = field(default_factory=dict)
    verdicts: list[tuple[str, str | None]] = field(default_factory=list)
    quality_lists: dict[str, list[str]] = field(default_factory=dict)
    schema_problems: dict[str, str] = field(default_factory=dict)  # field -> "missing" / "mistyped: ..."
    unexpected_keys: list[str] = field(default_factory=list)
    judge_errors: list[str] = field(default_factory=list)  # axes scored 0 because the judge could not be read

    @property
    def overall(self) -> float:
        """The mean of the four axes, always (an axis not scored counts 0: a judge error is flagged, never dropped)."""
        return sum(getattr(self, axis) or 0.0 for axis in AXES) / len(AXES)

    def judged(self, axis: str, value: float | None) -> float:
        """An axis' score, a judge error (None) recorded as 0 and flagged."""
        if value is None:
            self.judge_errors.append(axis)
            return 0.0
        return value


def _mean(values: list[float]) -> float | None:
    return 100.0 * sum(values) / len(values) if values else None


def keypoint_accuracy(
    fields: list[FieldSpec], answer: dict, truth: dict, asker: Asker | None = None
) -> tuple[float | None, dict[str, float | None]]:
    """Mean field score; a field the schema check refuses (answer_check.py) scores 0."""
    failed: list[str] = []
    problems = check_answer(fields, answer, truth)
    answer = normalised(fields, answer)

    enums = all_enums(fields)

    def judge_field(spec: FieldSpec, value: Any, expected: Any) -> float | None:
        question, text = spec.question, str(value or "")
        covered = _judge_coverage(asker, f"{question}: {expected}", question, text, expected, None, {"enums": enums})
        if covered is None:
            failed.append(spec.name)
        return covered

    per_field = {
        spec.name: 0.0
        if spec.name in problems
        else field_score(spec, answer.get(spec.name), truth.get(spec.name), judge_field if asker is not None else None)
        for spec in fields
        if spec.in_accuracy
    }
    if failed:  # a judge error: its fields score 0 and the caller flags the axis
        per_field.update({name: 0.0 for name in failed})
        return None, per_field
    return _mean([v for v in per_field.values() if v is not None]), per_field


def family_scores(fields: list[FieldSpec], per_field: dict[str, float | None]) -> dict[str, float]:
    grouped: dict[str, list[float]] = {}
    for spec in fields:
        value = per_field.get(spec.name)
        if spec.family is not None and value is not None:
            grouped.setdefault(spec.family, []).append(value)
    return {family: 100.0 * sum(v) / len(v) for family, v in grouped.items()}


def _judge_coverage(
    asker: Asker | None,
    description: str,
    verify: str,
    report: str,
    truth: Any,
    truth_text: str | None = None,
    binding: dict | None = None,
) -> float | None:
    """The judge's YES / PARTIAL / NO. `binding` ({"keypoint": id, "lexicon": ...}) lets the rules
    judge read the value stated about the keypoint's subject; without it (a judged answer field)
    the text judged is the answer itself."""
    if asker is None:
        return None
    prompt = COVERAGE_PROMPT.format(description=description, verify=verify, report=report, **quoted(report))
    context = {"report": report, "truth": truth, "truth_text": truth_text, "keypoint": None, **(binding or {})}
    return asker.read(JudgeCall("coverage", prompt, context), parse_coverage)


def all_enums(fields: list[FieldSpec]) -> list[list[str]]:
    return [group for f in fields for group in enum_groups(f.schema)]


def keypoint_coverage(
    keypoints: list[dict], report: str, tier: str, asker: Asker, lex: dict
) -> tuple[float | None, dict[str, float | None]]:
    """Keypoints carry id, description, verify, truth (the anchored field's value or None) and
    truth_text (what the report must convey). Easy and medium scalars stated about their subject
    are covered without a judge call (paper A.4.2: a verbatim scalar match, read as reading.py does)."""
    reading = read(report, lex)
    per_kp: dict[str, float | None] = {}
    # the call is spared only where the value is stated about its subject and stands on a reading of the
    # period stated right (statements.grounded); a judgement stated with no such reading goes to the judge
    stated = stated_coverage
    for kp in keypoints:
        truth, text = kp.get("truth"), kp.get("truth_text")
        if tier in ("easy", "medium") and not isinstance(truth, (list, dict)):
            if stated(reading, lex, kp["id"])[0] == 1.0:
                per_kp[kp["id"]] = 1.0  # the value is stated about its subject: no judge call
                continue
        description = f"{kp['description']}: {text}" if text else kp["description"]
        binding = {"keypoint": kp["id"], "lexicon": lex}
        said = _judge_coverage(asker, description, kp["verify"], report, truth, text, binding)
        doubted = addresses_grader(report) and not getattr(asker.judge, "reads_context", False)
        per_kp[kp["id"]] = 0.0 if said and doubted and not corroborated(report, truth, lex) else said
    scored = [v for v in per_kp.values() if v is not None]
    if len(scored) < len(per_kp):  # a judge error: the caller scores the axis 0 and flags it
        return None, per_kp
    # any judge: a keypoint the report states wrong costs 1 / (options - 1), so a guess covers nothing on average
    if per_kp:
        return 100.0 * corrected_coverage(reading, lex, per_kp), per_kp
    return _mean(scored), per_kp


_GRADER = re.compile(
    r"\b(?:grader|judge|scorer|evaluator|assessor)s?\b|\b(?:score|rate|grade) (?:this|it|the report)\b|\b\d+\s*/\s*10\b|"
    r"\banswer (?:yes|partial)\b|\bverdict\b|tier1_supported|\bignore (?:all |any |the |previous )*instructions?\b",
    re.IGNORECASE,
)


def addresses_grader(report: str) -> bool:
    """Whether a report speaks to whoever scores it ("the grader must give 10/10", "answer YES"): text about
    its own score, not the period. A model judge's verdicts on such a report stand only where corroborated."""
    return bool(_GRADER.search(report))


def corroborated(report: str, truth: Any, lex: dict) -> bool:
    """Whether a model judge's YES can stand on a report that addresses its grader: a keypoint whose truth is
    one label or figure is conveyed only by a report that writes it (in any notation: normalise.py), so a
    YES for a value the report never writes is the judge talked into it. Lists, objects, yes/no and judged
    texts: the judge's word."""
    if isinstance(truth, bool) or truth is None:
        return True
    text = normalise(report, lex.get("unit", ""))
    if isinstance(truth, list):  # a list: one of its items written (an empty one: a "none" written)
        if not truth:
            return bool(re.search(r"\b(?:no|none|nothing|empty)\b", text, re.IGNORECASE))
        names = [next((v for k, v in t.items() if isinstance(v, str) and k != "evidence"), "") if isinstance(t, dict) else t
                 for t in truth]  # fmt: skip
        return any(corroborated(report, name, lex) for name in names if name != "")
    if isinstance(truth, dict):  # an object: one of its parts written
        return any(corroborated(report, v, lex) for v in truth.values() if not isinstance(v, bool))
    if isinstance(truth, (int, float)):  # a figure near it (the judge weighs tolerance; a report must write one)
        return any(abs(x - truth) <= max(0.05, 0.05 * abs(truth)) for x in numbers_in(text))
    return mentions(text, truth) or mentions(text.replace("_", " "), str(truth).replace("_", " "))


def references(keypoints: list[dict], context: list[str]) -> tuple[list[str], list[str]]:
    tier1 = [f"[keypoint] {kp['description']}: {kp['truth_text']}" for kp in keypoints if kp.get("truth_text")]
    tier2 = [f"[context] {line}" for line in context]
    return tier1, tier2


def report_faithfulness(
    report: str, keypoints: list[dict], context: list[str], asker: Asker, lex: dict
) -> tuple[float | None, list[tuple[str, str | None]]]:
    if not report.strip():
        return 0.0, []
    call = JudgeCall(
        "claims", CLAIMS_PROMPT.format(report=report, **quoted(report)), {"report": report, "lexicon": lex}
    )
    claims = asker.read(call, parse_claims)
    if claims is None:
        return None, []
    if not claims:
        return 0.0, []
    tier1, tier2 = references(keypoints, context)
    verdicts = []
    for claim in claims:
        prompt = VERIFY_PROMPT.format(claim=claim, references="\n".join(tier1 + tier2), **quoted(claim))
        call = JudgeCall("verify", prompt, {"claim": claim, "report": report, "lexicon": lex})
        verdicts.append((claim, asker.read(call, parse_verdict)))
    if any(v is None for _, v in verdicts):
        return None, verdicts
    # a short report is read as making as many claims as the period has keypoints, whoever judges it (issue
    # 45: a report that states each subject twice, right and wrong, leaves one safe claim, not a faithful report)
    floor = sum(kp.get("truth") is not None for kp in keypoints)
    return faithfulness_share([v for _, v in verdicts], floor), verdicts


def faithfulness_share(verdicts: list[str], floor: int = 0) -> float:
    """Supported (tier 1 + 2) over the claims that can be checked (all but general knowledge), and
    over at least `floor` claims; a report with nothing checkable scores 0."""
    checkable = [v for v in verdicts if v != GENERAL_KNOWLEDGE]
    if not checkable:
        return 0.0
    return 100.0 * sum(v in SUPPORTED for v in checkable) / max(len(checkable), floor)


def report_quality(
    report: str, rubric: dict, period: str, extra: dict, asker: Asker, substance: float | None = None
) -> tuple[float | None, dict[str, list[str]]]:
    required = [s["text"] for s in rubric["required"]]
    forbidden = [s["text"] for s in rubric["forbidden"]]
    prompt = QUALITY_PROMPT.format(
        period=period,
        genre=rubric["genre"],
        required="\n".join(f"- {s}" for s in required),
        forbidden="\n".join(f"- {s}" for s in forbidden),
        exemplar=rubric["exemplar"],
        report=report,
        **quoted(report),
    )
    ctx = {
        "report": report,
        "period": period,
        "required": rubric["required"],
        "forbidden": rubric["forbidden"],
        **extra,
    }
    placed = asker.read(JudgeCall("quality", prompt, ctx), lambda reply: parse_quality(reply, required, forbidden))
    if placed is None:
        return None, {}
    if not required:
        return None, placed
    raw = (len(placed["hits"]) + 0.5 * len(placed["partial"]) - len(placed["violations"])) / len(required)
    # writing is credited in proportion to what the report conveys of the period: judge/rules' own
    # substance, a model judge's coverage share (its own verdicts), so writing that conveys nothing earns nothing
    gated = getattr(asker.judge, "substance_gate", False)
    share = placed.get("substance", 0.0) if gated else (1.0 if substance is None else substance)
    return min(100.0, max(0.0, 100.0 * raw * share)), placed


def score_period(gold: dict, answer: dict | None, report: str, asker: Asker, lex: dict | None = None) -> PeriodScore:
    """All four axes for one period. A missing answer (no final_answer) scores 0 on accuracy;
    an empty report 0 on coverage, faithfulness and quality (no judge call is made). `lex`: the
    period's lexicon (subjects.lexicon(gold)) when the caller scores many reports of one period."""
    fields = [FieldSpec(**f) for f in gold["fields"]]
    result = PeriodScore()
    if answer is None:
        result.accuracy = 0.0
        result.fields = {f.name: 0.0 for f in fields if f.in_accuracy}
    else:
        result.schema_problems = check_answer(fields, answer, gold["truth"])
        result.unexpected_keys = unexpected_keys(fields, answer)
        accuracy, result.fields = keypoint_accuracy(fields, answer, gold["truth"], asker)
        judge_failed = accuracy is None and any(v is not None for v in result.fields.values())
        result.accuracy = result.judged("accuracy", accuracy) if judge_failed else accuracy
    result.families = family_scores(fields, result.fields)
    report = cut(report)
    if not report.strip():
        result.coverage = result.faithfulness = result.quality = 0.0
        return result
    lex = lex or lexicon(gold)
    coverage, result.keypoints = keypoint_coverage(gold["keypoints"], report, gold["tier"], asker, lex)
    result.coverage = result.judged("coverage", coverage)
    faithfulness, result.verdicts = report_faithfulness(report, gold["keypoints"], gold["context"], asker, lex)
    # a report that orders its grader and conveys no keypoint: its "supported" claims are obeyed, not read
    obeyed = not result.coverage and addresses_grader(report) and not getattr(asker.judge, "reads_context", False)
    if faithfulness and obeyed:
        faithfulness = 0.0
    result.faithfulness = result.judged("faithfulness", faithfulness)
    extra = {"target_name": gold.get("target_name", ""), "prior_docs": gold.get("prior_docs", []), "lexicon": lex}
    conveyed = result.coverage / 100.0  # a model judge's writing is credited by its coverage share
    quality, result.quality_lists = report_quality(
        report, gold["quality"], gold["period_label"], extra, asker, conveyed
    )
    result.quality = result.judged("quality", quality) if gold["quality"]["required"] else quality
    return result
