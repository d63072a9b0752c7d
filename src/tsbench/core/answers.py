"""Pure helpers every scorer shares: window IoU, the last JSON object of a message, and the
multiple-choice answer rule (paper Appendix E.1 and E.7).

Kept here, not in a family, so a new family scores the way AnomalyXL does without importing it.
Windows are half-open sample intervals [start, end).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from tsbench.core.text import json_object_spans, strip_reasoning

Window = tuple[int, int]
INTEGER_LIMIT = 2**53

_ANSWER_LINE = re.compile(r"^[ \t]*answer:([^\r\n]*)", re.IGNORECASE | re.MULTILINE)
_QUOTES = ("'", '"')


def iou(a: Window, b: Window) -> float:
    """Intersection over union of two half-open windows; 0 when either is empty or they are disjoint."""
    (a_start, a_end), (b_start, b_end) = a, b
    if a_start >= a_end or b_start >= b_end:
        return 0.0
    intersection = min(a_end, b_end) - max(a_start, b_start)
    if intersection <= 0:
        return 0.0
    return intersection / ((a_end - a_start) + (b_end - b_start) - intersection)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def last_json_object(message: str) -> tuple[dict | None, str | None]:
    """(object, None) for the last top-level ``{...}`` of the message after reasoning is dropped,
    parsed as strict JSON; (None, why) when there is none or it does not parse. No falling back
    to an earlier object: the last one is the answer."""
    text = strip_reasoning(message)
    spans = json_object_spans(text)
    if not spans:
        return None, "no JSON object"
    start, end = spans[-1]
    try:
        value = json.loads(text[start:end], parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None, "invalid JSON"
    if not isinstance(value, dict):
        return None, "not a JSON object"
    return value, None


def as_integer(value: Any) -> int | None:
    """A JSON int or integral float within +-2**53 as int; bools, strings and the rest are None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    else:
        return None
    return number if abs(number) <= INTEGER_LIMIT else None


def trim_answer(text: str) -> str:
    """White space and one pair of surrounding quotes removed."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in _QUOTES:
        text = text[1:-1].strip()
    return text


def extract_choice(message: str) -> str:
    """The option a multiple-choice message chose (may be ""; never raises).

    After reasoning is dropped: the ``answer`` string of the last top-level JSON object that has
    one; else the rest of the last ``answer:`` line (any case; the next non-blank line when that
    rest is blank); else the whole message. Then white space and one pair of quotes go.
    """
    if not isinstance(message, str):
        return ""
    text = strip_reasoning(message)
    for start, end in reversed(json_object_spans(text)):
        try:
            value = json.loads(text[start:end], parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and isinstance(value.get("answer"), str):
            return trim_answer(value["answer"])
    matches = list(_ANSWER_LINE.finditer(text))
    if not matches:
        return trim_answer(text)
    last = matches[-1]
    rest = last.group(1)
    if not rest.strip():
        rest = next((line for line in text[last.end() :].splitlines() if line.strip()), "")
    return trim_answer(rest)
