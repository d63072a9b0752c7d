"""Classify-with-evidence over a real recording (paper §4.3, Appendix F): one question template
for positive and anomaly-free windows, and the kind_x_iou scorer.

Answer: the last JSON object of the final message, {"kind": <option>, "start": int, "end": int}
([start, end) a half-open sample window) or {"kind": "No anomaly"}. Score: exact kind match
times IoU with the gold window; on an anomaly-free window a "No anomaly" answer scores 1.
Reported as macro-F1 over the kinds (leaderboard, from `parsed["answer"]`) and IoU, the mean
of `metrics["iou"]` over anomalous windows (None on anomaly-free ones, so it never dilutes).
"""

from __future__ import annotations

from typing import Any

from tsbench.core.answers import as_integer, iou, last_json_object
from tsbench.tasks.base import Scored

CATEGORY = "classify_with_evidence"
REGIME = "precise"
NO_ANOMALY = "No anomaly"
IOU_THRESHOLDS = (0.3, 0.5)


def question(*, recording: str, what: str, channels: list[str], fs: float, length: int, kinds: dict[str, str]) -> str:
    """The single detect-and-classify prompt; `kinds` maps each label to its definition."""
    listed = "\n".join(f"- {label}: {definition}" for label, definition in kinds.items())
    seconds = length / fs
    return (
        f"This is a window of a real {recording} with {len(channels)} channels ({', '.join(channels)}), "
        f"sampled at {fs:g} Hz: L = {length} samples ({seconds:.1f} s), each channel z-normalized. "
        f"It contains at most one annotated {what}; possibly none. The kinds are:\n{listed}\n"
        f"If the window contains one, answer with the JSON object "
        f'{{"kind": "<one of the kinds, exactly as written>", "start": <int>, "end": <int>}}, where '
        f"[start, end) is the half-open sample-index window of the {what} (0 <= start < end <= {length}). "
        f'If it contains none, answer {{"kind": "{NO_ANOMALY}"}}. The last JSON object of your final '
        f"message is your answer."
    )


def options(kinds: list[str]) -> list[str]:
    return [*kinds, NO_ANOMALY]


def gold(kind: str | None, window: tuple[int, int] | None) -> dict:
    if kind is None:
        return {"answer": NO_ANOMALY}
    return {"answer": kind, "start": int(window[0]), "end": int(window[1])}


def _empty_metrics(gold_present: bool) -> dict[str, float | None]:
    out: dict[str, float | None] = {"kind_correct": 0.0, "presence_correct": 0.0, "iou": 0.0 if gold_present else None}
    for t in IOU_THRESHOLDS:
        out[f"acc_iou_{t}"] = 0.0 if gold_present else None
    return out


def parse(message: Any) -> tuple[dict | None, str | None]:
    """({"answer": kind[, "start", "end"]}, None) or (None, why the message is unusable)."""
    if not isinstance(message, str):
        return None, "response is not a string"
    obj, error = last_json_object(message)
    if obj is None:
        return None, error
    kind = obj.get("kind")
    if not isinstance(kind, str):
        return None, "'kind' is not a string"
    if kind == NO_ANOMALY:
        return {"answer": kind}, None
    bounds = []
    for key in ("start", "end"):
        if key not in obj:
            return None, f"missing '{key}'"
        number = as_integer(obj[key])
        if number is None:
            return None, f"'{key}' is not an integer"
        bounds.append(number)
    return {"answer": kind, "start": bounds[0], "end": bounds[1]}, None


def score(gold: dict, message: Any) -> Scored:
    """kind_x_iou; never raises on the message."""
    gold_kind = gold["answer"]
    present = gold_kind != NO_ANOMALY
    answer, error = parse(message)
    metrics = _empty_metrics(present)
    if answer is None:
        return Scored(score=0.0, valid=False, parsed=None, error=error, metrics=metrics)
    kind_correct = answer["answer"] == gold_kind
    metrics["kind_correct"] = float(kind_correct)
    metrics["presence_correct"] = float((answer["answer"] != NO_ANOMALY) == present)
    if not present:
        return Scored(score=float(kind_correct), valid=True, parsed=answer, metrics=metrics)
    overlap = iou((answer["start"], answer["end"]), (gold["start"], gold["end"])) if "start" in answer else 0.0
    metrics["iou"] = overlap
    for t in IOU_THRESHOLDS:
        metrics[f"acc_iou_{t}"] = float(overlap >= t)
    return Scored(score=float(kind_correct) * overlap, valid=True, parsed=answer, metrics=metrics)
