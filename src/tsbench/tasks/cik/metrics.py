"""CiK's scores as pure functions: CRPS from samples, the region-of-interest CRPS with its
constraint-violation term and task scaling (RCRPS), and sMAPE as TimeClaw computes it.

RCRPS follows Context-is-Key (Williams et al., 2025) as its evaluator defines it:

    RCRPS = scaling * (w * CRPS_roi + (1 - w) * CRPS_rest) + CRPS(beta * v(X), 0)

* CRPS of one step is the sample estimator without bias, E|X - y| - E|X - X'| / 2 with the
  pairwise mean over distinct samples (n (n - 1) pairs); a set's CRPS is the mean over its steps;
* with a region of interest (a non-empty list of horizon steps), the ROI steps and the other
  steps each get a mean CRPS and the two are mixed with w = roi_weight (0.5: equal total weight);
  without one (or when it covers every step) the CRPS is the mean over the whole horizon;
* v(X) is, per sample, how far it breaks the constraints, in scaled units: for x <= max and
  x >= min the mean over steps of the scaled excess, for per-step maxima the mean over the listed
  steps; the constraints add up; beta = 10 (CiK's violation factor); the violation term is the
  CRPS of beta * v against 0 (the ground truth always satisfies the constraints);
* scaling is 1 / (mean over the task's instances of max(target) - min(target)); CiK publishes it
  per instance (`metric_scaling`), which the scorer reads.
* one sample (a point forecast): its CRPS is the absolute error (CiK's estimator divides by
  n (n - 1) and gives NaN there, which makes its aggregate NaN); a scaling of 0 gives NaN as in
  CiK's code (0 times an absent constraint's infinite threshold) unless every constraint is finite.

The aggregate over instances, CiK's `compute_all_rcprs`, is the family's `Aggregate` (taskset.py): each
instance's RCRPS capped at 5, weighted by the task weights (1/k shares one task's weight among k
variants); an unusable forecast counts at the cap; a NaN RCRPS is not capped (NaN >= 5 is false) and
makes it NaN.

sMAPE is in percent, as TimeClaw's code computes it (the numbers of its tables): 100 * mean of
2|y - yhat| / (|y| + |yhat| + 1e-8), NaN when the lengths differ; an unusable answer counts 200 in
the mean. `smape_eq65` is the paper's Eq. 65 (denominator floor 1e-2) in percent. Lower is better
for all of them; tests/golden/ pins them against the authors' code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

VIOLATION_FACTOR = 10.0  # CiK's beta
ROI_WEIGHT = 0.5
RCRPS_CAP = 5.0  # CiK's aggregation cap, also what an unusable forecast counts as
SMAPE_EPS = 1e-8  # TimeClaw's denominator term
SMAPE_FLOOR = 1e-2  # the paper's Eq. 65 floor
UNUSABLE_SMAPE = 200.0  # TimeClaw's sMAPE of an answer it cannot parse (sMAPE's upper bound)


@dataclass(frozen=True)
class Constraints:
    """The constraint kinds CiK's published instances carry (None / empty: absent)."""

    minimum: float | None = None
    maximum: float | None = None
    variable_max_index: tuple[int, ...] = ()
    variable_max_values: tuple[float, ...] = ()

    @property
    def any(self) -> bool:
        return self.minimum is not None or self.maximum is not None or bool(self.variable_max_index)


@dataclass
class RCRPSResult:
    """RCRPS and its parts (all scaled, as CiK reports them)."""

    rcrps: float
    crps: float  # scaling * ROI-weighted CRPS
    roi_crps: float
    non_roi_crps: float
    violation_mean: float  # mean over samples of v(X)
    violation_crps: float
    scaling: float
    n_roi: int
    parts: dict[str, float] = field(default_factory=dict)


