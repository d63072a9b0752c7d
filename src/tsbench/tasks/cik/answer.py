"""The forecast answer: how a CiK reply is read, by its keys.

Formats (each read from the keys of a JSON object, never guessed from the shape of a list):

* quantiles, TimeClaw's format (its CiK prompt, the default here): {"levels": [q_1, ..., q_Q],
  "samples": [[v_1(t_1), ..., v_Q(t_1)], ..., [.. (t_H)]]}: one row per forecast step, each holding
  the values at the levels. Scored by CiK's RCRPS with the Q level values of each step as the
  forecast's members (the rows transposed), sMAPE on the level nearest 0.5, as TimeClaw does.
* {"forecast": [v_1, ..., v_H]}: a point forecast (one member: its CRPS is the absolute error), or a
  bare list of numbers.
* {"samples": [[v_1, ..., v_H], ...]} without "levels": sample trajectories, the format of datasets
  generated before quantiles (gold `answer_format` "samples"). Where quantiles were asked for, such
  an object is ambiguous (rows of quantiles or trajectories?) and unusable.

Parsers (`parser`):

* "timeclaw" (default): TimeClaw's `parse_forecast` (timeclaw/evaluation/parsers.py, the code behind
  its published tables) read by keys. Fenced ```json blocks first, in order, then the JSON values of
  the text; within an object "forecast" before "levels"/"samples"; the first readable one wins; a
  point forecast or the quantile rows are cut to H or padded with their last entry (TimeClaw's
  length policy; `Reading.note` says when). The one departure: TimeClaw, finding no readable fenced
  block, takes the first bare list of three or more numbers anywhere in the text, which reads an
  unfenced quantile object's "levels" (or a trajectory object's first sample) as a point forecast;
  here the text's JSON objects are read by their keys first, and a bare list counts only when it
  is not inside one. <think> blocks are never read.
* "timeclaw-repo": TimeClaw's parser exactly, that fallback included (the golden vectors in
  tests/golden/timeclaw/ pin both readings against the authors' code).
* "strict": read by keys, every count exact (H rows, H values, Q values per row); nothing padded.

Values must be finite numbers to be scored (JSON NaN parses, but a forecast holding one is unusable;
TimeClaw's scorer would drop it from the mean silently).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from tsbench.core.text import fenced_json_blocks, json_values, strip_reasoning

SAMPLES_ASKED = 25
MAX_SAMPLES = 1000
LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
ANSWER_FORMATS = ("quantiles", "samples")
PARSERS = ("timeclaw", "timeclaw-repo", "strict")
LEGACY_FORMAT = "samples"  # gold without an answer_format: generated when trajectories were asked for

# TimeClaw's two searches: a ```json (or bare ```) fence holding one object or list (its regex,
# r"```(?:json)?\s*(\{.*?\}|\[.*?\])\s*```", is quadratic on unclosed fences: `fenced_json_blocks`
# finds the same blocks in one pass), and a bare list of three or more number-like tokens.
_NUMBER_LIKE = r"[-+]?\d[\d\.\-+eE]*"
_BARE_LIST = re.compile(rf"\[\s*(?:{_NUMBER_LIKE}\s*,\s*){{2,}}{_NUMBER_LIKE}\s*\]")


@dataclass
class Reading:
    """What a reply says, before scoring: kind "point" | "quantile" | "samples"."""

    kind: str
    values: list  # point: H numbers; quantile: H rows of len(levels); samples: trajectories
    levels: list[float] | None = None
    note: str | None = None  # how the reply's count was fitted to the horizon

    def as_dict(self) -> dict[str, Any]:
        """TimeClaw's parsed form ({"kind", "values"} or {"kind", "levels", "samples"})."""
        if self.kind == "point":
            return {"kind": "point", "values": self.values}
        if self.kind == "quantile":
            return {"kind": "quantile", "levels": self.levels, "samples": self.values}
        return {"kind": "samples", "samples": self.values}


