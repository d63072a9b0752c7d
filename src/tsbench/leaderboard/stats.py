"""Statistics the shared aggregate module lacks: a bootstrap of macro-F1 and stable per-cell seeds.

Means, their bootstrap intervals and paired differences come from tsbench.core.stats, so the
leaderboard and every other report compute them the same way. Macro-F1 is not a mean of row scores,
so its interval needs its own resampling; it is vectorised because a leaderboard has many cells.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence

import numpy as np

from tsbench.core import json_input
from tsbench.core.stats import macro_f1

_CELLS_PER_CHUNK = 4_000_000


def cell_seed(seed: int, *parts) -> int:
    """A seed for one cell that depends on the cell, not on the order cells are computed in."""
    return (seed * 1_000_003 + zlib.crc32("|".join(map(str, parts)).encode())) % (2**32)


def bootstrap_mean_of_means(
    groups: Sequence[Sequence[float]], n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> tuple[float, float]:
    """Percentile interval of an unweighted mean of group means (Fig. 4's mean over categories),
    resampling rows within each group, so every group keeps its size and its weight."""
    arrays = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if not arrays:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    total = np.zeros(n_boot)
    for values in arrays:
        total += values[rng.integers(0, len(values), size=(n_boot, len(values)))].mean(axis=1)
    low, high = np.quantile(total / len(arrays), [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def predicted_option(parsed_answer: str | None) -> str:
    """The option text a model chose, from the parsed_answer JSON; "" when nothing parsed.

    The scorer stores the extracted option as a JSON string; an object with an "answer" key is
    accepted too. Anything else counts as no answer, which is always a miss.
    """
    if parsed_answer is None or (isinstance(parsed_answer, float) and np.isnan(parsed_answer)):
        return ""
    try:
        value = json_input.loads(parsed_answer)
    except (TypeError, ValueError):
        return ""
    if isinstance(value, dict):
        value = value.get("answer")
    return value if isinstance(value, str) else ""


def gold_option(gold: str) -> str:
    """The gold option text of an MCQ row (gold is the JSON text {"answer": option})."""
    value = json.loads(gold)
    return str(value["answer"]) if isinstance(value, dict) else str(value)


def f1_classes(options: Sequence[str], golds: Sequence[str], preds: Sequence[str]) -> list[str]:
    """The class set macro-F1 is taken over for one multiple-choice column.

    A fixed option list is used as is, so "" (nothing parsed) or an off-list answer is a miss for
    the row's gold class but never a class of its own. An empty list means the options differ by
    row (AnomalyXL identification): the classes are every answer given or expected, still without "".
    """
    if options:
        return list(options)
    return sorted({g for g in golds} | {p for p in preds if p})


def mcq_macro_f1(options: Sequence[str], golds: Sequence[str], preds: Sequence[str]) -> float:
    """Point macro-F1 of one multiple-choice cell, via the shared macro_f1 with the column's classes."""
    return macro_f1(list(golds), list(preds), options=f1_classes(options, golds, preds))


def _f1_of_codes(gold: np.ndarray, pred: np.ndarray, n_classes: int) -> np.ndarray:
    """Macro-F1 per row of (B, n) integer label matrices; -1 in ``pred`` is a miss for every class.

    Same rule as aggregate.macro_f1: classes absent from both gold and prediction are left out.
    """
    classes = np.arange(n_classes)[None, None, :]
    g = gold[:, :, None] == classes
    p = pred[:, :, None] == classes
    tp = (g & p).sum(axis=1)
    denom = g.sum(axis=1) + p.sum(axis=1)
    occurring = denom > 0
    f1 = np.divide(2 * tp, denom, out=np.zeros(denom.shape), where=occurring)
    counts = occurring.sum(axis=1)
    return np.divide(f1.sum(axis=1), counts, out=np.zeros(len(counts)), where=counts > 0)


def bootstrap_macro_f1_ci(
    options: Sequence[str],
    golds: Sequence[str],
    preds: Sequence[str],
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of macro-F1, resampling rows (gold and prediction together)."""
    if len(golds) != len(preds) or not golds:
        raise ValueError("need equally many gold labels and predictions, at least one")
    classes = f1_classes(options, golds, preds)
    code = {label: i for i, label in enumerate(classes)}
    gold = np.array([code.get(g, -2) for g in golds])  # off-list: in no class, as in macro_f1
    pred = np.array([code.get(p, -1) for p in preds])
    n_classes = len(classes)
    n = gold.size
    rng = np.random.default_rng(seed)
    chunk = max(1, _CELLS_PER_CHUNK // (n * n_classes))
    values = []
    for done in range(0, n_boot, chunk):
        idx = rng.integers(0, n, size=(min(chunk, n_boot - done), n))
        values.append(_f1_of_codes(gold[idx], pred[idx], n_classes))
    low, high = np.quantile(np.concatenate(values), [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)
