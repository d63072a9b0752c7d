"""The text primitives the offline judge reads with: a report cut to a length bound, its clauses
(sentences, `;` parts, lines), the numbers and dates it writes, and whether a written number states a
value to rounding. Binding values to subjects is reading.py's.

A clause is a *listing* when it holds more than LISTING_NUMBERS numbers or more than LISTING_LABELS
distinct options of one enum: it states no single value.
"""

from __future__ import annotations

import re
from typing import Any

REPORT_CHAR_LIMIT = 4000  # a report is cut here before any judging (about 600 words)
LISTING_NUMBERS = 8
LISTING_LABELS = 2

_DATE = re.compile(r"\b\d{4}-\d{2}(?:-\d{2})?\b")
_NUM = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?")
_CLAUSE = re.compile(r"(?<=[.!?;])\s+|\n+")


def cut(report: str, limit: int = REPORT_CHAR_LIMIT) -> str:
    """The report as the judge reads it: at most `limit` characters, cut at a word boundary."""
    if len(report) <= limit:
        return report
    head = report[:limit]
    space = head.rfind(" ")
    return head[:space] if space > limit // 2 else head


def clauses(text: str) -> list[str]:
    return [part.strip() for part in _CLAUSE.split(text) if part.strip()]


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


def _decimals(value: float) -> int:
    """How many decimals a number is written with (1457.0 -> 0, 41.64 -> 2)."""
    text = repr(float(value))
    if "e" in text or "n" in text:
        return 6
    return len(text.partition(".")[2].rstrip("0"))


def number_matches(x: float, y: float) -> bool:
    """The written number `x` states `y` to rounding: `x` is `y` rounded to the decimals `x` is
    written with (1457 or 1457.3 for 1457.3), and close to it (a "3" does not state 2.6). A
    neighbouring value (1450 for 1457.3; last period's 891.8 for 890.5) or a different figure at more
    decimals (-0.31 for -0.30) does not."""
    if abs(x - y) <= 1e-9:
        return True
    return abs(x - y) <= max(0.05, 0.005 * abs(y)) and abs(round(y, _decimals(x)) - x) <= 1e-9


def phrase(value: Any) -> str:
    return str(value).strip().lower().replace("_", " ")


def mentions(text: str, value: Any) -> bool:
    """Whether the text states `value`: a number (to rounding), else the label or phrase, case-
    and underscore-insensitive, on word boundaries."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, float)):
        return any(number_matches(n, float(value)) for n in numbers_in(text))
    wanted = phrase(value)
    if not wanted:
        return False
    if _DATE.fullmatch(wanted):
        return wanted in dates_in(text)
    haystack = text.lower().replace("_", " ")
    return re.search(rf"(?<![\w]){re.escape(wanted)}(?![\w])", haystack) is not None


def is_listing(clause: str, enums: list[list[str]], labels: int = LISTING_LABELS) -> bool:
    """A clause that sprays values: many numbers, or more than `labels` options of one enum (a judged
    answer such as a cause that names every driver names none)."""
    if len(numbers_in(clause)) > LISTING_NUMBERS or len(dates_in(clause)) > LISTING_NUMBERS:
        return True
    return any(sum(mentions(clause, option) for option in options) > labels for options in enums)
