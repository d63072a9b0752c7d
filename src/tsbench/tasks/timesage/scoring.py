"""A period's final message -> Scored: parse {"answer": ..., "report": ...}, run the four axes with
the configured judge, and lay the numbers out for the results row.

`score` in [0, 1] is the overall (mean of the four axes; a judge error scores its axis 0 and is
named in `parsed["judge_errors"]`, counted in `judge_error_axes`) / 100; `metrics` holds the four axes,
the overall, per-family accuracy (family_A .. family_F), per-field scores (field:<name>) and the
judge's call counts and the schema check's counts (schema_missing, schema_mistyped; the fields
are listed in `parsed["schema_problems"]`); `valid` is False when there is no usable answer dict (a
period that ended without final_answer: every axis 0, recorded as a failure of the agent, not an
error row) or when the answer holds none of the required fields (`{}` is no answer).
"""

from __future__ import annotations

import json
from typing import Any

from tsbench.core.text import json_object_spans, strip_reasoning
from tsbench.tasks.base import Scored
from tsbench.tasks.timesage.axes import AXES, PeriodScore, score_period
from tsbench.tasks.timesage.judge_cache import Asker


def parse_message(message: str) -> tuple[dict | None, str, str | None]:
    """(answer dict or None, report text, why the answer is unusable)."""
    text = strip_reasoning(message or "").strip()
    if not text:
        return None, "", "no final_answer"
    candidates: list[Any] = []
    try:
        candidates.append(json.loads(text))
    except (ValueError, RecursionError):  # not JSON, nested past the parser's depth, or a 5,000-digit int
        for start, end in reversed(json_object_spans(text)):
            try:
                candidates.append(json.loads(text[start:end]))
            except (ValueError, RecursionError):
                continue
    for value in candidates:
        if isinstance(value, dict) and "answer" in value:
            answer, report = value.get("answer"), value.get("report")
            report = report if isinstance(report, str) else ""
            if isinstance(answer, dict):
                return answer, report, None
            return None, report, f"answer is a {type(answer).__name__}, not an object"
    return None, "", 'no {"answer": ..., "report": ...} object in the final message'


def metrics_of(result: PeriodScore, asker: Asker) -> dict[str, float | None]:
    out: dict[str, float | None] = {axis: getattr(result, axis) for axis in AXES}
    out["overall"] = result.overall
    out.update({f"family_{family}": value for family, value in result.families.items()})
    out.update({f"field:{name}": value for name, value in result.fields.items()})
    supported = [v for _, v in result.verdicts]
    problems = list(result.schema_problems.values())
    out.update(
        schema_missing=float(sum(p == "missing" for p in problems)),
        schema_mistyped=float(sum(p.startswith("mistyped") for p in problems)),
        judge_calls=float(asker.calls),
        judge_cache_hits=float(asker.hits),
        judge_errors=float(asker.errors),
        judge_unparsed=float(asker.unparsed),
        judge_retries=float(asker.retries),
        judge_error_axes=float(len(result.judge_errors)),
        claims=float(len(supported)),
        judge_tokens=float(asker.tokens),
        judge_cost_usd=asker.spent_usd(),
    )
    return out


def answer_error(gold: dict, answer: dict | None, error: str | None) -> str | None:
    """Why an answer dict is no answer at all: it holds none of the required fields."""
    if answer is None or error is not None:
        return error
    required = [f["name"] for f in gold["fields"]]
    if not any(name in answer for name in required):
        return f"the answer holds none of the {len(required)} required fields"
    return None


def score_message(gold: dict, message: str, asker: Asker, lex: dict | None = None) -> Scored:
    answer, report, error = parse_message(message)
    result = score_period(gold, answer, report, asker, lex)
    error = answer_error(gold, answer, error)
    overall = result.overall
    parsed = {
        "answer": answer,
        "report": report,
        "schema_problems": [f"{name}: {problem}" for name, problem in result.schema_problems.items()],
        "unexpected_keys": result.unexpected_keys,
        "keypoints": result.keypoints,
        "verdicts": [{"claim": c, "verdict": v} for c, v in result.verdicts],
        "quality": result.quality_lists,
        "judge_errors": result.judge_errors,
    }
    return Scored(
        score=overall / 100.0,
        valid=answer is not None and error is None,
        parsed=parsed,
        error=error,
        metrics=metrics_of(result, asker),
    )


def feedback_text(label: str, scored: Scored) -> str:
    """What a sequential agent is told after a period: its four scores, nothing of the truth."""
    m = scored.metrics

    def show(name: str) -> str:
        value = m.get(name)
        return "not scored" if value is None else f"{value:.1f}"

    note = "" if scored.valid else f" (no usable answer: {scored.error})"
    return (
        f"Feedback for period {label}{note}: keypoint accuracy {show('accuracy')}, keypoint coverage "
        f"{show('coverage')}, report faithfulness {show('faithfulness')}, report quality {show('quality')}, "
        f"overall {show('overall')} (each 0-100)."
    )
