"""From per-row scores to the numbers a results table reports (paper Appendix E.8).

A category's number is the unweighted mean of its rows, so an easy row and a hard row weigh the
same; MCQ categories add macro-F1 over their options. Confidence intervals are percentile
bootstraps of the mean, and comparisons between two systems resample the same rows for both
(paired), which is what makes small differences on a shared test split detectable. A benchmark
whose own protocol weights or caps its metric (CiK) says so in its columns (`tasks.base.Aggregate`),
and its number is then `weighted_capped_mean`. All randomness comes from an explicit seed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

# Resample in chunks so memory stays bounded for long score vectors.
_BOOTSTRAP_CELLS_PER_CHUNK = 4_000_000


def category_means(rows: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Unweighted mean score per category from (category, score) pairs, in first-seen order."""
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    for category, value in rows:
        totals[category] = totals.get(category, 0.0) + float(value)
        counts[category] = counts.get(category, 0) + 1
    return {category: totals[category] / counts[category] for category in totals}


def overall_mean(rows: Iterable[tuple[str, float]]) -> float:
    """Mean over all rows, not reweighted by category size (a configuration's number)."""
    values = [float(value) for _, value in rows]
    if not values:
        raise ValueError("no rows to average")
    return sum(values) / len(values)


def macro_f1(golds: Sequence[str], preds: Sequence[str], options: Sequence[str] | None = None) -> float:
    """Mean per-class F1 over the classes that occur in the gold or predicted labels.

    With ``options``, classes are the options that occur in either list; a prediction that is not
    an option belongs to no class but is still a miss for its row's gold class. Without
    ``options``, every distinct label that occurs is a class. Per-class F1 is 2TP/(2TP+FP+FN).
    """
    if len(golds) != len(preds):
        raise ValueError(f"{len(golds)} gold labels but {len(preds)} predictions")
    if not golds:
        raise ValueError("no rows to score")
    occurring = set(golds) | set(preds)
    candidates = dict.fromkeys(options) if options is not None else sorted(occurring)
    classes = [label for label in candidates if label in occurring]
    if not classes:
        return 0.0
    f1_values = []
    for label in classes:
        tp = sum(1 for gold, pred in zip(golds, preds) if gold == label and pred == label)
        fp = sum(1 for gold, pred in zip(golds, preds) if gold != label and pred == label)
        fn = sum(1 for gold, pred in zip(golds, preds) if gold == label and pred != label)
        f1_values.append(2 * tp / (2 * tp + fp + fn))
    return sum(f1_values) / len(f1_values)


def _bootstrap_means(vector: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Means of ``n_boot`` resamples (with replacement, same size) of ``vector``."""
    n_rows = vector.size
    rng = np.random.default_rng(seed)
    chunk = max(1, _BOOTSTRAP_CELLS_PER_CHUNK // n_rows)
    means = []
    for done in range(0, n_boot, chunk):
        indices = rng.integers(0, n_rows, size=(min(chunk, n_boot - done), n_rows))
        means.append(vector[indices].mean(axis=1))
    return np.concatenate(means)


def _as_vector(values: Iterable[float], name: str) -> np.ndarray:
    vector = np.asarray(list(values), dtype=float)
    if vector.ndim != 1 or vector.size == 0:
        raise ValueError(f"{name} must be a non-empty sequence of numbers")
    return vector


def _check_bootstrap(n_boot: int, alpha: float) -> None:
    if n_boot < 1:
        raise ValueError("n_boot must be at least 1")
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must lie in (0, 1)")


def bootstrap_ci(
    values: Iterable[float], n_boot: int = 1000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap (1 - alpha) interval for the mean of ``values``."""
    _check_bootstrap(n_boot, alpha)
    vector = _as_vector(values, "values")
    means = _bootstrap_means(vector, n_boot, seed)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def weighted_capped_mean(
    values: Sequence[float | None],
    weights: Sequence[float] | None = None,
    cap: float | None = None,
    missing: float | None = None,
    nan_propagates: bool = False,
) -> float | None:
    """sum_i w_i * min(v_i, cap) / sum_i w_i (CiK's `compute_all_rcprs`); a None value counts as
    `missing`, or is left out when `missing` is None. A NaN value counts as None, or with
    `nan_propagates` makes the mean NaN (CiK's code: NaN is never capped). None when nothing is left."""
    pairs = []
    for index, value in enumerate(values):
        weight = 1.0 if weights is None else float(weights[index])
        if nan_propagates and value is not None and math.isnan(value):
            return math.nan
        if value is None or math.isnan(value):
            if missing is None:
                continue
            value = missing
        value = float(value)
        pairs.append((weight, min(value, cap) if cap is not None else value))
    total = sum(w for w, _ in pairs)
    if not pairs or total == 0:
        return None
    return sum(w * v for w, v in pairs) / total


def bootstrap_weighted_ci(
    values: Iterable[float], weights: Iterable[float], n_boot: int = 1000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of a weighted mean, resampling (value, weight) rows together."""
    _check_bootstrap(n_boot, alpha)
    vector, weight = _as_vector(values, "values"), _as_vector(weights, "weights")
    if vector.size != weight.size:
        raise ValueError(f"{vector.size} values but {weight.size} weights")
    rng = np.random.default_rng(seed)
    chunk = max(1, _BOOTSTRAP_CELLS_PER_CHUNK // vector.size)
    means = []
    for done in range(0, n_boot, chunk):
        index = rng.integers(0, vector.size, size=(min(chunk, n_boot - done), vector.size))
        w = weight[index]
        means.append((vector[index] * w).sum(axis=1) / np.where(w.sum(axis=1) > 0, w.sum(axis=1), np.nan))
    low, high = np.nanquantile(np.concatenate(means), [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def paired_bootstrap_diff(
    a: Iterable[float], b: Iterable[float], n_boot: int = 1000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float]:
    """mean(a) - mean(b) with a percentile bootstrap interval that resamples rows jointly.

    ``a[i]`` and ``b[i]`` must be two systems' scores on the same row i.
    """
    _check_bootstrap(n_boot, alpha)
    first, second = _as_vector(a, "a"), _as_vector(b, "b")
    if first.size != second.size:
        raise ValueError(f"paired samples differ in length: {first.size} vs {second.size}")
    differences = first - second
    means = _bootstrap_means(differences, n_boot, seed)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(differences.mean()), float(low), float(high)
