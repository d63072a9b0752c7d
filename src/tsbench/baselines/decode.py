"""Turn a baseline's numbers into answers that always pass the scorer's type checks.

Both non-LLM models (classical heads, detector) end here, so the rules for a valid answer live in
one place: integer windows inside [0, L) with end > start, labels spelled exactly, MCQ answers that
are one of the row's option strings.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence

from tsbench.tasks.anomalyxl import labels as lb


def window(start: float, end: float, length: int, *, min_width: int = 1) -> tuple[int, int]:
    """A half-open integer window inside [0, L) with at least `min_width` samples (as L allows)."""
    length = max(1, int(length))
    s = 0 if not math.isfinite(start) else int(round(start))
    e = s + min_width if not math.isfinite(end) else int(round(end))
    s = min(max(s, 0), length - 1)
    e = min(max(e, s + 1), length)
    if e - s < min_width:
        e = min(length, s + min_width)
        s = max(0, e - min_width)
    return s, e


def best_option(options: Sequence[str], scores: Mapping[str, float], fallback: str | None = None) -> str:
    """The option with the highest score (unscored options rank last, ties to the earlier option).

    When no option has a score, `fallback` if it is an option, else the first option.
    """
    scored = [(scores[o], -i, o) for i, o in enumerate(options) if o in scores]
    if scored:
        return max(scored)[2]
    if fallback is not None and fallback in options:
        return fallback
    return options[0] if options else (fallback or "")


def preferred_option(options: Sequence[str], ranked: Iterable[str]) -> str:
    """The first label of `ranked` that is one of the options (else the first option)."""
    for label in ranked:
        if label in options:
            return label
    return options[0] if options else ""


def named_channels(options: Sequence[str]) -> list[str]:
    """The channels an identification question asks about, read off its options."""
    names: set[str] = set()
    for option in options:
        if option != lb.IDENTIFICATION_NONE:
            names.update(part.strip() for part in option.split(","))
    return sorted(n for n in names if n)


def identification_option(options: Sequence[str], probability: Mapping[str, float]) -> str:
    """The option whose channel set is most likely under independent per-channel probabilities.

    Each option is a set of the named channels ("None" is the empty set); its log-likelihood is
    the sum over named channels of log p (in the set) or log(1 - p) (not in it).
    """
    named = named_channels(options)
    best, best_ll = options[0] if options else lb.IDENTIFICATION_NONE, -math.inf
    for option in options:
        chosen = set() if option == lb.IDENTIFICATION_NONE else {p.strip() for p in option.split(",")}
        ll = 0.0
        for name in named:
            p = min(max(float(probability.get(name, 0.0)), 1e-6), 1 - 1e-6)
            ll += math.log(p) if name in chosen else math.log(1 - p)
        if ll > best_ll:
            best, best_ll = option, ll
    return best


def answer_text(answer: dict) -> str:
    return json.dumps(answer, ensure_ascii=False)


def localize_answer(present: bool, start: float, end: float, length: int) -> dict:
    if not present:
        return {"present": False}
    s, e = window(start, end, length)
    return {"present": True, "start": s, "end": e}


def classify_answer(kind: str, start: float, end: float, length: int) -> dict:
    if kind not in lb.KINDS:
        return {"kind": lb.NO_ANOMALY_KIND}
    s, e = window(start, end, length)
    return {"kind": kind, "start": s, "end": e}


def magnitude_answer(m: float) -> dict:
    value = float(m) if math.isfinite(m) and m > 0 else 1.0
    return {"magnitude_sigma": round(value, 4)}


def all_channels_answer(events: Iterable[tuple[str, float, float]], length: int) -> dict:
    """Events (channel, start, end) -> the schema's list, sorted by (channel, start)."""
    out = []
    for channel, start, end in events:
        s, e = window(start, end, length)
        out.append({"channel": channel, "start": s, "end": e})
    out.sort(key=lambda ev: (ev["channel"], ev["start"]))
    return {"anomalies": out}


def lead_lag_answer(direction: str, lag: float, length: int) -> dict:
    if direction not in lb.DIRECTIONS:
        direction = "independent"
    if direction == "independent":
        return {"direction": "independent", "lag_samples": 0}
    lag_i = int(round(lag)) if math.isfinite(lag) else 1
    return {"direction": direction, "lag_samples": min(max(lag_i, 1), max(1, length // 4))}
