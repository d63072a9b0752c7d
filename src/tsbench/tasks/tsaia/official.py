"""TSAIA's own evaluators (github.com/USC-Melady/TSAIA, gen_eval.py), one per question type, as pure
functions of (response, ground truth, context, constraint).

Each returns what the official `evaluate()` returns that matters: `status` (1 solved, 0 not; the
benchmark's success rate is its mean), the type's sub-metric (mape, accuracy, f1, absolute_diff or the
backtest result, reported over solved items) and `error` when the official code would have raised
(a wrong shape, NaN, a wrong type: status 0). The same numpy operations run in the same order, so
shapes the official code broadcasts are broadcast here too; F1 is sklearn's binary F1 with its
input checks, the trend a least-squares slope as LinearRegression fits it.

In TSAIA the agent leaves its answer in a kernel variable `predictions`; here the answer is the
JSON value of the reply's {"answer": ...}, made an array of the dtype the item's output
requirement names (`response_for`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

Result = dict[str, Any]
TRADING_DAYS = 252


class OfficialError(Exception):
    """Where the official evaluator raises (and so returns status 0 with an error)."""


def _check(condition: Any, message: str) -> None:
    if not condition:
        raise OfficialError(message)


def _no_nan(response: Any) -> None:
    _check(np.any(np.isnan(response)) == False, "Response contains NaN values")  # noqa: E712 (as official)


# ---------------------------------------------------------------------------------- forecasting --


def easy_stock(response: Any, truth: Any, context: dict, constraint: dict) -> Result:
    prediction, future = response, np.array(truth, copy=True)
    threshold = constraint.get("threshold", 1)
    names = context["names"]
    if constraint.get("future price", None):
        _no_nan(response)
        _check(len(prediction) == len(future), "Prediction and ground truth data have different lengths")
        prediction = prediction + 1e-6
        future += 1e-6  # in place, as official: an integer truth cannot take it and raises
        mape = np.mean(np.mean(np.abs((prediction - future) / future), axis=0))
        return {"status": int(mape < threshold), "mape": float(mape)}
    if constraint.get("future volatility", None):
        _no_nan(response)
        volatility = np.std(future, axis=0)
        _check(len(prediction) == len(volatility), "Prediction and ground truth data have different lengths")
        mape = np.mean(np.abs((prediction - volatility) / volatility))
        return {"status": int(mape < threshold), "mape": float(mape)}
    if constraint.get("future trend", None):
        trend = [detect_trend(future[:, i]) for i in range(len(names))]
        _check(len(prediction) == len(trend), "Prediction and ground truth data have different lengths")
        correct = np.sum([trend[n].upper() == prediction[n].upper() for n in range(len(names))])
        accuracy = correct / len(names)
        return {"status": int(accuracy > 0), "accuracy": float(accuracy)}
    raise OfficialError("Unknown constraint")


def detect_trend(values: np.ndarray) -> str:
    """increasing / decreasing / unknown by the least-squares slope (threshold 0.01), NaN dropped."""
    y = pd.Series(values).dropna().to_numpy(dtype=float)
    _check(len(y) > 0, "Found array with 0 sample(s)")
    t = np.arange(len(y), dtype=float)
    t_centred = t - t.mean()
    denominator = float(np.dot(t_centred, t_centred))
    slope = float(np.dot(t_centred, y - y.mean()) / denominator) if denominator > 0 else 0.0
    return "increasing" if slope > 1e-2 else ("decreasing" if slope < -1e-2 else "unknown")


def _load_constraints(constraint: dict, forecast_max, forecast_min, ramp, variability) -> str | None:
    max_load, min_load = constraint.get("max_load", None), constraint.get("min_load", None)
    ramp_rate, variability_limit = (
        constraint.get("load_ramp_rate", None),
        constraint.get("load_variability_limit", None),
    )
    if max_load and (forecast_max - max_load) > 1e-4:
        return "max_load"
    if min_load and (min_load - forecast_min) > 1e-4:
        return "min_load"
    if ramp_rate is not None and (ramp - ramp_rate) > 1e-4:
        return "load_ramp_rate"
    if variability_limit is not None and (variability - variability_limit) > 1e-4:
        return "load_variability_limit"
    return None


def electricity(response: Any, truth: Any, context: dict, constraint: dict) -> Result:
    _no_nan(response)
    _check(len(context["target_var"]) == 1, "Only one target variable is allowed")
    forecast, truth = response, np.array(truth, copy=True)
    constraint = {**constraint, "threshold": constraint.get("threshold", 1)}
    _check(len(constraint) == 2, "Only one constraint is allowed in addition to the MAPE threshold value")
    _check(len(forecast) == len(truth), "Length of forecast and ground truth data do not match")
    changes = [forecast[i] - forecast[i - 1] for i in range(1, len(forecast))]
    ramp = max(abs(change) for change in changes)
    spread = max(forecast) - min(forecast)
    forecast_max, forecast_min = max(forecast), min(forecast)
    forecast = forecast + 1e-6
    truth += 1e-6
    mape = np.mean(np.mean(np.abs((forecast - truth) / truth), axis=0))
    broken = _load_constraints(constraint, forecast_max, forecast_min, ramp, spread)
    status = 0 if broken else int(mape <= constraint["threshold"])
    return {"status": status, "mape": float(mape), **({"violated": broken} if broken else {})}


def electricity_multi(response: Any, truth: Any, context: dict, constraint: dict) -> Result:
    _no_nan(response)
    _check(len(context["target_var"]) == 1, "Only one target variable is allowed")
    truth = np.asarray(truth)
    constraint = {**constraint, "threshold": constraint.get("threshold", 1)}
    _check(len(constraint) == 2, "Only one constraint is allowed in addition to the MAPE threshold value")
    _check(response.shape == truth.shape, "Prediction and Ground Truth data have different shapes")
    forecast_max, forecast_min = np.max(response), np.min(response)
    ramp, spread = 0, 0
    for i in range(response.shape[-1]):
        ramp = max(ramp, max([abs(response[j, i] - response[j - 1, i]) for j in range(1, len(response))]))
        spread = max(spread, max(response[:, i]) - min(response[:, i]))
    forecast = response.flatten() + 1e-6
    flat_truth = truth.flatten()
    flat_truth += 1e-6
    mape = np.mean(np.mean(np.abs((forecast - flat_truth) / flat_truth), axis=0))
    broken = _load_constraints(constraint, forecast_max, forecast_min, ramp, spread)
    status = 0 if broken else int(mape <= constraint["threshold"])
    return {"status": status, "mape": float(mape), **({"violated": broken} if broken else {})}


# ------------------------------------------------------------------------------------- anomalies --


def adjust(truth: np.ndarray, prediction: np.ndarray) -> None:
    """The point adjustment of TSAIA's `adjustment` (in place): a predicted point inside a true
    anomalous segment marks the whole segment (never position 0 when walking back, as official)."""
    active = False
    for i in range(len(truth)):
        if truth[i] == 1 and prediction[i] == 1 and not active:
            active = True
            for j in range(i, 0, -1):
                if truth[j] == 0:
                    break
                if prediction[j] == 0:
                    prediction[j] = 1
            for j in range(i, len(truth)):
                if truth[j] == 0:
                    break
                if prediction[j] == 0:
                    prediction[j] = 1
        elif truth[i] == 0:
            active = False
        if active:
            prediction[i] = 1


def _target_kind(y: np.ndarray) -> str:
    """sklearn's type_of_target for the arrays these evaluators pass (1-D or one column)."""
    if y.ndim > 2 or (y.ndim == 2 and y.shape[1] > 1):
        return "unsupported"
    values = y.ravel()
    if values.dtype.kind == "f":
        _check(np.isfinite(values).all(), "Input contains NaN or infinity")
        if np.any(values != values.astype(int)):
            return "continuous"
    elif values.dtype.kind not in "biu":
        return "unsupported"
    return "binary" if len(np.unique(values)) <= 2 else "multiclass"


