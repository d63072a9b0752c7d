"""The classical baseline's feature extractor (paper Appendix B): 25 values per channel, 56 per question.

Every function here is pure and deterministic: arrays in, numbers out, no training. The feature
design is where the task knowledge lives; the heads in `classical.py` only learn thresholds and
combinations of these numbers.

Conventions that make one head work across the four series lengths:
- positions are fractions of the (decimated) series in [0, 1], and -1 when there is nothing to point
  at (no exceedance, no change point), so a span regressor trained at one L answers at another;
- amplitudes are in units of a scale measured on the same channel (robust MAD, or the std);
- the raw length enters once, as log2 L.
Index-valued answers are mapped back to raw samples by the caller (fraction * L, i.e. through the
decimation stride).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

MAX_POINTS = 16_384  # decimate by stride to at most this many points
PELT_GRID = 2_048  # change points are searched on this many block means
MP_GRID = 4_096  # the matrix profile runs on this many block means
WINDOW_DIVISOR = 64  # rolling-std and matrix-profile windows are L/64
PELT_PENALTY = 3.0  # penalty per change point, in units of log(n) * noise variance
MAD_TO_SIGMA = 1.4826

CHANNEL_FEATURES: tuple[str, ...] = (
    # robust-z geometry
    "max_abs_z",
    "argmax_abs_z",
    "frac_z4",
    "frac_z8",
    "first_exceed",
    "last_exceed",
    "run_start",
    "run_end",
    "run_len",
    "run_count",
    "peak_width6",
    # half-series contrasts
    "level_shift",
    "log_var_ratio",
    "slope",
    # rolling-variance localisation
    "rollstd_max_z",
    "rollstd_argmax",
    # spectral change between halves
    "fft_power_ratio",
    "fft_freq_shift",
    # change points (PELT, l2)
    "cp_count",
    "cp_first",
    "cp_max_jump",
    "cp_max_jump_loc",
    # matrix profile
    "mp_max",
    "mp_argmax",
    # series length
    "log2_length",
)
N_CHANNEL = len(CHANNEL_FEATURES)  # 25
CROSS_FEATURES: tuple[str, ...] = ("xc_best_corr", "xc_lag_frac", "xc_zero_corr", "xc_max_z_a", "xc_max_z_b")
QUESTION_FEATURES: tuple[str, ...] = (
    tuple(f"worst_{n}" for n in CHANNEL_FEATURES)
    + tuple(f"mean_{n}" for n in CHANNEL_FEATURES)
    + ("n_channels",)
    + CROSS_FEATURES
)
N_QUESTION = len(QUESTION_FEATURES)  # 56
FEATURE_VERSION = 2  # bump when any value changes, so cached features are recomputed

_IDX = {name: i for i, name in enumerate(CHANNEL_FEATURES)}
NONE_POS = -1.0


# ---------------------------------------------------------------------------------------------
# stumpy, with its numba kernels cached on disk
# ---------------------------------------------------------------------------------------------

_STUMPY = None


def _stumpy():
    """Import stumpy once, with numba's on-disk cache enabled for its compiled functions.

    stumpy's kernels take about a minute to JIT-compile on a small machine, in every new process
    (each pool worker, each test run). numba can cache compiled machine code on disk; stumpy does not
    ask for it, so we switch it on per function through numba's public `enable_caching()`, into
    NUMBA_CACHE_DIR when the user set one, else the user cache dir. The first process still
    compiles; later ones load in well under a second.
    """
    global _STUMPY
    if _STUMPY is None:
        import os

        import numba

        if not os.environ.get("NUMBA_CACHE_DIR"):
            from platformdirs import user_cache_dir

            numba.config.CACHE_DIR = os.path.join(user_cache_dir("tsbench"), "numba")
        import importlib

        import stumpy
        from numba.core.registry import CPUDispatcher

        # Module objects, not the package attributes: `stumpy.stump` is the function of that name.
        for module_name in ("stumpy.core", "stumpy.stump"):
            for value in vars(importlib.import_module(module_name)).values():
                if isinstance(value, CPUDispatcher):
                    try:
                        value.enable_caching()
                    except Exception:  # caching is an optimisation; never fail a feature over it
                        pass
        _STUMPY = stumpy
    return _STUMPY


def _stump(x: np.ndarray, m: int) -> np.ndarray:
    """stumpy.stump on one numba thread.

    On a small shared machine stumpy's thread pool costs more than it gives (0.25 s against
    0.045 s for 4,096 points on two busy cores), and the training pool already runs one process
    per core. numba's thread count is per calling thread, so this leaves other callers alone.
    """
    import numba

    stumpy = _stumpy()
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        return stumpy.stump(x, m)
    finally:
        numba.set_num_threads(previous)


def warm_up() -> None:
    """Compile (or load from the cache) stumpy's kernels now rather than inside the first row."""
    _stump(np.sin(np.arange(256) / 5.0) + np.linspace(0, 1, 256), 16)