@dataclass
class Forecast:
    """A usable forecast: `members` (n, H) are what CRPS scores, `point` (H,) what sMAPE scores."""

    reading: Reading
    members: np.ndarray
    point: np.ndarray


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float))  # bools too, as TimeClaw's isinstance check lets them


def _fit(entries: list, horizon: int, exact: bool) -> tuple[list | None, str | None]:
    """Cut to the horizon or pad with the last entry (TimeClaw's policy); `exact` refuses instead."""
    if len(entries) == horizon:
        return entries, None
    if exact:
        return None, f"{len(entries)} steps, the horizon is {horizon}"
    if len(entries) > horizon:
        return entries[:horizon], f"cut from {len(entries)} to the horizon {horizon}"
    return entries + [entries[-1]] * (horizon - len(entries)), f"padded from {len(entries)} to {horizon}"


def _read(value: Any, horizon: int, answer_format: str, exact: bool) -> tuple[Reading | None, str | None]:
    """(reading, None), or (None, why) for a value that is not a forecast by its keys. Raises
    ValueError or TypeError where TimeClaw's parser does (a listed value float() cannot read)."""
    if isinstance(value, list):
        if value and all(_is_number(v) for v in value):
            fitted, note = _fit([float(v) for v in value], horizon, exact)
            return (Reading("point", fitted, note=note), None) if fitted is not None else (None, note)
        return None, "a list that is not a list of numbers"
    if not isinstance(value, dict):
        return None, "not a JSON object or list"
    forecast = value.get("forecast")
    if isinstance(forecast, list) and forecast and all(_is_number(v) for v in forecast):
        fitted, note = _fit([float(v) for v in forecast], horizon, exact)
        return (Reading("point", fitted, note=note), None) if fitted is not None else (None, note)
    if "levels" in value and "samples" in value:
        levels, rows = value["levels"], value["samples"]
        if not (isinstance(levels, list) and isinstance(rows, list) and rows):
            return None, '"levels" and "samples" must be lists, "samples" not empty'
        if not all(isinstance(row, list) and len(row) == len(levels) for row in rows):
            return None, f'every row of "samples" must hold one value per level ({len(levels)})'
        rows = [[float(v) for v in row] for row in rows]
        levels = [float(q) for q in levels]
        fitted, note = _fit(rows, horizon, exact)
        return (Reading("quantile", fitted, levels, note), None) if fitted is not None else (None, note)
    if "samples" in value:
        if answer_format == "quantiles":
            return None, '"samples" without "levels": quantile rows or trajectories? (give "levels")'
        raw = value["samples"]
        if not isinstance(raw, list) or not raw or not all(isinstance(s, list) for s in raw):
            return None, '"samples" must be a non-empty list of lists'
        if any(len(s) != horizon for s in raw):
            return None, f"a sample does not have the horizon's {horizon} values"
        if not all(_is_number(v) for s in raw for v in s):
            return None, "a sample holds a value that is not a number"
        return Reading("samples", [[float(v) for v in s] for s in raw]), None
    return None, 'no "forecast", "levels" + "samples" or "samples" in the answer'


def _json_values(text: str) -> list[Any]:
    """Every top-level JSON object or list of the text, in order (a value nested in another is not one)."""
    return [value for _start, _end, value in json_values(text)]