def binary_f1(truth: np.ndarray, prediction: np.ndarray) -> float:
    """sklearn's precision_recall_fscore_support(average='binary') F-score, raising where it does."""
    kinds = {_target_kind(truth), _target_kind(prediction)}
    _check(kinds <= {"binary", "multiclass"}, f"Classification metrics can't handle a mix of {sorted(kinds)} targets")
    y, p = truth.ravel(), prediction.ravel()
    _check(len(y) == len(p), "inconsistent numbers of samples")
    labels = np.union1d(y, p)
    _check("multiclass" not in kinds and len(labels) <= 2, "Target is multiclass but average='binary'")
    _check(1 in labels or len(labels) < 2, "pos_label=1 is not a valid label")
    true_positives = float(np.sum((y == 1) & (p == 1)))
    denominator = float(np.sum(y == 1)) + float(np.sum(p == 1))
    return 2 * true_positives / denominator if denominator > 0 else 0.0


def anomaly(response: Any, truth: Any, context: dict, constraint: dict) -> Result:
    prediction, labels = response, np.asarray(truth)
    threshold = constraint.get("threshold", 1e-6)
    if len(prediction.shape) == 1:
        prediction = prediction.reshape(-1, 1)
    _no_nan(response)
    _check(len(prediction) == len(labels), "Prediction and ground truth data have different lengths")
    adjust(labels, prediction)
    f1 = binary_f1(labels, prediction)
    return {"status": 1, "f1": f1} if f1 >= threshold else {"status": 0}


