"""From a model's final message to a typed answer.

Scoring is only as fair as extraction, so every rule here is explicit:

* Reasoning is dropped first. Closed ``<think>...</think>`` blocks go; an orphan ``</think>``
  (chat templates often put the opening tag in the prompt) means everything before it was
  reasoning; an unclosed ``<think>`` means everything after it is reasoning, so a message cut
  off mid-thought has no answer. Tags match case-insensitively.
* Precise answers are the LAST balanced top-level ``{...}`` of what remains. Brace matching
  respects JSON strings and escapes; a ``{`` that never closes is prose. That object must parse
  as strict JSON (no NaN/Infinity) and pass the category's type check, or the row is invalid;
  there is no falling back to an earlier object.
* MCQ answers: the ``answer`` string of the last top-level JSON object that has one, else the
  rest of the last line starting with ``answer:`` (any case; when that rest is blank, the next
  non-blank line), else the whole message; then trim white space and one pair of quotes. The
  answer is valid only when it is one of the row's options (the gold lists them under
  ``options``; without that list, every option the template can offer).

Integer fields accept JSON ints and integral floats (``100.0``). Booleans, strings, NaN,
infinities, non-integral floats and values beyond +-2**53 (no longer exact as floats, and far
past any series length) are rejected.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

from tsbench.core.answers import as_integer, extract_choice, last_json_object
from tsbench.tasks.anomalyxl.labels import (
    ALL_CATEGORIES,
    ALL_CHANNELS,
    CLASSIFY,
    DIRECTIONS,
    LEAD_LAG,
    LOCALIZE,
    MAGNITUDE,
    MCQ_CATEGORIES,
    MCQ_OPTIONS,
    NO_ANOMALY_KIND,
)

INDEPENDENT = "independent"


class Extraction(NamedTuple):
    """An answer pulled from a response; ``error`` says why it is unusable (None when valid)."""

    answer: Any
    error: str | None

    @property
    def valid(self) -> bool:
        return self.error is None


def mcq_options(category: str, gold: dict) -> tuple[str, ...] | None:
    """The options an MCQ row offered: the gold's own list, else the template's; None if unknown."""
    listed = gold.get("options") if isinstance(gold, dict) else None
    if isinstance(listed, list) and all(isinstance(o, str) for o in listed):
        return tuple(listed)
    return MCQ_OPTIONS.get(category)


def as_finite_number(value: Any) -> float | None:
    """``value`` as a finite float (JSON int or float, never bool or string), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


class _Invalid(Exception):
    """Raised inside the type checks to abandon an answer with a short reason."""


def _window(obj: dict, where: str = "") -> tuple[int, int]:
    bounds = []
    for key in ("start", "end"):
        if key not in obj:
            raise _Invalid(f"missing {where}'{key}'")
        number = as_integer(obj[key])
        if number is None:
            raise _Invalid(f"{where}'{key}' is not an integer")
        bounds.append(number)
    return bounds[0], bounds[1]


def _check_localize(obj: dict, gold: dict) -> dict:
    present = obj.get("present")
    if not isinstance(present, bool):
        raise _Invalid("'present' is not a bool")
    if not present:
        return {"present": False}
    start, end = _window(obj)
    return {"present": True, "start": start, "end": end}


def _check_classify(obj: dict, gold: dict) -> dict:
    kind = obj.get("kind")
    if not isinstance(kind, str):
        raise _Invalid("'kind' is not a string")
    if kind == NO_ANOMALY_KIND:
        return {"kind": kind}
    start, end = _window(obj)
    return {"kind": kind, "start": start, "end": end}


def _check_magnitude(obj: dict, gold: dict) -> dict:
    magnitude = as_finite_number(obj.get("magnitude_sigma"))
    if magnitude is None:
        raise _Invalid("'magnitude_sigma' is not a finite number")
    return {"magnitude_sigma": magnitude}


def _channel_name(value: Any, channels: list[str] | None) -> str:
    if isinstance(value, str):
        if channels is not None and value not in channels:
            raise _Invalid(f"unknown channel {value[:40]!r}")
        return value
    index = as_integer(value)
    if index is None:
        raise _Invalid("channel is neither a name nor an integer index")
    if channels is None or not 0 <= index < len(channels):
        raise _Invalid(f"channel index {index} out of range")
    return channels[index]


def _check_all_channels(obj: dict, gold: dict) -> dict:
    events = obj.get("anomalies")
    if not isinstance(events, list):
        raise _Invalid("'anomalies' is not a list")
    channels = gold.get("channels")
    checked = []
    for number, event in enumerate(events):
        if not isinstance(event, dict):
            raise _Invalid(f"anomaly {number} is not an object")
        if "channel" not in event:
            raise _Invalid(f"anomaly {number} has no 'channel'")
        channel = _channel_name(event["channel"], channels)
        start, end = _window(event, f"anomaly {number} ")
        checked.append({"channel": channel, "start": start, "end": end})
    return {"anomalies": checked}


def _check_lead_lag(obj: dict, gold: dict) -> dict:
    direction = obj.get("direction")
    if direction not in DIRECTIONS:
        raise _Invalid("'direction' is not lead, lag or independent")
    lag = as_integer(obj.get("lag_samples"))  # required for "independent" too, as the authors' schema check does
    if lag is None:
        raise _Invalid("'lag_samples' is not an integer")
    return {"direction": direction, "lag_samples": lag}


_TYPE_CHECKS = {
    LOCALIZE: _check_localize,
    CLASSIFY: _check_classify,
    MAGNITUDE: _check_magnitude,
    ALL_CHANNELS: _check_all_channels,
    LEAD_LAG: _check_lead_lag,
}


def check_answer(category: str, obj: dict, gold: dict) -> Extraction:
    """Type-check a parsed object for a precise category; the answer comes back normalised."""
    try:
        return Extraction(_TYPE_CHECKS[category](obj, gold), None)
    except _Invalid as reason:
        return Extraction(None, str(reason))


# "B", "(B)", "B." or "b)": a letter where lm-eval's lettered tasks take one. AnomalyXL has no official
# scorer; the paper's rule (spec/anomalyxl.md) is an exact match on the option text, and its prompts list
# the options without letters, so a letter names no option: it scores 0 and says so.
_LETTER = re.compile(r"\(?[A-Za-z][.:)]?")


def extract_answer(category: str, gold: dict, response: Any) -> Extraction:
    """The whole pipeline for any category: typed precise dict, or MCQ option text."""
    if category not in ALL_CATEGORIES:
        raise ValueError(f"unknown category {category!r}")
    if not isinstance(response, str):
        return Extraction(None, "response is not a string")
    if category in MCQ_CATEGORIES:
        choice = extract_choice(response)
        if not choice:
            return Extraction(choice, "empty answer")
        options = mcq_options(category, gold)
        if options is not None and choice not in options:
            if _LETTER.fullmatch(choice):  # lm-eval habits: the paper's rule matches the option itself
                return Extraction(choice, f"{choice!r} is a letter: answer with the option as written (no letters)")
            return Extraction(choice, "not one of the options")
        return Extraction(choice, None)
    parsed = Extraction(*last_json_object(response))  # reasoning dropped; no type check yet
    if not parsed.valid:
        return parsed
    return check_answer(category, parsed.answer, gold)