# ---------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------


def decimate(x: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, int]:
    """(x[::stride], stride) with the smallest stride that leaves at most `max_points` points.

    Stride subsampling (not averaging) is the paper's choice: a raw index is `i * stride`.
    """
    x = np.asarray(x, dtype=np.float64)
    stride = max(1, math.ceil(len(x) / max_points))
    return x[::stride], stride


def block_means(x: np.ndarray, points: int) -> np.ndarray:
    """Means of `points` near-equal consecutive blocks (x itself when it is already that short).

    Averaging onto a coarse grid keeps a short level change visible where plain striding would
    alias it, and cuts the noise the change-point and matrix-profile searches have to see through.
    """
    if len(x) <= points:
        return np.asarray(x, dtype=np.float64)
    edges = np.linspace(0, len(x), points + 1).astype(np.int64)
    sums = np.add.reduceat(x, edges[:-1])
    return sums / np.diff(edges)


def robust_scale(x: np.ndarray) -> tuple[float, float]:
    """(median, MAD * 1.4826), falling back to the std (then 1) when most values are equal."""
    med = float(np.median(x))
    mad = MAD_TO_SIGMA * float(np.median(np.abs(x - med)))
    if not mad > 1e-12:
        mad = float(np.std(x))
    if not mad > 1e-12:
        mad = 1.0
    return med, mad


def robust_z(x: np.ndarray) -> np.ndarray:
    """Global median/MAD z-scores: one outlying window barely moves either statistic."""
    med, mad = robust_scale(x)
    return (x - med) / mad


def runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the True runs of a boolean array, half-open."""
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    change = np.diff(padded)
    return np.flatnonzero(change == 1), np.flatnonzero(change == -1)


def rolling_std(x: np.ndarray, window: int) -> np.ndarray:
    """Std of every full window x[i:i+window] (len(x) - window + 1 values), via cumulative sums."""
    window = max(2, min(window, len(x)))
    c1 = np.concatenate([[0.0], np.cumsum(x)])
    c2 = np.concatenate([[0.0], np.cumsum(x * x)])
    mean = (c1[window:] - c1[:-window]) / window
    var = (c2[window:] - c2[:-window]) / window - mean * mean
    return np.sqrt(np.maximum(var, 0.0))


def dominant_frequency(x: np.ndarray) -> tuple[float, float]:
    """(frequency in cycles per sample, share of the non-DC power) of the strongest rFFT bin."""
    x = np.asarray(x, dtype=np.float64)
    if len(x) < 4:
        return 0.0, 0.0
    power = np.abs(np.fft.rfft(x - x.mean())) ** 2
    power[0] = 0.0
    total = float(power.sum())
    if total <= 0.0:
        return 0.0, 0.0
    k = int(np.argmax(power))
    return k / len(x), float(power[k]) / total


# ---------------------------------------------------------------------------------------------
# The five feature groups (each on the decimated series, n points)
# ---------------------------------------------------------------------------------------------


def zscore_features(x: np.ndarray) -> dict[str, float]:
    """Robust-z geometry: how far the worst point goes, where, and the shape of the |z| > 4 runs."""
    n = len(x)
    z = np.abs(robust_z(x))
    peak = int(np.argmax(z))
    out = {
        "max_abs_z": float(z[peak]),
        "argmax_abs_z": peak / n,
        "frac_z4": float(np.mean(z > 4.0)),
        "frac_z8": float(np.mean(z > 8.0)),
    }
    starts, ends = runs(z > 4.0)
    if len(starts):
        longest = int(np.argmax(ends - starts))
        out.update(
            first_exceed=starts[0] / n,
            last_exceed=(ends[-1] - 1) / n,
            run_start=starts[longest] / n,
            run_end=ends[longest] / n,
            run_len=(ends[longest] - starts[longest]) / n,
            run_count=float(len(starts)),
        )
    else:
        out.update(
            first_exceed=NONE_POS,
            last_exceed=NONE_POS,
            run_start=NONE_POS,
            run_end=NONE_POS,
            run_len=0.0,
            run_count=0.0,
        )
    width = 0.0
    if z[peak] > 6.0:
        s6, e6 = runs(z > 6.0)
        i = int(np.searchsorted(s6, peak, side="right")) - 1
        width = (e6[i] - s6[i]) / n
    out["peak_width6"] = width
    return out


def half_contrasts(x: np.ndarray) -> dict[str, float]:
    """Second half against first: mean shift and log variance ratio; and the global linear slope.

    Shift and slope are in units of the series' std, the slope per whole series, so a level shift
    of height h at the midpoint of a quiet series reads as about 2 (its std is h/2).
    """
    n = len(x)
    scale = float(np.std(x)) or 1.0
    half = n // 2
    a, b = x[:half], x[half:]
    shift = (float(b.mean()) - float(a.mean())) / scale
    eps = 1e-12 * scale * scale + 1e-300
    log_var = math.log((float(b.var()) + eps) / (float(a.var()) + eps))
    t = np.arange(n, dtype=np.float64)
    t -= t.mean()
    slope = float(np.dot(t, x - x.mean()) / np.dot(t, t)) * n / scale
    return {"level_shift": shift, "log_var_ratio": log_var, "slope": slope}


def rolling_std_features(x: np.ndarray) -> dict[str, float]:
    """Robust z of a rolling std (window n/64): a variance change stands out where it begins."""
    n = len(x)
    window = max(2, n // WINDOW_DIVISOR)
    rs = rolling_std(x, window)
    z = robust_z(rs)
    i = int(np.argmax(z))
    return {"rollstd_max_z": float(z[i]), "rollstd_argmax": (i + window / 2) / n}


def spectral_features(x: np.ndarray, stride: int = 1) -> dict[str, float]:
    """Dominant-frequency power share (log ratio, second half over first) and frequency shift.

    The shift is in cycles per raw sample (hence `stride`), so it means the same at every L.
    """
    half = len(x) // 2
    fa, pa = dominant_frequency(x[:half])
    fb, pb = dominant_frequency(x[half:])
    ratio = math.log((pb + 1e-12) / (pa + 1e-12))
    return {"fft_power_ratio": ratio, "fft_freq_shift": (fb - fa) / stride}


def changepoint_features(x: np.ndarray, grid: int = PELT_GRID, penalty: float = PELT_PENALTY) -> dict[str, float]:
    """PELT with an l2 (piecewise-constant mean) cost on block means of the series.

    ruptures' KernelCPD with the linear kernel is exactly the l2 cost, searched by PELT in C: the
    pure-Python `Pelt(model="l2")` gives the same segmentation but takes ~1 s per channel at
    jump=5 and ~25 s at jump=1 on 2,048 points. Values are scaled by a noise level read from first
    differences, so the penalty (3 log n per change) means the same on quiet and noisy channels.
    Jumps are in units of the decimated series' robust scale, like the z features.
    """
    import ruptures as rpt

    g = block_means(x, grid)
    n = len(g)
    _, scale = robust_scale(x)
    noise = MAD_TO_SIGMA * float(np.median(np.abs(np.diff(g) - np.median(np.diff(g))))) / math.sqrt(2.0)
    if not noise > 1e-12:
        noise = float(np.std(g)) or 1.0
    signal = ((g - g.mean()) / noise).reshape(-1, 1)
    bkps = rpt.KernelCPD(kernel="linear", min_size=2).fit(signal).predict(pen=penalty * math.log(n))
    cps = [int(b) for b in bkps[:-1]]
    if not cps:
        return {"cp_count": 0.0, "cp_first": NONE_POS, "cp_max_jump": 0.0, "cp_max_jump_loc": NONE_POS}
    edges = [0, *cps, n]
    means = np.array([g[s:e].mean() for s, e in zip(edges[:-1], edges[1:])])
    jumps = np.abs(np.diff(means))
    j = int(np.argmax(jumps))
    return {
        "cp_count": float(len(cps)),
        "cp_first": cps[0] / n,
        "cp_max_jump": float(jumps[j]) / scale,
        "cp_max_jump_loc": cps[j] / n,
    }


def matrix_profile_features(x: np.ndarray, grid: int = MP_GRID) -> dict[str, float]:
    """Top discord of the z-normalised matrix profile (stumpy) on block means, window grid/64.

    The distance is divided by sqrt(window) so the value reads the same on a shorter grid
    (its range is [0, 2]). The location is the discord's centre as a fraction of the series.
    """
    g = block_means(x, grid)
    n = len(g)
    m = max(4, n // WINDOW_DIVISOR)
    if n < 2 * m + 2 or float(np.std(g)) <= 0.0:
        return {"mp_max": 0.0, "mp_argmax": NONE_POS}
    profile = np.asarray(_stump(g, m)[:, 0], dtype=np.float64)
    profile[~np.isfinite(profile)] = np.nan
    if np.all(np.isnan(profile)):
        return {"mp_max": 0.0, "mp_argmax": NONE_POS}
    i = int(np.nanargmax(profile))
    return {"mp_max": float(profile[i]) / math.sqrt(m), "mp_argmax": (i + m / 2) / n}


# ---------------------------------------------------------------------------------------------
# Per channel and per question
# ---------------------------------------------------------------------------------------------


def channel_features(x: np.ndarray) -> np.ndarray:
    """The 25 features of one raw channel, in CHANNEL_FEATURES order (float64)."""
    raw_length = len(x)
    xd, stride = decimate(x)
    values: dict[str, float] = {}
    values.update(zscore_features(xd))
    values.update(half_contrasts(xd))
    values.update(rolling_std_features(xd))
    values.update(spectral_features(xd, stride))
    values.update(changepoint_features(xd))
    values.update(matrix_profile_features(xd))
    values["log2_length"] = math.log2(raw_length)
    out = np.array([values[name] for name in CHANNEL_FEATURES], dtype=np.float64)
    return np.nan_to_num(out, nan=0.0, posinf=1e6, neginf=-1e6)


def cross_features(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Five lead-lag features between two raw channels (or group means) of equal length.

    The paper's plain cross-correlation of the two (decimated, robust-z) series at every lag up to
    L/4 (FFT, zero padded, normalised to a correlation): the best correlation, its lag as a
    fraction of L (positive: B repeats A later, i.e. A leads), the zero-lag correlation, and each
    side's max |z|. The background is not removed first, as in the paper, so two channels with
    unrelated trends or seasons can correlate at a lag that has nothing to do with the anomalies;
    that is part of why this baseline is weak at lead-lag.
    """
    ad, _ = decimate(a)
    bd, _ = decimate(b)
    n = min(len(ad), len(bd))
    za, zb = robust_z(ad[:n]), robust_z(bd[:n])
    pa, pb = za - za.mean(), zb - zb.mean()
    norm = float(np.linalg.norm(pa) * np.linalg.norm(pb)) or 1.0
    size = 1 << int(math.ceil(math.log2(2 * n)))
    # c[k] = sum_t pa[t] * pb[t + k]: peaks at k = +lag when B repeats A's anomaly lag samples later.
    c = np.fft.irfft(np.conj(np.fft.rfft(pa, size)) * np.fft.rfft(pb, size), size) / norm
    max_lag = max(1, n // 4)
    lags = np.concatenate([np.arange(0, max_lag + 1), np.arange(-max_lag, 0)])
    values = c[lags % size]
    i = int(np.argmax(values))
    return np.array([float(values[i]), lags[i] / n, float(c[0]), float(np.max(np.abs(za))), float(np.max(np.abs(zb)))])


def lead_lag_groups(channel_names: Sequence[str]) -> tuple[list[int], list[int]] | None:
    """Indices of the A_ and B_ channels, or None when the row is not a two-group row."""
    a = [i for i, n in enumerate(channel_names) if n.startswith("A_")]
    b = [i for i, n in enumerate(channel_names) if n.startswith("B_")]
    return (a, b) if a and b else None


def row_cross_features(values: np.ndarray, channel_names: Sequence[str]) -> np.ndarray:
    """cross_features between the A group and the B group (zeros when the row has no such groups)."""
    groups = lead_lag_groups(channel_names)
    if groups is None:
        return np.zeros(len(CROSS_FEATURES))
    a = np.mean([np.asarray(values[i], dtype=np.float64) for i in groups[0]], axis=0)
    b = np.mean([np.asarray(values[i], dtype=np.float64) for i in groups[1]], axis=0)
    return cross_features(a, b)


def question_features(channel_matrix: np.ndarray, cross: np.ndarray | None = None) -> np.ndarray:
    """The 56 values describing one question: worst channel (largest max|z|), channel means,
    the channel count and the five cross features (zeros unless given)."""
    channel_matrix = np.atleast_2d(np.asarray(channel_matrix, dtype=np.float64))
    worst = int(np.argmax(channel_matrix[:, _IDX["max_abs_z"]]))
    cross = np.zeros(len(CROSS_FEATURES)) if cross is None else np.asarray(cross, dtype=np.float64)
    return np.concatenate([channel_matrix[worst], channel_matrix.mean(axis=0), [float(len(channel_matrix))], cross])


def row_features(values: np.ndarray, channel_names: Sequence[str], *, cross: bool) -> tuple[np.ndarray, np.ndarray]:
    """(channel matrix (C, 25), cross features (5,)) for one row; cross only when asked for
    (the lead-lag and indicator tasks), zeros otherwise."""
    matrix = np.stack([channel_features(v) for v in values])
    xc = row_cross_features(values, channel_names) if cross else np.zeros(len(CROSS_FEATURES))
    return matrix, xc