def anomaly_multi(response: Any, truth: Any, context: dict, constraint: dict) -> Result:
    prediction, labels = response, np.asarray(truth)
    threshold = constraint.get("threshold", 1e-6)
    _no_nan(response)
    _check(len(prediction) == len(labels), "Prediction and ground truth data have different lengths")
    truths, predictions = [], []
    for i in range(prediction.shape[1]):
        column, predicted = labels[:, i], prediction[:, i]
        adjust(column, predicted)
        truths.append(column)
        predictions.append(predicted)
    f1 = binary_f1(np.array(truths).reshape(-1, 1), np.array(predictions).reshape(-1, 1))
    return {"status": 1, "f1": f1} if f1 >= threshold else {"status": 0}


# ---------------------------------------------------------------------------------------- causal --


def causal(response: Any, truth: Any, context: dict, constraint: dict) -> Result:
    _no_nan(response)
    matrix, expected = response, np.asarray(truth)
    _check(matrix.shape == expected.shape, "Response matrix shape does not match ground truth matrix shape")
    accuracy = np.sum(matrix == expected) / matrix.size
    _pairs_compare(matrix, expected)
    _check(set(matrix.flatten()) == {0, 1}, "Response matrix should contain 0 and 1 values only")
    pair = constraint.get("domain_pair", None)
    if pair is not None and matrix[pair[0], pair[1]] != 1:
        return {"status": 0}
    return {"status": 1, "strict_success": int(accuracy == 1.0), "accuracy": float(accuracy)}


def _pairs_compare(matrix: np.ndarray, expected: np.ndarray) -> None:
    """Where the official loop over (i, j) pairs raises: a 1-D answer (no second axis) or cells that
    are arrays of more than one value (`if array != array`)."""
    if matrix.ndim == 0 or matrix.shape[0] == 0:
        return
    _check(matrix.ndim >= 2, "tuple index out of range")
    cell = math.prod(matrix.shape[2:])
    _check(cell == 1 or matrix.shape[1] == 0, "The truth value of an array with more than one element is ambiguous")


# ---------------------------------------------------------------------------------------- stocks --


def stock_threshold(response: Any, truth: Any, context: dict, constraint: dict) -> Result:
    _no_nan(response)
    _check(isinstance(response, (int, float)), "Response is not a numerical value")
    threshold = constraint.get("threshold", 0.05)
    diff = abs(float(response) - truth)
    return {"status": int(bool(diff <= threshold)), "absolute_diff": float(np.asarray(diff).ravel()[0])}


