"""TSAIA's answer checkers, as pure functions: the option letter for multiple-choice items; for
analysis items the ground truth's own type decides (a number: within 5 % relative error; a list of
numbers: 1 - sMAPE / 2 over the same length; a string: the same text, case and spacing aside; a
dict: the share of its keys answered right by those rules)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tsbench.core.answers import extract_choice, last_json_object
from tsbench.tasks.base import Scored

RELATIVE_TOLERANCE = 0.05
SMAPE_FLOOR = 1e-2


def check_choice(letter: str, n_options: int, message: str) -> Scored:
    text = extract_choice(message).strip().upper()
    chosen = text[:1]
    if not chosen or chosen not in "ABCDEFGH"[:n_options] or (len(text) > 1 and text[1].isalpha()):
        return Scored(0.0, False, None, "no option letter", {"correct": 0.0})
    correct = float(chosen == letter)
    return Scored(correct, True, {"answer": chosen}, None, {"correct": correct})


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def match(truth: Any, given: Any) -> tuple[float, bool]:
    """(score in [0, 1], whether the answer had the truth's type)."""
    if isinstance(truth, dict):
        if not isinstance(given, dict) or not truth:
            return 0.0, False
        parts = [match(v, given.get(k))[0] if k in given else 0.0 for k, v in truth.items()]
        return float(np.mean(parts)), True
    if isinstance(truth, list):
        want = [_number(v) for v in truth]
        got = [_number(v) for v in given] if isinstance(given, list) else []
        if None in want or len(got) != len(want) or None in got:
            return 0.0, False
        y, yhat = np.asarray(want), np.asarray(got)
        smape = float(np.mean(2 * np.abs(y - yhat) / np.maximum(np.abs(y) + np.abs(yhat), SMAPE_FLOOR)))
        return 1.0 - smape / 2, True
    target = _number(truth)
    if target is not None:
        value = _number(given)
        if value is None:
            return 0.0, False
        return float(abs(value - target) <= RELATIVE_TOLERANCE * max(abs(target), 1e-12)), True
    if isinstance(given, (str, int, float)):
        return float(" ".join(str(given).lower().split()) == " ".join(str(truth).lower().split())), True
    return 0.0, False


def check_analysis(truth: Any, message: str) -> Scored:
    answer, why = last_json_object(message or "")
    if answer is None or "answer" not in answer:
        return Scored(0.0, False, None, why or 'no "answer" in the JSON object', {})
    score, typed = match(truth, answer["answer"])
    return Scored(score, typed, {"answer": answer["answer"]}, None if typed else "the answer has the wrong type", {})
