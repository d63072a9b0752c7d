"""Per-category scores and secondary metrics for AnomalyXL (paper Appendix E).

Each ``*_metrics`` function takes the trusted gold dict and a typed answer from
:mod:`tsbench.tasks.anomalyxl.extract` (None when the response was invalid) and returns ``score`` plus
the secondary metrics of its category. Accuracy-like metrics count an invalid answer as wrong
(0.0); error sizes and ratios with nothing to measure are None. ``acc_iou_t`` is IoU >= t,
while all-channels pairing needs IoU strictly above 0.3, as the contract says.
"""

from __future__ import annotations

from typing import Any

from tsbench.core.answers import iou
from tsbench.tasks.anomalyxl.labels import (
    ALL_CHANNELS,
    CLASSIFY,
    LEAD_LAG,
    LOCALIZE,
    MAGNITUDE,
    MCQ_CATEGORIES,
    NO_ANOMALY_KIND,
)

from .extract import INDEPENDENT, extract_answer

Window = tuple[int, int]

IOU_THRESHOLDS = (0.3, 0.5, 0.8)
MATCH_IOU = (3, 10)  # all-channels pairing needs IoU > 3/10, compared exactly in integers
MAGNITUDE_TOLERANCE = 0.5
RELATIVE_ACCURACY = (0.10, 0.25, 0.50)
LAG_TOLERANCE = 0.05
LAG_ACCURACY = {"lag_acc_1pct": 0.01, "lag_acc_5pct": 0.05}


def _overlap(a: Window, b: Window) -> tuple[int, int]:
    """(intersection, union) lengths of two half-open windows; (0, 0) if degenerate or disjoint."""
    (a_start, a_end), (b_start, b_end) = a, b
    if a_start >= a_end or b_start >= b_end:
        return 0, 0
    intersection = min(a_end, b_end) - max(a_start, b_start)
    if intersection <= 0:
        return 0, 0
    return intersection, (a_end - a_start) + (b_end - b_start) - intersection


def _flag(condition: bool) -> float:
    return 1.0 if condition else 0.0


def _window_metrics(gold: dict, predicted: Window | None) -> dict[str, Any]:
    """IoU, accuracy at IoU thresholds and edge errors (fractions of L) for one gold window."""
    gold_window = (gold["start"], gold["end"])
    overlap = iou(predicted, gold_window) if predicted is not None else 0.0
    length = gold.get("_L")
    measurable = predicted is not None and length
    result: dict[str, Any] = {"iou": overlap}
    for threshold in IOU_THRESHOLDS:
        result[f"acc_iou_{threshold}"] = _flag(overlap >= threshold)
    result["start_err_frac"] = abs(predicted[0] - gold_window[0]) / length if measurable else None
    result["end_err_frac"] = abs(predicted[1] - gold_window[1]) / length if measurable else None
    return result


def _no_window_metrics() -> dict[str, Any]:
    result: dict[str, Any] = {"iou": None}
    for threshold in IOU_THRESHOLDS:
        result[f"acc_iou_{threshold}"] = None
    result["start_err_frac"] = result["end_err_frac"] = None
    return result


def _answer_window(answer: dict | None) -> Window | None:
    if answer is None or "start" not in answer:
        return None
    return answer["start"], answer["end"]


def localize_metrics(gold: dict, answer: dict | None) -> dict[str, Any]:
    """Both absent: 1; both present: IoU; otherwise 0."""
    predicted_present = None if answer is None else answer["present"]
    if not gold["present"]:
        score = _flag(predicted_present is False)
        return {"score": score, "presence_correct": score, **_no_window_metrics()}
    window = _window_metrics(gold, _answer_window(answer))
    score = window["iou"] if predicted_present else 0.0
    return {"score": score, "presence_correct": _flag(predicted_present is True), **window}


def classify_metrics(gold: dict, answer: dict | None) -> dict[str, Any]:
    """Exact kind match times window IoU; both "No anomaly" scores 1."""
    predicted_kind = None if answer is None else answer["kind"]
    kind_correct = _flag(predicted_kind == gold["kind"])
    gold_present = gold["kind"] != NO_ANOMALY_KIND
    presence_correct = _flag(answer is not None and (predicted_kind != NO_ANOMALY_KIND) == gold_present)
    if not gold_present:
        return {
            "score": kind_correct,
            "kind_correct": kind_correct,
            "presence_correct": presence_correct,
            **_no_window_metrics(),
        }
    window = _window_metrics(gold, _answer_window(answer))
    return {
        "score": kind_correct * window["iou"],
        "kind_correct": kind_correct,
        "presence_correct": presence_correct,
        **window,
    }