def backtest(close: np.ndarray, position: np.ndarray, cash: float) -> dict[str, float]:
    """TSAIA's evaluate_investment without the Sharpe ratio (it needs the repository's risk-free
    series): all in at a buy signal, all out at a sell signal, valued at each close."""
    shares, value = 0.0, []
    for price, signal in zip(close, position):
        if signal == 1 and cash > 0:
            shares, cash = cash / price, 0
        elif signal == -1 and shares > 0:
            cash, shares = shares * price, 0
        value.append(cash + shares * price)
    portfolio = pd.Series(value, dtype=float)
    cumulative = portfolio.iloc[-1] / portfolio.iloc[0] - 1
    drawdown = portfolio / portfolio.cummax() - 1
    return {
        "Cumulative Return": float(cumulative),
        "Annualized Return": float((1 + cumulative) ** (TRADING_DAYS / len(portfolio)) - 1),
        "Max Drawdown": float(-drawdown.min()),
    }


def stock_investment(response: Any, truth: Any, context: dict, constraint: dict) -> Result:
    _check(len(truth) == len(response), "Length of response and ground truth data should be the same")
    frame = truth.copy()
    frame["Position"] = response
    result = backtest(frame["Close"].to_numpy(), frame["Position"].to_numpy(), constraint["budget"])
    return {"status": int(result["Cumulative Return"] >= 0), "result": result}


# ------------------------------------------------------------------------------------ the table --

Evaluator = Callable[[Any, Any, dict, dict], Result]
# question type (its part before "-") -> (evaluator, the dtype its output requirement names, sub-metric)
EVALUATORS: dict[str, tuple[Evaluator, str | None, str]] = {
    "easy_stock": (easy_stock, "float64", "mape"),
    "electricity_prediction": (electricity, "float64", "mape"),
    "electricity_prediction_single": (electricity, "float64", "mape"),
    "electricity_prediction_large": (electricity_multi, "float64", "mape"),
    "climate_anomaly": (anomaly, "float64", "f1"),
    "climate_anomaly_large": (anomaly_multi, "float64", "f1"),
    "ecg_anomaly": (anomaly, "float64", "f1"),
    "energy_anomaly": (anomaly_multi, "float64", "f1"),
    "causal_relation": (causal, "float64", "accuracy"),
    "causal_knowledge": (causal, "float64", "accuracy"),
    "stock_rv_estimation": (stock_threshold, None, "absolute_diff"),
    "stock_ir_estimation": (stock_threshold, None, "absolute_diff"),
    "stock_investment": (stock_investment, "int64", "result"),
}
TREND_DTYPE = "str"  # easy_stock-future trend: "np.array([...], dtype=<U)"


def family_of(question_type: str) -> str:
    return question_type.split("-")[0]


def response_for(question_type: str, answer: Any) -> Any:
    """The `predictions` an agent would have left: an array of the type's dtype (a number as given)."""
    _, dtype, _ = EVALUATORS[family_of(question_type)]
    if question_type.endswith("future trend"):
        dtype = TREND_DTYPE
    if dtype is None:
        return answer
    try:
        return np.array(answer, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise OfficialError(f"the answer is not an array of {dtype} ({str(exc)[:60]})") from None


def evaluate(question_type: str, answer: Any, truth: Any, context: dict, constraint: dict) -> Result:
    """The official evaluation of one answer; {"status": 0, "error": 1, "message": ...} where it raises."""
    family = family_of(question_type)
    if family not in EVALUATORS:
        raise KeyError(f"no official evaluator for question type {question_type!r}")
    try:
        with np.errstate(all="ignore"):  # a zero volatility divides by zero there too: the mape is inf or NaN
            return EVALUATORS[family][0](response_for(question_type, answer), truth, context, constraint)
    except (OfficialError, TypeError, ValueError, IndexError, KeyError, AttributeError, ZeroDivisionError) as exc:
        return {"status": 0, "error": 1, "message": str(exc)[:200] or type(exc).__name__}


def is_problematic(question_type: str, truth: Any) -> bool:
    """The official run's `check_problematic`: the question is skipped (and counted unsolved)."""
    try:
        if family_of(question_type) == "electricity_prediction" and np.min(truth) < 1e-4:
            return True
        values = truth.to_numpy() if isinstance(truth, pd.DataFrame) else truth
        return bool(np.any(np.isnan(values)))
    except (TypeError, ValueError):
        return False


def mc_correct(answer: Any, letter: str) -> bool:
    """The official multiple-choice check: `predictions == answer`, the letter exactly."""
    return bool(answer == letter) if isinstance(answer, (str, int, float, bool)) or answer is None else False
