"""ARFBench's answer classes for macro-F1 (paper Table 2; ARFBench's own evaluation).

Options differ per question (timestamps, magnitudes, channel names), so F1 is taken over classes
an option falls in: its rank among the question's options (start, end, magnitude), its channel
count (identification), or its anomaly type with variance and seasonality merged
(categorization). Other categories use the option text itself. Pure functions of (answer, options).
"""

from __future__ import annotations

import re

NO_ANOMALY = "no_anomaly"
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")
NUMBER = re.compile(r"\d+\.?\d*")
DIMENSION = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):")

CLASSES = {
    "anomaly_identification": ("one_channel_small", "one_channel_large", "two_channel", "three_channel", NO_ANOMALY),
    "anomaly_start": ("earliest", "early", "medium", "late", NO_ANOMALY),
    "anomaly_end": ("early", "medium", "late", "latest", NO_ANOMALY),
    "anomaly_magnitude": ("smallest", "small", "medium", "large", NO_ANOMALY),
    "anomaly_categorization": (
        "Level Shift",
        "Transient Spike",
        "Change in Seasonality/Variance",
        "Change in Trend",
        "No Anomaly",
    ),
}


def _is_none(text: str) -> bool:
    return text.strip().lower() in ("no anomaly", "no anomaly among the listed channels")


def channel_count(text: str) -> int:
    """Channels named in an identification option ("a and b", "x:1, y:2", repeated dimensions)."""
    if " and " in text:
        return text.count(" and ") + 1
    separated = re.findall(r", (?=[A-Za-z_])", text)
    if separated:
        return len(separated) + 1
    dimensions = DIMENSION.findall(text)
    if dimensions and dimensions.count(dimensions[0]) > 1:
        return dimensions.count(dimensions[0])
    return 1


def _identification(answer: str, options: list[str]) -> str | None:
    count = channel_count(answer)
    if count == 1:
        singles = sorted(o.strip() for o in options if not _is_none(o) and channel_count(o) == 1)
        return "one_channel_small" if len(singles) < 2 or answer < singles[1] else "one_channel_large"
    return "two_channel" if count == 2 else "three_channel"


def _ranked(position: int, size: int, names: tuple[str, str, str, str]) -> str:
    """names = (first, second, middle, last) of up to four ranks: 1 -> first, 2 -> first/last,
    3 -> first/middle/last, 4+ -> first, second, middle..., last."""
    first, second, middle, last = names
    if size == 1 or position == 0:
        return first
    if position == size - 1:
        return last
    if size >= 4 and position == 1:
        return second
    return middle


def _timestamps(options: list[str], special: str) -> list[str]:
    found = {
        m.group() for o in options if not _is_none(o) and special not in o.lower() for m in [TIMESTAMP.search(o)] if m
    }
    return sorted(found)


def _start(answer: str, options: list[str]) -> str | None:
    if "before the earliest" in answer.lower():
        return "earliest"
    stamps = _timestamps(options, "before the earliest")
    hit = TIMESTAMP.search(answer)
    if not stamps or hit is None or hit.group() not in stamps:
        return None
    position = stamps.index(hit.group())
    if any("before the earliest" in o.lower() for o in options):  # "earliest" is taken by that option
        return "early" if len(stamps) == 1 else _ranked(position, len(stamps), ("early", "medium", "medium", "late"))
    return _ranked(position, len(stamps), ("earliest", "early", "medium", "late"))


def _end(answer: str, options: list[str]) -> str | None:
    if "not resolved" in answer.lower():
        return "latest"
    stamps = _timestamps(options, "not resolved")
    hit = TIMESTAMP.search(answer)
    if not stamps or hit is None or hit.group() not in stamps:
        return None
    position, size = stamps.index(hit.group()), len(stamps)
    if any("not resolved" in o.lower() for o in options):  # "latest" is taken by that option
        return "late" if size == 1 else _ranked(position, size, ("early", "medium", "medium", "late"))
    if size == 1:
        return "latest"
    if size >= 4 and position == size - 2:
        return "late"
    return _ranked(position, size, ("early", "medium", "medium", "latest"))


def _magnitude(answer: str, options: list[str]) -> str | None:
    values = sorted({float(m.group()) for o in options if not _is_none(o) for m in [NUMBER.search(o)] if m})
    hit = NUMBER.search(answer)
    if not values or hit is None or float(hit.group()) not in values:
        return None
    return _ranked(values.index(float(hit.group())), len(values), ("smallest", "small", "medium", "large"))


def _categorization(answer: str, options: list[str]) -> str:
    lowered = answer.lower()
    for needle, label in (
        ("no anomaly", "No Anomaly"),
        ("level shift", "Level Shift"),
        ("transient spike", "Transient Spike"),
        ("change in seasonality", "Change in Seasonality/Variance"),
        ("change in variance", "Change in Seasonality/Variance"),
        ("change in trend", "Change in Trend"),
    ):
        if needle in lowered:
            return label
    return answer


_BINS = {
    "anomaly_identification": _identification,
    "anomaly_start": _start,
    "anomaly_end": _end,
    "anomaly_magnitude": _magnitude,
    "anomaly_categorization": _categorization,
}


def answer_class(category: str, answer: str, options: list[str]) -> str | None:
    """The class of one option; None when it cannot be placed (never for the gold option)."""
    answer = (answer or "").strip()
    if not answer:
        return None
    if category in _BINS:
        if category != "anomaly_categorization" and _is_none(answer):
            return NO_ANOMALY
        return _BINS[category](answer, [str(o).strip() for o in options])
    return answer