def magnitude_metrics(gold: dict, answer: dict | None) -> dict[str, Any]:
    """Linear ramp in relative error: 1 at an exact match, 0 from 50 % off."""
    truth = gold["magnitude_sigma"]
    relative_error = None if answer is None else abs(answer["magnitude_sigma"] - truth) / truth
    result: dict[str, Any] = {
        "score": 0.0 if relative_error is None else max(0.0, 1.0 - relative_error / MAGNITUDE_TOLERANCE),
        "rel_err": relative_error,
    }
    for tolerance in RELATIVE_ACCURACY:
        within = relative_error is not None and relative_error <= tolerance
        result[f"acc_rel_{round(tolerance * 100)}"] = _flag(within)
    return result


def match_events(gold_events: list[dict], predicted_events: list[dict]) -> list[tuple[int, int]]:
    """Greedy one-to-one pairs (gold index, predicted index), highest IoU first.

    Only same-channel pairs with IoU strictly above 0.3 qualify; ties go to the lower gold, then
    the lower predicted index, so the result is deterministic.
    """
    numerator, denominator = MATCH_IOU
    candidates = []
    for g, gold_event in enumerate(gold_events):
        gold_window = (gold_event["start"], gold_event["end"])
        for p, predicted in enumerate(predicted_events):
            if predicted["channel"] != gold_event["channel"]:
                continue
            intersection, union = _overlap(gold_window, (predicted["start"], predicted["end"]))
            if union and denominator * intersection > numerator * union:
                candidates.append((-intersection / union, g, p))
    candidates.sort()
    used_gold: set[int] = set()
    used_predicted: set[int] = set()
    pairs = []
    for _, g, p in candidates:
        if g not in used_gold and p not in used_predicted:
            used_gold.add(g)
            used_predicted.add(p)
            pairs.append((g, p))
    return pairs


def all_channels_metrics(gold: dict, answer: dict | None) -> dict[str, Any]:
    """Event-level F1 = 2TP / (2TP + FP + FN); an invalid answer counts as predicting nothing."""
    gold_events = gold["anomalies"]
    predicted_events = [] if answer is None else answer["anomalies"]
    tp = len(match_events(gold_events, predicted_events))
    fp = len(predicted_events) - tp
    fn = len(gold_events) - tp
    if answer is None:
        score = 0.0
    elif not gold_events and not predicted_events:
        score = 1.0
    else:
        score = 2 * tp / (2 * tp + fp + fn)
    return {
        "score": score,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
    }


def lead_lag_metrics(gold: dict, answer: dict | None) -> dict[str, Any]:
    """Wrong direction 0; independent and right 1; else a ramp to 0 at a lag error of 5 % of L."""
    direction_correct = answer is not None and answer["direction"] == gold["direction"]
    result: dict[str, Any] = {"direction_correct": _flag(direction_correct)}
    if gold["direction"] == INDEPENDENT:
        result["score"] = _flag(direction_correct)
        result.update(dict.fromkeys(LAG_ACCURACY))
        return result
    lag_error = abs(answer["lag_samples"] - gold["lag_samples"]) / gold["_L"] if direction_correct else None
    result["score"] = 0.0 if lag_error is None else max(0.0, 1.0 - lag_error / LAG_TOLERANCE)
    for key, tolerance in LAG_ACCURACY.items():
        result[key] = _flag(lag_error is not None and lag_error <= tolerance)
    return result


def mcq_metrics(gold: dict, answer: str | None) -> dict[str, Any]:
    """Exact match of the extracted option text with the gold option."""
    return {"score": _flag(answer is not None and answer == gold["answer"])}


_PRECISE_METRICS = {
    LOCALIZE: localize_metrics,
    CLASSIFY: classify_metrics,
    MAGNITUDE: magnitude_metrics,
    ALL_CHANNELS: all_channels_metrics,
    LEAD_LAG: lead_lag_metrics,
}


def metrics(category: str, gold: dict, response: str) -> dict[str, Any]:
    """Score, validity, parsed answer, error and secondary metrics of one response.

    Never raises on the response; an unknown category raises ValueError.
    """
    extraction = extract_answer(category, gold, response)
    answer = extraction.answer if extraction.valid else None
    if category in MCQ_CATEGORIES:
        detail = mcq_metrics(gold, answer)
        parsed = extraction.answer
    else:
        detail = _PRECISE_METRICS[category](gold, answer)
        parsed = answer
    return {
        "score": detail.pop("score"),
        "valid": extraction.valid,
        "parsed": parsed,
        "error": extraction.error,
        **detail,
    }


def score(category: str, gold: dict, response: str) -> float:
    """The row's score in [0, 1] (the evaluation number and the RL reward)."""
    return metrics(category, gold, response)["score"]
