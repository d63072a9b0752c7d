"""The forecast answer type: sample trajectories from the model's predictive distribution.

CiK evaluates probabilistic forecasts by their samples (25 per instance in its own runs). The
final message holds one JSON object: {"samples": [[v_1, ..., v_H], ...]} (each sample exactly H
finite numbers, in the order of the forecast timestamps); {"forecast": [v_1, ..., v_H]} is a point
forecast, scored as a single sample (its CRPS is then the absolute error).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tsbench.core.answers import last_json_object

SAMPLES_ASKED = 25
MAX_SAMPLES = 1000


def _row(values: Any, horizon: int) -> list[float] | str:
    if not isinstance(values, list):
        return "a sample is not a list"
    if len(values) != horizon:
        return f"a sample has {len(values)} values, the horizon is {horizon}"
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return "a sample holds a value that is not a finite number"
        out.append(float(value))
    return out


def parse_forecast(message: str, horizon: int) -> tuple[np.ndarray | None, str | None]:
    """(samples (n, H), None) or (None, why the answer is unusable). Never raises."""
    answer, why = last_json_object(message or "")
    if answer is None:
        return None, why
    if "samples" in answer:
        raw = answer["samples"]
        if not isinstance(raw, list) or not raw:
            return None, '"samples" must be a non-empty list of lists'
        if len(raw) > MAX_SAMPLES:
            return None, f"at most {MAX_SAMPLES} samples"
    elif "forecast" in answer:
        raw = [answer["forecast"]]
    else:
        return None, 'no "samples" (or "forecast") in the answer'
    rows = []
    for values in raw:
        row = _row(values, horizon)
        if isinstance(row, str):
            return None, row
        rows.append(row)
    return np.asarray(rows, dtype=np.float64), None


def answer_format(horizon: int) -> str:
    return (
        f'Answer with one JSON object {{"samples": [[v_1, ..., v_{horizon}], ...]}}: {SAMPLES_ASKED} sample '
        f"trajectories drawn from your predictive distribution, each with exactly {horizon} numbers in the order "
        'of the timestamps above (a single {"forecast": [...]} is scored as one sample).'
    )
