"""Step 1, the background: trend, periodic part and AR(1) noise, fitted and pre-whitened away."""

from __future__ import annotations

import math

import numpy as np
from scipy.ndimage import uniform_filter1d
from scipy.optimize import minimize_scalar

from tsbench.baselines.detector.model import (
    BASELINE_BLOCK,
    FOLD_WINDOW_DIVISOR,
    FOLD_WINDOW_MAX,
    FOLD_WINDOW_MIN,
    JUMP_SHARE,
    JUMP_ZONE,
    PERIOD_BAND,
    PERIODIC_RATIO,
    RANDOM_WALK_PHI,
    TREND_GAIN,
    TREND_RATE,
)

# ---------------------------------------------------------------------------------------------
# 1. Background
# ---------------------------------------------------------------------------------------------


PEAK_PADDING = 8  # zero-padding factor of the FFT whose peak gives the off-grid frequency


def periodic_part(x: np.ndarray) -> tuple[np.ndarray | None, float]:
    """(fitted periodic component or None, its fundamental frequency in cycles per sample).

    The fundamental is the strongest periodogram peak with a period in PERIOD_BAND, accepted only
    when it towers over the local median power. The generator's periods are real-valued, so the
    frequency is refined between bins: a zero-padded FFT around the peak, then a parabola through
    the top three points (an error of about 1e-3 bin, a phase drift of under 0.01 rad over the
    series). The waveform is then the series folded at that period (see below).
    """
    n = len(x)
    if n < 4 * PERIOD_BAND[1]:
        return None, 0.0
    raw = x
    xc = x - block_median_baseline(x)
    xc = xc - xc.mean()
    power = np.abs(np.fft.rfft(xc)) ** 2
    lo = max(1, int(n / PERIOD_BAND[1] * 0.9))
    hi = min(len(power) - 2, int(math.ceil(n / PERIOD_BAND[0] * 1.1)))
    k = lo + int(np.argmax(power[lo : hi + 1]))
    window = power[max(1, int(k / 1.5)) : min(len(power), int(k * 1.5) + 2)]
    if power[k] < PERIODIC_RATIO * float(np.median(window)):
        return None, 0.0
    padded = np.abs(np.fft.rfft(xc, PEAK_PADDING * n))
    kp = PEAK_PADDING * (k - 1) + int(np.argmax(padded[PEAK_PADDING * (k - 1) : PEAK_PADDING * (k + 1) + 1]))
    kp = min(max(kp, 1), len(padded) - 2)
    left, mid, right = padded[kp - 1], padded[kp], padded[kp + 1]
    curvature = left - 2 * mid + right
    delta = 0.5 * (left - right) / curvature if curvature < 0 else 0.0
    f0 = (kp + float(np.clip(delta, -0.5, 0.5))) / (PEAK_PADDING * n)
    # Fold at the fundamental: sorted by phase, a running mean over neighbouring phases is the
    # waveform, whatever its shape (sine, square, sawtooth, even the aliased harmonics of a sampled
    # square wave). The level is taken out first by a moving average over a whole number of
    # periods, which, unlike block medians, carries no trace of the wave; and a mean, not a
    # median, because a median over cycles at two levels flips between them and leaves a step in
    # the waveform. Jumps get smeared over a few thousandths of a cycle; `jump_samples` covers that.
    period = 1.0 / f0
    span = max(1, int(round(math.ceil(BASELINE_BLOCK / period) * period)))
    level = uniform_filter1d(raw, size=min(span, n), mode="nearest")
    phase = np.mod(np.arange(n, dtype=np.float64) * f0, 1.0)
    order = np.argsort(phase, kind="stable")
    size = int(min(FOLD_WINDOW_MAX, max(FOLD_WINDOW_MIN, n // FOLD_WINDOW_DIVISOR))) | 1
    fitted = np.empty(n)
    fitted[order] = uniform_filter1d((raw - level)[order], size=size, mode="wrap")
    return fitted, f0


def jump_samples(x: np.ndarray, fitted: np.ndarray, f0: float) -> np.ndarray:
    """Samples within about JUMP_ZONE cycles of a jump of the fitted periodic waveform.

    However well the fundamental is estimated, its error drifts the phase by a few thousandths
    of a cycle over a long series, so samples near a square or sawtooth jump land on the wrong
    side of it in some cycles, leaving a residual as tall as the jump: invisible against white
    noise, a towering false anomaly against a quiet random walk. A jump is where the waveform
    changes by more than JUMP_SHARE of its range across 2 * JUMP_ZONE cycles (a sine never
    does); samples that close to one are interpolated from their neighbours instead (a few per
    period, so an anomaly loses little).
    """
    n = len(x)
    phase = np.mod(np.arange(n, dtype=np.float64) * f0, 1.0)
    order = np.argsort(phase, kind="stable")
    grid_n = 2000
    grid = (np.arange(grid_n) + 0.5) / grid_n
    sp = phase[order]
    sv = fitted[order]
    wave = np.interp(grid, np.r_[sp[-1] - 1.0, sp, sp[0] + 1.0], np.r_[sv[-1], sv, sv[0]])
    span = float(np.ptp(wave))
    if span <= 0:
        return np.zeros(n, dtype=bool)
    k = max(1, int(round(JUMP_ZONE * grid_n)))
    change = np.abs(np.roll(wave, -k) - np.roll(wave, k))
    near = change > JUMP_SHARE * span
    if not near.any():
        return np.zeros(n, dtype=bool)
    near = np.convolve(np.r_[near[-k:], near, near[:k]].astype(float), np.ones(2 * (k // 2) + 1), "same")[k:-k] > 0
    return near[np.minimum((phase * grid_n).astype(np.int64), grid_n - 1)]


def _block_medians(x: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """(centres, medians) of consecutive blocks; the median of a monotone stretch is its middle
    value, so a smooth trend is sampled without bias, and a window of at most half a block
    barely moves it."""
    n = len(x)
    edges = np.arange(0, n + 1, block)
    if edges[-1] != n:
        edges = np.append(edges, n)
    centres = (edges[:-1] + edges[1:] - 1) / 2.0
    return centres, block_medians(x, block)


def block_medians(x: np.ndarray, block: int) -> np.ndarray:
    """The median of each consecutive block (the last one may be shorter), all full blocks in one call."""
    full = len(x) // block
    medians = np.median(x[: full * block].reshape(full, block), axis=1) if full else np.empty(0)
    if full * block < len(x):
        medians = np.append(medians, np.median(x[full * block :]))
    return medians


def _trend_design(t: np.ndarray, n: int, rate: float) -> np.ndarray:
    """Columns 1, t, log1p(t) and expm1(rate t), each scaled to at most 1 in size."""
    columns = [np.ones_like(t), t / n, np.log1p(t) / math.log1p(n)]
    if rate != 0.0:
        e = np.expm1(rate * t)
        columns.append(e / (float(np.max(np.abs(np.expm1(rate * np.array([0.0, n]))))) or 1.0))
    return np.stack(columns, axis=1)


def _fit_with_step(design: np.ndarray, values: np.ndarray) -> tuple[float, np.ndarray]:
    """(SSR, trend coefficients) of values ~ design + one step at the best block boundary.

    The step is a nuisance: a change in trend (ramp, then the new level to the end) or a random
    walk's drift would otherwise be absorbed by the log and exponential columns and reappear as
    a phantom anomaly at the start or end of the series. Every boundary is tried at once by
    projecting the step columns onto the complement of the design.
    """
    q, _ = np.linalg.qr(design)
    resid = values - q @ (q.T @ values)
    m = len(values)
    # Step k is 1 on t >= k+1: its products with q's columns and with the residual are suffix sums,
    # so every boundary costs O(columns), not a projection of an m x m matrix of steps.
    q_tail = np.cumsum(q[::-1], axis=0)[::-1][1:]  # row k: sum of q[t] over t >= k+1
    r_tail = np.cumsum(resid[::-1])[::-1][1:]
    norms = (m - np.arange(1, m)) - np.einsum("ij,ij->i", q_tail, q_tail)
    dots = r_tail - q_tail @ (q.T @ resid)
    gains = np.where(norms > 1e-9, dots**2 / np.maximum(norms, 1e-9), 0.0)
    k = int(np.argmax(gains))
    full = np.column_stack([design, (np.arange(m) >= k + 1).astype(np.float64)])
    coef, *_ = np.linalg.lstsq(full, values, rcond=None)
    ssr = float(np.sum((full @ coef - values) ** 2))
    return ssr, coef[: design.shape[1]]


def trend_part(x: np.ndarray, block: int = BASELINE_BLOCK) -> np.ndarray:
    """The generator's trend family fitted to block medians: a + b t + c log1p(t) + d expm1(r t).

    The exponential's rate r is found by a bounded search (a coarse grid, then Brent's method),
    because a steep exponential dominates a z-normalised channel: left in, its curvature looks
    like an anomaly to every local fit, and the noise next to it is below float32 resolution.
    One step at an unknown block boundary is fitted alongside and left in the series (see
    `_fit_with_step`). The curved terms are kept only when they clearly beat a straight line.
    """
    n = len(x)
    if n < 8 * block:
        return np.zeros(n)
    centres, medians = _block_medians(x, block)
    values = medians / (float(np.std(medians)) or 1.0)

    def ssr(rate: float) -> float:
        return _fit_with_step(_trend_design(centres, n, rate), values)[0]

    grid = np.linspace(-TREND_RATE, TREND_RATE, 25)
    scores = [ssr(r) for r in grid]
    i = int(np.argmin(scores))
    lo, hi = grid[max(0, i - 1)], grid[min(len(grid) - 1, i + 1)]
    found = minimize_scalar(ssr, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
    rate = float(found.x) if found.fun <= scores[i] else float(grid[i])
    best = min(float(found.fun), scores[i])
    straight = _fit_with_step(_trend_design(centres, n, 0.0)[:, :2], values)[0]
    if best > TREND_GAIN * straight:
        # The curved terms explain little beyond a line and a step: a random walk, or nothing.
        # Fitting them anyway would bend the first block (log1p is steepest there) for no reason.
        return np.zeros(n)
    _, coef = _fit_with_step(_trend_design(centres, n, rate), medians)
    return _trend_design(np.arange(n, dtype=np.float64), n, rate) @ coef


def block_median_baseline(x: np.ndarray, block: int = BASELINE_BLOCK) -> np.ndarray:
    """A slow baseline: medians of consecutive blocks, linearly interpolated between block centres.

    A window of at most 256 samples moves the median of a 512-sample block little, so the
    baseline follows trends and random walks but not the anomaly.
    """
    n = len(x)
    if n <= block:
        return np.full(n, float(np.median(x)))
    edges = np.arange(0, n + 1, block)
    if edges[-1] != n:
        edges = np.append(edges, n)
    centres = (edges[:-1] + edges[1:] - 1) / 2.0
    return np.interp(np.arange(n), centres, block_medians(x, block))


def ar1_coefficient(r: np.ndarray, block: int = BASELINE_BLOCK) -> float:
    """The AR(1) coefficient of the background, in [0, 1], near-1 values taken to be exactly 1.

    The median over 512-sample blocks of each block's lag-1 autocorrelation (block mean removed,
    values clipped at 5 robust sigmas): a level change, an anomaly or a trend's steep start
    upsets a block or two, not the median. A random walk reads about 0.99 in a block; but a value
    even slightly short of 1 leaves (1 - phi) times the walk's level in the pre-whitened series,
    a slow wander that a ramp-and-hold fit mistakes for a change in trend. The scenes have
    phi = 0, 0.7 or a walk, so estimates above RANDOM_WALK_PHI are snapped to 1.
    """
    n = len(r)
    blocks = n // block
    c = r[: blocks * block].reshape(blocks, block) if blocks > 1 else np.asarray(r, dtype=np.float64)[None, :]
    c = c - np.median(c, axis=1, keepdims=True)  # every block at once
    mad = 1.4826 * np.median(np.abs(c), axis=1)
    mad = np.where(mad > 0, mad, np.std(c, axis=1))
    mad = np.where(mad > 0, mad, 1.0)[:, None]
    c = np.clip(c, -5 * mad, 5 * mad)
    c = c - c.mean(axis=1, keepdims=True)
    denom = np.einsum("ij,ij->i", c, c)
    lagged = np.einsum("ij,ij->i", c[:, 1:], c[:, :-1])
    values = lagged[denom > 0] / denom[denom > 0]
    if not len(values):
        return 0.0
    phi = min(max(float(np.median(values)), 0.0), 1.0)
    return 1.0 if phi > RANDOM_WALK_PHI else phi


def robust_sigma(y: np.ndarray) -> float:
    med = float(np.median(y))
    s = 1.4826 * float(np.median(np.abs(y - med)))
    return s if s > 1e-12 else (float(np.std(y)) or 1.0)
