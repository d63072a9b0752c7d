"""Is A better than B on the same rows: the paired test, the multiplicity correction and the power.

Pure functions over two score vectors of equal length (``a[i]`` and ``b[i]`` are two systems on the
same row). The interval is the shared paired bootstrap (core/stats.py); the p-value is exact where
it can be:

- binary scores (every value 0 or 1 in both vectors): McNemar's exact test, which is the two-sided
  sign test on the discordant rows, ``binomtest(a_only, a_only + b_only, 0.5)``; ties carry no
  information about which system is better and are left out, as McNemar does;
- any other scores: a paired permutation test of the mean difference (each row's two scores are
  swapped or not, ``scipy.stats.permutation_test(permutation_type='samples')``), exact when the
  ``2**n`` sign patterns are no more than the resamples asked for, else Monte Carlo with a seed
  (whose two-sided p is never below 2 / (resamples + 1): 0.0002 at the default).

Rows needed at 80 % power (``rows_needed``) is the normal approximation to the paired t-test
sample size, using the observed mean ``d`` and standard deviation ``s`` of the row differences:

    n = ceil(((z_{1-alpha/2} + z_{power}) * s / |d|) ** 2)

i.e. how many paired rows a replication needs to detect a true difference as large as the one
seen, two-sided at level alpha, with the given power. It is a planning number, not a test: an
observed effect overstates the true one when it was selected for being large.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from tsbench.core.stats import paired_bootstrap_diff

EXACT_BINARY = "McNemar exact"
PERMUTATION = "permutation"
PERMUTATION_RESAMPLES = 9999
POWER = 0.8
ALPHA = 0.05


@dataclass(frozen=True)
class PairedResult:
    """One paired comparison on n shared rows: mean(a) - mean(b), its interval, its test."""

    n: int
    mean_a: float
    mean_b: float
    diff: float
    lo: float
    hi: float
    test: str  # EXACT_BINARY or PERMUTATION
    p: float  # the test's own two-sided p-value, before any correction
    rows_needed: int | None  # rows for 80 % power at the observed difference; None when it is 0

    def as_dict(self) -> dict:
        return asdict(self)


def is_binary(*vectors: Sequence[float]) -> bool:
    """Whether every score is exactly 0 or 1 (then the exact McNemar test applies)."""
    return all(bool(np.all((np.asarray(v, dtype=float) == 0) | (np.asarray(v, dtype=float) == 1))) for v in vectors)


def mcnemar_exact_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided exact McNemar p-value for paired 0/1 scores: the sign test on discordant rows."""
    from scipy.stats import binomtest

    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    a_only = int(np.sum((first == 1) & (second == 0)))
    b_only = int(np.sum((first == 0) & (second == 1)))
    if a_only + b_only == 0:
        return 1.0
    return float(binomtest(a_only, a_only + b_only, 0.5, alternative="two-sided").pvalue)


def permutation_p(a: Sequence[float], b: Sequence[float], seed: int = 0, n_resamples: int = PERMUTATION_RESAMPLES):
    """Two-sided paired permutation p-value of the mean difference (swaps within each row)."""
    from scipy.stats import permutation_test

    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if np.all(first == second):
        return 1.0

    def mean_difference(x, y, axis=-1):
        return np.mean(x - y, axis=axis)

    result = permutation_test(
        (first, second),
        mean_difference,
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_resamples,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    return float(min(1.0, result.pvalue))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given (monotone, capped at 1)."""
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[index]))
        adjusted[index] = running
    return adjusted.tolist()


def rows_needed(differences: Sequence[float], power: float = POWER, alpha: float = ALPHA) -> int | None:
    """Paired rows to detect the observed mean difference with ``power`` at two-sided ``alpha``
    (normal approximation to the paired t-test; see the module docstring). None when the
    observed difference is 0 (no sample size detects it); at least 2 rows."""
    from scipy.stats import norm

    d = np.asarray(differences, dtype=float)
    mean = float(d.mean()) if d.size else 0.0
    if mean == 0.0:
        return None
    sd = float(d.std(ddof=1)) if d.size > 1 else 0.0
    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    return max(2, math.ceil((z * sd / abs(mean)) ** 2))


def paired_comparison(
    a: Sequence[float], b: Sequence[float], n_boot: int = 1000, seed: int = 0, alpha: float = ALPHA
) -> PairedResult:
    """mean(a) - mean(b) on paired rows with its paired bootstrap interval, the exact or permutation
    test, and the rows a replication needs; ``a`` and ``b`` must be aligned and non-empty."""
    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diff, lo, hi = paired_bootstrap_diff(first, second, n_boot=n_boot, alpha=alpha, seed=seed)
    binary = is_binary(first, second)
    p = mcnemar_exact_p(first, second) if binary else permutation_p(first, second, seed=seed)
    return PairedResult(
        n=int(first.size),
        mean_a=float(first.mean()),
        mean_b=float(second.mean()),
        diff=diff,
        lo=lo,
        hi=hi,
        test=EXACT_BINARY if binary else PERMUTATION,
        p=p,
        rows_needed=rows_needed(first - second, alpha=alpha),
    )
