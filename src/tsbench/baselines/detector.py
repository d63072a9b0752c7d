"""`detector/default`: a training-free anomaly detector that answers every AnomalyXL category.

The model of one channel is: background (trend + periodic part + AR(1) noise) plus at most one
anomaly of a known shape family added over a window of 8..256 samples. That makes detection a
likelihood-ratio search, done in three steps.

1. Background. Fit the generator's trend family (line, log, exponential; only when it clearly
   beats a line) and the periodic part (the strongest rFFT peak in the 16..256-sample period
   band, its frequency refined off-grid, the waveform read off by folding the series at that
   period), estimate the AR(1) coefficient phi of what is left, and pre-whiten:
   y_t = r_t - phi * r_{t-1}. After pre-whitening the noise is close to white for white, AR(1)
   and random-walk scenes alike, so one Gaussian likelihood serves all three.
2. Scan. Over the whole series (slow baseline from block medians removed), score every start at
   eleven window widths with two cheap statistics, a box matched filter (in the pre-whitened
   domain) and a variance ratio, and keep the strongest few well-separated candidates, plus
   two typical background stretches.
3. Refine. Around each candidate, at full resolution, fit each of the five anomaly shapes with a
   coarse-to-fine search over start and width: box (level shift), triangle (spike),
   ramp-and-hold (trend change), extra white noise (variance) and a sine burst at the periods
   the local spectrum suggests (seasonality). Local level and slope (and near t = 0 the log
   trend) are nuisance parameters, projected out exactly. Every shape is piecewise linear, so
   its correlation with the data and with the nuisance basis is O(1) per (start, width) from
   cumulative sums.

The winning shape's log-likelihood gain, less what the same fits score on the channel's typical
background stretches, is the evidence (presence, channel flags); its window is the answer's
window; the level-shift fit's amplitude over the background std is the magnitude. Lead-lag
pairs the two channels' onsets (the generator places independent anomalies more than L/4
apart, coupled ones at most L/4). The four decision constants (`Settings`) were set once on
the train split (`calibrate`), never on test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.ndimage import uniform_filter1d
from scipy.optimize import minimize_scalar

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.mcq import magnitude_band, start_bin
from tsbench.baselines import decode
from tsbench.core.episode import EpisodeTask

MIN_WIDTH, MAX_WIDTH = 8, 256  # anomaly widths the generator draws (samples)
PERIOD_BAND = (16.0, 256.0)  # background periodic parts have periods in this range
SCAN_WIDTHS = (8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256)
BASELINE_BLOCK = 512  # block-median baseline for the scan (anomalies are at most half a block)
SEGMENT_HALF = 768  # refinement looks this far either side of a candidate's centre
N_CANDIDATES = 3
CANDIDATE_SEPARATION = 512
FOLD_WINDOW_MIN, FOLD_WINDOW_MAX, FOLD_WINDOW_DIVISOR = 33, 257, 512  # running-mean window over sorted phases
JUMP_SHARE, JUMP_ZONE = 0.5, 0.01  # a template step over half its range is a jump; cycles either side
TREND_RATE = 1.2e-3  # exponential trends have rates within +-1e-3 per sample
TREND_GAIN = 0.05  # curved trend terms are used only when they leave < 5 % of a line's misfit
LOG_NUISANCE_SPAN = 8192  # segments starting this close to t = 0 also project out log1p(t)
RANDOM_WALK_PHI = 0.95  # AR(1) estimates above this are random walks: phi = 1
NOISE_FLOOR = 1e-3  # the pre-whitened noise std is never taken below this share of the channel std
PERIODIC_RATIO = 40.0  # peak / local-median periodogram power that counts as a periodic part


@dataclass(frozen=True)
class Settings:
    """The detector's few decision constants, set once on the train split by `calibrate` (never on
    test). Gains are log-likelihood ratios; thresholds grow like log L (`presence_threshold`).

    The defaults are `fit_settings` on the seed-42 train split's first 800 rows (50 per cell):
    only the channel offset moved off its starting value (4 -> 17); the grid optimum of the
    others was the starting value itself.
    """

    presence_offset: float = 4.0  # single-channel presence: gain > log L + offset
    channel_offset: float = 17.0  # all-channels / identification: the same, per channel
    seasonality_penalty: float = 4.0  # the sine burst's extra parameters (second amplitude, period)
    variance_penalty: float = 0.0

    def penalty(self, kind: str) -> float:
        if kind == lb.SEASONALITY:
            return self.seasonality_penalty
        if kind == lb.VARIANCE:
            return self.variance_penalty
        return 0.0


DEFAULT = Settings()


@dataclass
class Finding:
    """One fitted anomaly: its shape, window, evidence and size."""

    kind: str
    start: int
    end: int
    gain: float  # log-likelihood ratio against "background only" (kind penalty applied by ChannelResult.ranked)
    amplitude: float = 0.0  # signed, in the channel's units (box/triangle/ramp), or the extra std (variance/seasonality)
    period: int = 0  # seasonality only

    def shifted(self, offset: int) -> "Finding":
        return Finding(self.kind, self.start + offset, self.end + offset, self.gain, self.amplitude, self.period)


@dataclass
class ChannelResult:
    """The best fit of each kind in a channel (raw gains), and the channel's background std."""

    by_kind: dict[str, Finding]
    sigma_x: float
    length: int
    phi: float = 0.0
    periodic: bool = False
    null_by_kind: dict[str, float] = field(default_factory=dict)  # best gains on typical background

    def null_gain(self, settings: Settings = DEFAULT) -> float:
        """What the channel's own background scores: the best penalised fit on typical stretches."""
        values = [g - settings.penalty(k) for k, g in self.null_by_kind.items()]
        return max(values + [0.0])

    def evidence(self, settings: Settings = DEFAULT) -> float:
        """How far the best fit stands above what this channel's background scores anyway.

        An anomaly happens once; a background the model fits badly (the jumps of a square wave
        over a quiet random walk, a steep trend's curvature) scores high on every stretch.
        """
        return self.best(settings).gain - self.null_gain(settings)

    def ranked(self, settings: Settings = DEFAULT) -> list[Finding]:
        """Findings with kind penalties applied, strongest first (ties: the kinds' fixed order)."""
        order = {k: i for i, k in enumerate(lb.KINDS)}
        found = [
            Finding(f.kind, f.start, f.end, f.gain - settings.penalty(f.kind), f.amplitude, f.period)
            for f in self.by_kind.values()
        ]
        return sorted(found, key=lambda f: (-f.gain, order[f.kind]))

    def best(self, settings: Settings = DEFAULT) -> Finding:
        ranked = self.ranked(settings)
        return ranked[0] if ranked else Finding(lb.LEVEL_SHIFT, 0, min(self.length, MIN_WIDTH), 0.0)

    def magnitude(self) -> float:
        """The level-shift size in units of the series' std without the shift."""
        f = self.by_kind.get(lb.LEVEL_SHIFT)
        if f is None:
            return 1.0
        return abs(f.amplitude) / self.sigma_x if self.sigma_x > 0 else abs(f.amplitude)


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
    k = lo + int(np.argmax(power[lo:hi + 1]))
    window = power[max(1, int(k / 1.5)):min(len(power), int(k * 1.5) + 2)]
    if power[k] < PERIODIC_RATIO * float(np.median(window)):
        return None, 0.0
    padded = np.abs(np.fft.rfft(xc, PEAK_PADDING * n))
    kp = PEAK_PADDING * (k - 1) + int(np.argmax(padded[PEAK_PADDING * (k - 1):PEAK_PADDING * (k + 1) + 1]))
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
    return centres, np.array([np.median(x[a:b]) for a, b in zip(edges[:-1], edges[1:])])


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
    steps = (np.arange(m)[:, None] >= np.arange(1, m)[None, :]).astype(np.float64)  # column k: step at k+1
    perp = steps - q @ (q.T @ steps)
    norms = np.einsum("ij,ij->j", perp, perp)
    gains = np.where(norms > 1e-9, (resid @ perp) ** 2 / np.maximum(norms, 1e-9), 0.0)
    k = int(np.argmax(gains))
    full = np.column_stack([design, steps[:, k]])
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
    medians = np.array([np.median(x[a:b]) for a, b in zip(edges[:-1], edges[1:])])
    return np.interp(np.arange(n), centres, medians)


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
    blocks = max(1, n // block)
    values = []
    for i in range(blocks):
        c = r[i * block:(i + 1) * block] if blocks > 1 else r
        c = c - np.median(c)
        mad = 1.4826 * float(np.median(np.abs(c))) or float(np.std(c)) or 1.0
        c = np.clip(c, -5 * mad, 5 * mad)
        c = c - c.mean()
        denom = float(np.dot(c, c))
        if denom > 0:
            values.append(float(np.dot(c[1:], c[:-1])) / denom)
    if not values:
        return 0.0
    phi = min(max(float(np.median(values)), 0.0), 1.0)
    return 1.0 if phi > RANDOM_WALK_PHI else phi


def robust_sigma(y: np.ndarray) -> float:
    med = float(np.median(y))
    s = 1.4826 * float(np.median(np.abs(y - med)))
    return s if s > 1e-12 else (float(np.std(y)) or 1.0)


# ---------------------------------------------------------------------------------------------
# 2. Scan
# ---------------------------------------------------------------------------------------------


def scan_candidates(r: np.ndarray, phi: float, sigma: float, n_candidates: int = N_CANDIDATES) -> tuple[list[int], list[int]]:
    """(centres of the strongest well-separated windows, centres of typical background stretches).

    Box statistic: the pre-whitened correlation with a box of width w, via u_t = y_t - phi*y_{t+1},
    whose cumulative sum gives every start at once. Variance statistic: the Gaussian likelihood
    ratio of the window's energy against unit variance. The typical stretches are the blocks whose
    best score is the median and the upper quartile of all blocks, away from the candidates:
    refined like a candidate, they tell what this channel's background scores anyway.
    """
    n = len(r)
    y = np.empty(n)
    y[0] = 0.0
    y[1:] = (r[1:] - phi * r[:-1]) / sigma
    u = y.copy()
    u[:-1] -= phi * y[1:]
    U = np.concatenate([[0.0], np.cumsum(u)])
    Q = np.concatenate([[0.0], np.cumsum(y * y)])
    best = np.zeros(n)
    for w in SCAN_WIDTHS:
        if w >= n:
            break
        corr = U[w:] - U[:-w]
        norm = 1.0 + (w - 1) * (1.0 - phi) ** 2 + phi * phi
        gain = corr * corr / (2.0 * norm)
        v = (Q[w:] - Q[:-w]) / w
        vg = np.where(v > 1.0, 0.5 * w * (v - 1.0 - np.log(np.maximum(v, 1e-12))), 0.0)
        g = np.maximum(gain, vg)
        np.maximum(best[w // 2:w // 2 + len(g)], g, out=best[w // 2:w // 2 + len(g)])
    out: list[int] = []
    score = best.copy()
    for _ in range(n_candidates):
        c = int(np.argmax(score))
        if not np.isfinite(score[c]) or (score[c] <= 0 and out):
            break
        out.append(c)
        score[max(0, c - CANDIDATE_SEPARATION):c + CANDIDATE_SEPARATION] = -np.inf
    typical: list[int] = []
    blocks = n // BASELINE_BLOCK
    if blocks >= 4:
        maxima = best[: blocks * BASELINE_BLOCK].reshape(blocks, -1).max(axis=1)
        centres = np.arange(blocks) * BASELINE_BLOCK + BASELINE_BLOCK // 2
        far = np.array([all(abs(int(cb) - c) > 2 * SEGMENT_HALF for c in out) for cb in centres])
        if far.sum() >= 2:
            ranked = np.flatnonzero(far)[np.argsort(maxima[far])]
            typical = [int(centres[ranked[len(ranked) // 2]]), int(centres[ranked[(3 * len(ranked)) // 4]])]
    return out, typical


# ---------------------------------------------------------------------------------------------
# 3. Refine: exhaustive shape fits in a segment
# ---------------------------------------------------------------------------------------------


class _Cums:
    """Cumulative sums of v and t*v so that sum_{t in [a, b)} v_t (alpha + beta t) is O(1)."""

    def __init__(self, v: np.ndarray):
        t = np.arange(len(v), dtype=np.float64)
        self.p0 = np.concatenate([[0.0], np.cumsum(v)])
        self.p1 = np.concatenate([[0.0], np.cumsum(t * v)])

    def lin(self, a, b, alpha, beta):
        return alpha * (self.p0[b] - self.p0[a]) + beta * (self.p1[b] - self.p1[a])


def _triangle_norms(phi: float) -> np.ndarray:
    """||a - phi * shift(a)||^2 of the unit triangle of every width (index = width)."""
    out = np.zeros(MAX_WIDTH + 1)
    for w in range(2, MAX_WIDTH + 1):
        h = (w - 1) / 2.0
        a = 1.0 - np.abs(np.arange(w) - h) / h
        g = np.concatenate([a, [0.0]]) - phi * np.concatenate([[0.0], a])
        out[w] = float(np.dot(g, g))
    return out


def _ramp_norms(phi: float) -> np.ndarray:
    """Ramp part of ||a - phi * shift(a)||^2 for the 0..1 ramp of every width (the hold adds (1-phi)^2 per sample)."""
    out = np.zeros(MAX_WIDTH + 1)
    for w in range(2, MAX_WIDTH + 1):
        a = np.arange(w) / (w - 1.0)
        g = a - phi * np.concatenate([[0.0], a[:-1]])
        out[w] = float(np.dot(g, g))
    return out


_NORM_CACHE: dict[float, tuple[np.ndarray, np.ndarray]] = {}


def _norms(phi: float) -> tuple[np.ndarray, np.ndarray]:
    """Template norms for this phi (memoised; safe when the eval runner calls from several threads)."""
    key = round(phi, 4)
    found = _NORM_CACHE.get(key)
    if found is None:
        found = (_triangle_norms(key), _ramp_norms(key))
        if len(_NORM_CACHE) > 256:
            _NORM_CACHE.clear()
        _NORM_CACHE[key] = found
    return found


def _top_periods(y: np.ndarray, max_period: int, count: int = 3) -> list[int]:
    """Integer periods (4..max_period) of the strongest local-spectrum peaks of y, distinct by more than 1."""
    size = 1 << max(8, int(math.ceil(math.log2(max(len(y), 2)))))
    power = np.abs(np.fft.rfft(y - y.mean(), size)) ** 2
    freqs = np.arange(len(power)) / size
    ok = (freqs >= 1.0 / max_period) & (freqs <= 0.25)
    if not ok.any():
        return []
    idx = np.flatnonzero(ok)
    periods: list[int] = []
    for i in idx[np.argsort(power[idx])[::-1]]:
        p = min(max(int(round(1.0 / freqs[i])), 4), max_period)
        if all(abs(p - q) > 1 for q in periods):
            periods.append(p)
        if len(periods) == count:
            break
    return periods


COARSE_WIDTHS = np.unique(np.round(np.geomspace(MIN_WIDTH, MAX_WIDTH, 24)).astype(np.int64))
FINE_START_RADIUS = 24  # the fine pass tries starts (or ends) within this many samples of the coarse one


class _Segment:
    """One stretch of the series, ready for exact shape fits at any (start, width).

    In segment coordinates t = 0..n-1 the pre-whitened data are y_t = r_t - phi r_{t-1} (t >= 1)
    with the nuisance trend projected out. For an x-domain template a the pre-whitened template
    is g_t = a_t - phi a_{t-1}; its correlation with y, and its products with the nuisance basis,
    are sums of a against fixed sequences (u and one c per basis vector), and since every
    template is piecewise linear each such sum is O(1) from two cumulative sums.
    """

    def __init__(self, seg: np.ndarray, phi: float, sigma: float, offset: int = 0):
        n = len(seg)
        self.n, self.phi, self.sigma = n, phi, sigma
        self.tri_norm, self.ramp_norm = _norms(phi)
        t = np.arange(n, dtype=np.float64)
        self.t = t
        y = np.zeros(n)
        y[1:] = (seg[1:] - phi * seg[:-1]) / sigma
        # Nuisance columns (level, slope and, near the series start, the log trend whose steep
        # beginning no line follows), pre-whitened like the data and orthonormalised on t = 1..n-1.
        columns = [np.ones(n), t]
        if offset < LOG_NUISANCE_SPAN:
            columns.append(np.log1p(offset + t))
        nuisance = np.stack(columns, axis=1)
        filtered = nuisance[1:] - phi * nuisance[:-1]
        # A random walk (phi = 1) turns the constant into zeros: drop such columns before QR, or
        # Householder would fill the gap with an arbitrary direction and orthogonalise against it.
        norms = np.linalg.norm(filtered, axis=0)
        filtered = filtered[:, norms > 1e-9 * norms.max()]
        q, r = np.linalg.qr(filtered)
        keep = np.abs(np.diag(r)) > 1e-8 * (np.abs(np.diag(r)).max() or 1.0)
        basis = q[:, keep]  # (n - 1, k)
        yy = y[1:]
        self.yp = yp = np.concatenate([[0.0], yy - basis @ (basis.T @ yy)])
        later = np.concatenate([yp[1:], [0.0]])
        self.U = _Cums(yp - phi * later)
        # For each basis vector e, the sequence c with sum_t a_t c_t = <g, e> (g the pre-whitened template).
        self.C = []
        for e in basis.T:
            full = np.concatenate([[0.0], e])  # e indexed by t, e[0] unused
            self.C.append(_Cums(full - phi * np.concatenate([full[1:], [0.0]])))
        self.Q = np.concatenate([[0.0], np.cumsum(yp * yp)])
        self._coarse = None  # the coarse (widths x every start) grid, shared by all shapes

    def grid(self, widths: np.ndarray, starts: np.ndarray):
        """(W, S, E, valid) broadcast arrays; a window must leave one sample after it in the segment.

        `starts` is one row of starts shared by every width, or a (widths x k) array of its own.
        """
        W = np.asarray(widths, dtype=np.int64)[:, None]
        S = np.asarray(starts, dtype=np.int64)
        S = S[None, :] if S.ndim == 1 else S
        valid = (S >= 1) & (S + W <= self.n - 1)
        Sv = np.where(valid, S, 1)
        Ev = np.minimum(np.where(valid, S + W, 1 + W), self.n)
        return W, Sv, Ev, valid

    def _fit(self, parts, norm2, valid):
        corr = sum(self.U.lin(a, b, al, be) for a, b, al, be in parts)
        perp = norm2
        for c in self.C:
            g = sum(c.lin(a, b, al, be) for a, b, al, be in parts)
            perp = perp - g * g
        perp = np.maximum(perp, 1e-9)
        gain = np.where(valid, corr * corr / (2.0 * perp), -np.inf)
        return gain, corr / perp * self.sigma

    def evaluate(self, kind: str, widths, starts, *, period: int = 0, min_width: int = MIN_WIDTH, grid=None):
        """(gain, amplitude) arrays over widths x starts for one anomaly shape."""
        W, S, E, valid = grid if grid is not None else self.grid(widths, starts)
        valid = valid & (W >= min_width)
        Wf = W.astype(np.float64)
        phi, n = self.phi, self.n
        if kind == lb.LEVEL_SHIFT:  # a box of ones on [s, e)
            norm = 1.0 + (Wf - 1.0) * (1.0 - phi) ** 2 + phi * phi
            return self._fit([(S, E, 1.0, 0.0)], norm, valid)
        if kind == lb.TRANSIENT_SPIKE:  # 0 at both edges, 1 at the centre
            h = (Wf - 1.0) / 2.0
            mid = S + np.floor(h).astype(np.int64) + 1
            return self._fit([(S, mid, -S / h, 1.0 / h), (mid, E, (S + Wf - 1.0) / h, -1.0 / h)], self.tri_norm[W], valid)
        if kind == lb.TREND:  # ramp 0..1 over [s, e), then 1 to the end of the segment
            norm = self.ramp_norm[W] + (1.0 - phi) ** 2 * (n - E)
            parts = [(S, E, -S / (Wf - 1.0), 1.0 / (Wf - 1.0)), (E, np.full_like(E, n), 1.0, 0.0)]
            return self._fit(parts, norm, valid)
        if kind == lb.VARIANCE:  # extra white noise: energy of the window against unit variance
            v = (self.Q[E] - self.Q[S]) / Wf
            gain = np.where(valid & (v > 1.0), 0.5 * Wf * (v - 1.0 - np.log(np.maximum(v, 1e-12))), -np.inf)
            return gain, self.sigma * np.sqrt(np.maximum(v - 1.0, 0.0) / (1.0 + phi * phi))
        if kind == lb.SEASONALITY:  # a sine burst of period p: two-parameter (sin, cos) fit
            Z = self._demodulated(period)
            z = Z[E] - Z[S]
            gain = np.where(valid & (W >= 2 * period), (np.abs(z) ** 2) / Wf, -np.inf)
            response = max(abs(1 - phi * np.exp(-2j * np.pi / period)), 1e-3)
            return gain, 2.0 * np.abs(z) / Wf * self.sigma / response
        raise ValueError(kind)

    def _demodulated(self, period: int) -> np.ndarray:
        cache = self.__dict__.setdefault("_demod", {})
        if period not in cache:
            cache[period] = np.concatenate([[0.0], np.cumsum(self.yp * np.exp(-2j * np.pi * self.t / period))])
        return cache[period]

    def best(self, kind: str, *, periods: tuple[int, ...] = (0,), min_width: int = MIN_WIDTH) -> Finding | None:
        """Coarse grid of widths at every start, then every width and start near the coarse best.

        For the sine burst, `periods` are tried on the coarse grid and the fine pass also tries
        the neighbours (period +- 1) of the coarse winner.
        """
        starts = np.arange(1, self.n)
        if self._coarse is None:
            self._coarse = self.grid(COARSE_WIDTHS, starts)
        best_gain, coarse = -np.inf, None
        for p in periods:
            gain, _ = self.evaluate(kind, COARSE_WIDTHS, starts, period=p, min_width=min_width, grid=self._coarse)
            i = int(np.argmax(gain))
            if gain.flat[i] > best_gain:
                best_gain, coarse = float(gain.flat[i]), (p, int(COARSE_WIDTHS[i // gain.shape[1]]), int(starts[i % gain.shape[1]]))
        if coarse is None or not np.isfinite(best_gain):
            return None
        p0, w0, s0 = coarse
        # Fine pass: every width, with the window's start or its end near either edge of the
        # coarse window. On a random walk (phi = 1) a box's evidence sits in its two edges alone,
        # so a coarse window may have found just one of them, as its start or as its end.
        widths = np.arange(MIN_WIDTH, MAX_WIDTH + 1)
        near = np.arange(-FINE_START_RADIUS, FINE_START_RADIUS + 1)
        grids = []
        for edge in (s0, s0 + w0):
            grids.append((edge + near)[None, :].repeat(len(widths), axis=0))  # a window starting there
            grids.append((edge + near)[None, :] - widths[:, None])  # a window ending there
        found = None
        for starts in grids:
            fine_grid = self.grid(widths, starts)
            for p in ((p0 - 1, p0, p0 + 1) if p0 else (0,)):
                if p0 and p < 4:
                    continue
                gain, amp = self.evaluate(kind, widths, starts, period=p, min_width=min_width, grid=fine_grid)
                j = int(np.argmax(gain))
                if np.isfinite(gain.flat[j]) and (found is None or gain.flat[j] > found.gain):
                    wi, si = divmod(j, gain.shape[1])
                    w, st = int(widths[wi]), int(fine_grid[1][wi, si])
                    found = Finding(kind, st, st + w, float(gain.flat[j]), float(amp.flat[j]), p)
        return found


def refine(
    r: np.ndarray, lo: int, hi: int, phi: float, sigma: float, *, variance_min_width: int = 64,
) -> dict[str, Finding]:
    """The best window of each kind in r[lo:hi] (periodic part already removed), in series indices.

    Gains are raw log-likelihood ratios; kind penalties are applied when deciding (`Settings`).
    """
    if hi - lo < 2 * MIN_WIDTH + 4:
        return {}
    segment = _Segment(r[lo:hi].astype(np.float64), phi, sigma, offset=lo)
    results: dict[str, Finding] = {}
    for kind in (lb.LEVEL_SHIFT, lb.TRANSIENT_SPIKE, lb.TREND):
        f = segment.best(kind)
        if f is not None:
            results[kind] = f
    f = segment.best(lb.VARIANCE, min_width=variance_min_width)
    if f is not None:
        results[lb.VARIANCE] = f
    n = segment.n
    centre = segment.yp[max(1, n // 2 - MAX_WIDTH):min(n, n // 2 + MAX_WIDTH)]
    periods = tuple(_top_periods(centre, MAX_WIDTH // 2))
    if periods:
        f = segment.best(lb.SEASONALITY, periods=periods)
        if f is not None:
            results[lb.SEASONALITY] = f
    return {kind: f.shifted(lo) for kind, f in results.items()}


# ---------------------------------------------------------------------------------------------
# One channel, end to end
# ---------------------------------------------------------------------------------------------


def analyse_channel(x: np.ndarray, *, variance_min_width: int = 64, n_candidates: int = N_CANDIDATES) -> ChannelResult:
    """Background model, scan, refinement: the channel's best anomaly and the best of each kind."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    x1 = x - trend_part(x)
    periodic, f0 = periodic_part(x1)
    r2 = x1 - periodic if periodic is not None else x1
    if periodic is not None:
        unreliable = jump_samples(x1, periodic, f0)
        if unreliable.any() and not unreliable.all():
            idx = np.arange(n)
            r2 = r2.copy()
            r2[unreliable] = np.interp(idx[unreliable], idx[~unreliable], r2[~unreliable])
    r = r2 - block_median_baseline(r2)
    phi = ar1_coefficient(r2)
    y = r[1:] - phi * r[:-1]
    # Float32 storage can leave a channel dominated by a steep trend with no visible noise at all;
    # the floor keeps the likelihood from treating rounding as the noise level.
    sigma = max(robust_sigma(y), NOISE_FLOOR * (float(np.std(x)) or 1.0))
    candidates, typical = scan_candidates(r, phi, sigma, n_candidates)
    by_kind: dict[str, Finding] = {}
    null_by_kind: dict[str, float] = {}
    for centre in candidates + typical:
        lo = max(0, centre - SEGMENT_HALF)
        hi = min(n, centre + SEGMENT_HALF)
        found = refine(r2, lo, hi, phi, sigma, variance_min_width=variance_min_width)
        if centre in typical:
            for kind, f in found.items():
                null_by_kind[kind] = max(null_by_kind.get(kind, 0.0), f.gain)
            continue
        for kind, f in found.items():
            if kind not in by_kind or by_kind[kind].gain < f.gain:
                by_kind[kind] = f
    # The background std without the anomaly: the generator measures magnitudes against it.
    mask = np.ones(n, dtype=bool)
    shift = by_kind.get(lb.LEVEL_SHIFT)
    if shift is not None:
        mask[shift.start:shift.end] = False
    sigma_x = float(np.std(x[mask])) if mask.sum() > 1 else float(np.std(x))
    return ChannelResult(by_kind, sigma_x or 1.0, n, phi, periodic is not None, null_by_kind)


def presence_threshold(length: int, offset: float) -> float:
    """Evidence needed to call an anomaly: grows like log L, the null maximum over L positions."""
    return math.log(max(length, 2)) + offset


# ---------------------------------------------------------------------------------------------
# Answers
# ---------------------------------------------------------------------------------------------


def _series(task: EpisodeTask) -> list[np.ndarray]:
    if task.values is None:
        raise ValueError("the detector needs the task's series")
    return [np.asarray(values, dtype=np.float64) for values in task.values]


def _lead_lag(a: Finding, b: Finding, length: int) -> tuple[str, int]:
    """Direction and lag from the two onsets: more than L/4 apart means independent."""
    delta = b.start - a.start
    if abs(delta) > length / 4:
        return "independent", 0
    if delta == 0:
        return "lead", 1
    return ("lead" if delta > 0 else "lag"), abs(delta)


def analyse(category: str, values: list[np.ndarray]) -> list[ChannelResult]:
    """Every channel's analysis. Only lead-lag rows let a variance window be as short as 11 samples."""
    short = category in (lb.LEAD_LAG, lb.INDICATOR)
    return [analyse_channel(v, variance_min_width=11 if short else 64) for v in values]


def decide(
    category: str, length: int, names: list[str], options: list[str], results: list[ChannelResult],
    settings: Settings = DEFAULT,
) -> dict:
    """The answer object for any category from the channels' analyses (pure: no signal work)."""
    c, L = category, length
    best = [r.best(settings) for r in results]
    if c in (lb.LEAD_LAG, lb.INDICATOR):
        direction, lag = _lead_lag(best[0], best[1], L)
        if c == lb.LEAD_LAG:
            return decode.lead_lag_answer(direction, lag, L)
        return {"answer": decode.preferred_option(options, [lb.DIRECTION_TO_INDICATOR[direction]])}
    if c in (lb.ALL_CHANNELS, lb.IDENTIFICATION):
        threshold = presence_threshold(L, settings.channel_offset)
        evidence = [r.evidence(settings) for r in results]
        if c == lb.ALL_CHANNELS:
            events = [(names[i], best[i].start, best[i].end) for i in _flag_channels(best, evidence, threshold)]
            return decode.all_channels_answer(events, L)
        probability = {}
        for i, name in enumerate(names):
            margin = min(max(evidence[i] - threshold, -50.0), 50.0)
            probability[name] = 1.0 / (1.0 + math.exp(-margin))
        return {"answer": decode.identification_option(options, probability)}
    result, top = results[0], best[0]
    present = result.evidence(settings) > presence_threshold(L, settings.presence_offset)
    if c == lb.LOCALIZE:
        return decode.localize_answer(present, top.start, top.end, L)
    if c == lb.CLASSIFY:
        return decode.classify_answer(top.kind, top.start, top.end, L)
    if c == lb.MAGNITUDE:
        return decode.magnitude_answer(result.magnitude())
    if c == lb.PRESENCE:
        return {"answer": decode.preferred_option(options, [lb.YES if present else lb.NO])}
    if c == lb.START_TIME:
        wanted = start_bin(top.start, L) if present else lb.NO_ANOMALY_OPTION
        return {"answer": decode.preferred_option(options, [wanted])}
    if c == lb.CATEGORIZATION:
        kinds = [f.kind for f in result.ranked(settings)]
        return {"answer": decode.preferred_option(options, kinds + [lb.NO_ANOMALY_OPTION])}
    if c == lb.MAGNITUDE_BAND:
        return {"answer": decode.preferred_option(options, [magnitude_band(result.magnitude())])}
    raise ValueError(f"unknown category {c!r}")


def answer_object(task: EpisodeTask, settings: Settings = DEFAULT) -> dict:
    """The answer object for any category, computed from the task's series alone."""
    results = analyse(task.category, _series(task))
    return decide(task.category, task.length, list(task.channel_names), list(task.options), results, settings)


def _flag_channels(best: list[Finding], evidence: list[float], threshold: float, max_events: int = 3) -> list[int]:
    """Channels whose evidence clears the threshold, strongest first, at most three, and never two
    whose windows overlap in time (the generator keeps all-channels windows disjoint)."""
    chosen: list[int] = []
    for i in sorted(range(len(best)), key=lambda i: -evidence[i]):
        f = best[i]
        if evidence[i] <= threshold or len(chosen) == max_events:
            break
        if any(f.start < best[j].end and best[j].start < f.end for j in chosen):
            continue
        chosen.append(i)
    return chosen


# ---------------------------------------------------------------------------------------------
# Calibration (run once on the train split; the results are the Settings defaults)
# ---------------------------------------------------------------------------------------------


@dataclass
class Analysed:
    """One precise row with its channels analysed: what `fit_settings` searches over."""

    category: str
    length: int
    names: list[str]
    gold: dict
    results: list[ChannelResult]


def _mean_score(rows: list[Analysed], settings: Settings) -> float:
    from tsbench.tasks.anomalyxl.scoring import score

    values = [score(r.category, r.gold, decode.answer_text(decide(r.category, r.length, r.names, [], r.results, settings))) for r in rows]
    return float(np.mean(values)) if values else 0.0


def fit_settings(rows: list[Analysed]) -> Settings:
    """Grid search of the four constants, each on the category it governs: kind penalties on
    classify-with-evidence, the presence offset on localize, the channel offset on all-channels."""
    by_category: dict[str, list[Analysed]] = {}
    for r in rows:
        by_category.setdefault(r.category, []).append(r)
    settings = DEFAULT
    grid = {
        "seasonality_penalty": [0.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0],
        "variance_penalty": [-4.0, -2.0, 0.0, 2.0, 4.0, 8.0],
        "presence_offset": [float(v) for v in np.arange(-4.0, 24.5, 0.5)],
        "channel_offset": [float(v) for v in np.arange(-4.0, 24.5, 0.5)],
    }
    target = {
        "seasonality_penalty": lb.CLASSIFY, "variance_penalty": lb.CLASSIFY,
        "presence_offset": lb.LOCALIZE, "channel_offset": lb.ALL_CHANNELS,
    }
    from dataclasses import replace

    for name, values in grid.items():
        subset = by_category.get(target[name], [])
        if not subset:
            continue
        scored = [(_mean_score(subset, replace(settings, **{name: v})), -abs(v - getattr(DEFAULT, name)), v) for v in values]
        settings = replace(settings, **{name: max(scored)[2]})
    return settings


def _analyse_row(item):
    category, length, names, gold, values = item
    return Analysed(category, length, names, gold, analyse(category, list(values)))


def calibrate(path, *, workers: int = 2, limit: int | None = None) -> Settings:
    """Analyse the precise rows of a (train) split file and fit the Settings on them."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    from tsbench.tasks.anomalyxl.rows import iter_rows

    def items():
        for i, row in enumerate(iter_rows(path)):
            if limit is not None and i >= limit:
                return
            yield row.category, row.length, row.channel_names, row.gold, row.values

    if workers <= 1:
        rows = [_analyse_row(item) for item in items()]
    else:
        rows = []
        batch: list = []
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
            for item in items():  # a few rows in flight at a time, not the whole split in memory
                batch.append(item)
                if len(batch) == 4 * workers:
                    rows.extend(pool.map(_analyse_row, batch))
                    batch = []
            rows.extend(pool.map(_analyse_row, batch))
    return fit_settings(rows)


class Detector:
    """A reference policy for the `direct` harness: it reads the full-resolution series, which no
    chat harness shows a model, and knows the generator's rules; it is ranked apart from models."""

    reference = "knows the generator"
    harnesses = ("direct",)

    def __init__(self, name: str = "default", settings: Settings = DEFAULT):
        self.name = f"detector/{name}"
        self.settings = settings

    def answer(self, task: EpisodeTask) -> str:
        return decode.answer_text(answer_object(task, self.settings))

    def close(self) -> None:
        pass


DETECTORS = {"default": Detector}


def build(name: str) -> Detector:
    if name not in DETECTORS:
        raise LookupError(name)
    return DETECTORS[name](name)