def _loads(blob: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(blob)
    except (ValueError, RecursionError):  # RecursionError: nested past the stack ("[" * 5000)
        return False, None


def read_reply(
    message: str, horizon: int, *, answer_format: str = "quantiles", parser: str = "timeclaw"
) -> tuple[Reading | None, str | None]:
    """(reading, None) or (None, why the reply holds no forecast). Never raises."""
    if parser not in PARSERS:
        raise ValueError(f"unknown CiK parser {parser!r} (one of {', '.join(PARSERS)})")
    text = message or ""
    if parser != "timeclaw-repo":
        text = strip_reasoning(text)
    fenced = [value for ok, value in map(_loads, fenced_json_blocks(text)) if ok]
    if parser == "timeclaw-repo":
        bare = _BARE_LIST.search(text)
        candidates = fenced + ([value for ok, value in [_loads(bare.group(0))] if ok] if bare else [])
    else:  # fenced blocks, then the text's objects, then its lists of three or more (TimeClaw's bare list)
        values = _json_values(text)
        objects = [v for v in values if isinstance(v, dict)]
        candidates = fenced + objects + [v for v in values if isinstance(v, list) and len(v) >= 3]
    why = "no JSON forecast in the reply"
    for value in candidates:
        try:
            reading, reason = _read(value, horizon, answer_format, exact=parser == "strict")
        except (TypeError, ValueError) as exc:
            return None, f"a listed value is not a number ({exc}); TimeClaw's parser raises here"
        if reading is not None:
            return reading, None
        if parser != "timeclaw-repo" and isinstance(value, dict):
            why = reason
    return None, why


def median_level(levels: list[float]) -> int:
    """The level TimeClaw's sMAPE reads: the first one nearest 0.5."""
    return int(np.argmin([abs(q - 0.5) for q in levels]))


def forecast_of(reading: Reading, horizon: int) -> tuple[Forecast | None, str | None]:
    """The members CRPS scores and the point sMAPE scores, or why the reading cannot be scored."""
    if reading.kind == "quantile":
        if not reading.levels:
            return None, "no quantile levels"
        members = np.asarray(reading.values, dtype=np.float64).T
        point = members[median_level(reading.levels)]
    elif reading.kind == "point":
        members = np.asarray([reading.values], dtype=np.float64)
        point = members[0]
    else:
        if len(reading.values) > MAX_SAMPLES:
            return None, f"at most {MAX_SAMPLES} samples"
        members = np.asarray(reading.values, dtype=np.float64)
        point = np.median(members, axis=0)
    if members.shape[1] != horizon:
        return None, f"{members.shape[1]} steps, the horizon is {horizon}"
    if not np.all(np.isfinite(members)):
        return None, "the forecast holds a value that is not a finite number"
    return Forecast(reading, members, point), None


def parse_forecast(
    message: str, horizon: int, *, answer_format: str = "quantiles", parser: str = "timeclaw"
) -> tuple[Forecast | None, str | None]:
    """(forecast, None) or (None, why the answer is unusable). Never raises on the message."""
    reading, why = read_reply(message, horizon, answer_format=answer_format, parser=parser)
    if reading is None:
        return None, why
    return forecast_of(reading, horizon)


def answer_format(horizon: int, kind: str = "quantiles") -> str:
    """The answer instruction of the question (TimeClaw's quantile format, or trajectories)."""
    if kind == "samples":
        return (
            f'Answer with one JSON object {{"samples": [[v_1, ..., v_{horizon}], ...]}}: {SAMPLES_ASKED} sample '
            f"trajectories drawn from your predictive distribution, each with exactly {horizon} numbers in the "
            'order of the timestamps above (a single {"forecast": [...]} is scored as one sample).'
        )
    levels = ", ".join(f"{q:g}" for q in LEVELS)
    return (
        "Answer with one fenced JSON block:\n```json\n"
        f'{{"levels": [{levels}], "samples": [[q1_t1, ..., q{len(LEVELS)}_t1], ...]}}\n```\n'
        f'"samples" must hold exactly {horizon} rows, one per timestamp above in order, each the {len(LEVELS)} '
        "values of your forecast at the levels. If you can only give a point forecast, answer with "
        f'```json\n{{"forecast": [v_1, ..., v_{horizon}]}}\n``` instead.'
    )


__all__ = [
    "ANSWER_FORMATS",
    "LEVELS",
    "PARSERS",
    "Forecast",
    "Reading",
    "answer_format",
    "forecast_of",
    "median_level",
    "parse_forecast",
    "read_reply",
]