def crps_per_step(target: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """CRPS of each step: target (H,), samples (n, H). With one sample it is |x - y|."""
    target = np.asarray(target, dtype=np.float64)
    samples = np.asarray(samples, dtype=np.float64)
    if samples.ndim != 2 or samples.shape[1] != target.shape[0]:
        raise ValueError(f"samples must be (n, {target.shape[0]}), got {samples.shape}")
    n = samples.shape[0]
    accuracy = np.abs(samples - target[None, :]).mean(axis=0)
    if n < 2:
        return accuracy
    ordered = np.sort(samples, axis=0)
    # sum over ordered pairs i != j of |x_i - x_j| = 2 * sum_k (2k - n + 1) x_(k), k = 0..n-1
    weights = (2.0 * np.arange(n) - n + 1.0)[:, None]
    with np.errstate(invalid="ignore"):  # inf - inf where a sample is infinite: NaN, as CiK's
        pair_sum = 2.0 * (weights * ordered).sum(axis=0)
        return accuracy - 0.5 * pair_sum / (n * (n - 1))


def violation(samples: np.ndarray, constraints: Constraints, scaling: float) -> np.ndarray:
    """v(X) per sample (n,), >= 0, in scaled units; the constraint kinds add up. As CiK's code computes
    it: an absent minimum or maximum is -inf / +inf (the Hugging Face release stores them so) and the
    scaled threshold minus the scaled samples is clipped, so a scaling of 0 gives 0 * inf = NaN there."""
    samples = np.asarray(samples, dtype=np.float64)
    lowest = -math.inf if constraints.minimum is None else constraints.minimum
    highest = math.inf if constraints.maximum is None else constraints.maximum
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = scaling * samples
        total = (scaling * lowest - scaled).clip(min=0).mean(axis=1)
        total = total + (scaled - scaling * highest).clip(min=0).mean(axis=1)
        if constraints.variable_max_index:
            index = np.asarray(constraints.variable_max_index, dtype=int)
            limits = scaling * np.asarray(constraints.variable_max_values, dtype=np.float64)
            total = total + (scaled[:, index] - limits[None, :]).clip(min=0).mean(axis=1)
    return total


def roi_mask(region_of_interest: Sequence[int] | None, horizon: int) -> np.ndarray | None:
    """A boolean mask of the ROI steps, or None when there is no proper ROI (empty or all steps)."""
    if region_of_interest is None or len(region_of_interest) == 0:
        return None
    mask = np.zeros(horizon, dtype=bool)
    mask[np.asarray(list(region_of_interest), dtype=int)] = True
    return None if mask.all() else mask


def rcrps(
    target: Sequence[float],
    samples: Sequence[Sequence[float]],
    *,
    scaling: float,
    region_of_interest: Sequence[int] | None = None,
    roi_weight: float = ROI_WEIGHT,
    constraints: Constraints | None = None,
    violation_factor: float = VIOLATION_FACTOR,
) -> RCRPSResult:
    """CiK's RCRPS of forecast samples (n, H) against the target (H,); see the module doc."""
    target = np.asarray(target, dtype=np.float64)
    samples = np.asarray(samples, dtype=np.float64)
    steps = crps_per_step(target, samples)
    mask = roi_mask(region_of_interest, len(target))
    if mask is None:
        weighted = roi_part = rest_part = float(steps.mean())
        n_roi = len(target)
    else:
        roi_part, rest_part = float(steps[mask].mean()), float(steps[~mask].mean())
        weighted = roi_weight * roi_part + (1.0 - roi_weight) * rest_part
        n_roi = int(mask.sum())
    amount = violation(samples, constraints or Constraints(), scaling)  # absent ones too: CiK's NaN at scaling 0
    with np.errstate(invalid="ignore"):
        penalty = float(crps_per_step(np.zeros(1), (violation_factor * amount)[:, None])[0])
    return RCRPSResult(
        rcrps=scaling * weighted + penalty,  # NaN where CiK's is NaN (scaling 0, a NaN or inf sample)
        crps=scaling * weighted,
        roi_crps=scaling * roi_part,
        non_roi_crps=scaling * rest_part,
        violation_mean=float(amount.mean()),
        violation_crps=penalty,
        scaling=float(scaling),
        n_roi=n_roi,
    )


def _pair(target: Sequence[float], point: Sequence[float]) -> tuple[np.ndarray, np.ndarray] | None:
    y = np.asarray(target, dtype=np.float64).reshape(-1)
    yhat = np.asarray(point, dtype=np.float64).reshape(-1)
    return None if y.shape != yhat.shape or y.size == 0 else (y, yhat)


def smape(target: Sequence[float], point: Sequence[float]) -> float:
    """sMAPE in percent, [0, 200], as TimeClaw's code: 100 * mean(2|y - yhat| / (|y| + |yhat| + 1e-8));
    NaN when the lengths differ or are 0."""
    pair = _pair(target, point)
    if pair is None:
        return math.nan
    y, yhat = pair
    return float(100.0 * np.mean(2.0 * np.abs(y - yhat) / (np.abs(y) + np.abs(yhat) + SMAPE_EPS)))


def smape_eq65(target: Sequence[float], point: Sequence[float], floor: float = SMAPE_FLOOR) -> float:
    """The paper's Eq. 65 in percent: 100 * mean(2|y - yhat| / max(|y| + |yhat|, floor)); NaN as `smape`."""
    pair = _pair(target, point)
    if pair is None:
        return math.nan
    y, yhat = pair
    return float(100.0 * np.mean(2.0 * np.abs(y - yhat) / np.maximum(np.abs(y) + np.abs(yhat), floor)))
