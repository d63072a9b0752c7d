"""TimeClaw's typed tools (paper Table 10 plus anomaly primitives), run inside the sandbox kernel.

The series never leaves the kernel: at the start of an episode the host sends the tool
implementations below to the kernel *as source* (one silent install cell), and each tool call is
one cell that calls the kernel-side dispatcher `_tc_call(name, arguments)`. The dispatcher prints a
single tagged line of compact JSON, which the host reads back as the observation: `{"ok": ...}` or
`{"error": "..."}`. A tool that raises becomes an error observation, never a crash.

Each tool is an ordinary Python function with type hints and a Google-style docstring; its JSON
schema (for native function calling) and its one-line signature (for the text protocol) are
derived from that source with `ast`, the same way as for tools written by capability evolution
(harness/evolve.py). Evolved tools live in a folder `<dir>/<name>/{tool.py, tool.json}`; their
source is parsed here but only ever executed in the kernel.

Kernel-side names: `series`, `channels`, `L` (from the sandbox boot), `TASK` (category, regime,
length, channel names, options: never the gold), numpy as `np`, scipy, and every tool by name.
Heavy libraries (statsmodels, ruptures, stumpy, matplotlib) are imported on first use only.

The functions in the "kernel side" section reference those kernel globals and are never called
in the host process; the host only reads their source.
"""

from __future__ import annotations

import ast
import base64
import inspect
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tsbench.harness.runtime.sandbox import CellResult, truncate_observation

log = logging.getLogger(__name__)

RESULT_TAG = "\x1eTSBENCH_TOOL_RESULT\x1e"
MAX_VALUES = 500  # channel_values and every other array-valued observation stay within this
TOOL_FILE = "tool.py"
TOOL_JSON = "tool.json"
STUMPY_READY = "READY"
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


# =============================================================================== kernel side ==
# Everything in this section is shipped to the kernel as source and runs only there.

def _tc_names(limit=20):
    shown = ", ".join(channels[:limit])
    return shown + (f", ... ({len(channels)} channels in all)" if len(channels) > limit else "")


def _tc_channel(channel=None):
    """(name, float64 values) of a channel; the only channel when there is one and none is named."""
    if channel is None:
        if len(channels) == 1:
            return channels[0], series[channels[0]]
        raise ValueError(f"this series has {len(channels)} channels: name one ({_tc_names()})")
    name = str(channel)
    if name not in series:
        raise ValueError(f"unknown channel {name!r}; channels are {_tc_names()}")
    return name, series[name]


def _tc_range(n, start=None, end=None):
    """A half-open [start, end) inside [0, n); negative indices count from the end, like Python."""
    start = 0 if start is None else int(start)
    end = n if end is None else int(end)
    if start < 0:
        start += n
    if end < 0:
        end += n
    start, end = min(max(start, 0), n), min(max(end, 0), n)
    if end <= start:
        raise ValueError(f"empty range [start, end) = [{start}, {end}) for a channel of {n} samples")
    return start, end


def _tc_finite(x):
    """The values with non-finite entries replaced by the median of the finite ones."""
    x = np.asarray(x, dtype=np.float64)
    bad = ~np.isfinite(x)
    if bad.any():
        good = x[~bad]
        x = np.where(bad, float(np.median(good)) if good.size else 0.0, x)
    return x


def _tc_num(value):
    """A float rounded to 6 significant digits (None when not finite): compact, not lossy where it matters."""
    import math

    value = float(value)
    if not math.isfinite(value):
        return None
    return float(f"{value:.6g}")


def _tc_jsonable(value):
    """numpy and Python values -> plain JSON types, floats rounded by _tc_num."""
    if isinstance(value, dict):
        return {str(k): _tc_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_tc_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_tc_jsonable(v) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _tc_num(value)
    if value is None or isinstance(value, str):
        return value
    return str(value)


def _tc_call(name, arguments):
    """Run one tool and print its tagged JSON result; exceptions become {"error": ...}."""
    import base64
    import json

    function = _TC_TOOLS.get(name)
    if function is None:
        out = {"error": f"unknown tool {name!r}; tools are {', '.join(sorted(_TC_TOOLS))}"}
    else:
        try:
            value = function(**arguments)
            image = None
            if isinstance(value, dict) and isinstance(value.get("_png"), (bytes, bytearray)):
                value = dict(value)
                image = base64.b64encode(value.pop("_png")).decode("ascii")
                value["image"] = "attached"
            out = {"ok": _tc_jsonable(value)}
            if image is not None:
                out["image_png_b64"] = image
        except Exception as exc:  # the model sees the error; the episode goes on
            out = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
    print(_TC_TAG + json.dumps(out, separators=(",", ":"), allow_nan=False))


def _tc_define(name, source):
    """Define an evolved tool from its source; a broken definition becomes a tool that reports it."""
    try:
        exec(compile(source, f"<tool {name}>", "exec"), globals())
        function = globals()[name]
        if not callable(function):
            raise TypeError(f"{name} is not a function")
    except Exception as exc:
        message = f"tool {name!r} could not be defined: {type(exc).__name__}: {exc}"

        def function(**_arguments):
            raise RuntimeError(message)
    _TC_TOOLS[name] = function


def _tc_select(index, task):
    """Verification only: point `series`, `channels`, `L` and `TASK` at held-out task `index`."""
    global series, channels, L, TASK
    prefix = f"{index}::"
    series = {key[len(prefix):]: values for key, values in _TC_ALL.items() if key.startswith(prefix)}
    channels = list(series)
    L = max((len(v) for v in series.values()), default=0)
    TASK = dict(task)


def _tc_zscan(x, detrend, smooth):
    """Detrended residual and its smoothed robust |z| (median / MAD)."""
    from scipy.ndimage import uniform_filter1d

    n = len(x)
    resid = x - uniform_filter1d(x, size=max(1, min(int(detrend), n)), mode="nearest")
    med = np.median(resid)
    mad = 1.4826 * np.median(np.abs(resid - med)) + 1e-12
    score = uniform_filter1d(np.abs(resid - med) / mad, size=max(1, min(int(smooth), n)), mode="nearest")
    return resid, score


def _tc_window_features(x, resid, start, end):
    """Shape of the window [start, end) against its surroundings, in units of the channel std."""
    sd = float(np.std(x)) or 1.0
    inside = x[start:end]
    before, after = x[max(0, start - 256):start], x[end:end + 256]
    around = np.concatenate([before, after]) if len(before) + len(after) else x
    base = float(np.mean(around))
    shift = (float(np.mean(inside)) - base) / sd
    step = (float(np.mean(after)) - float(np.mean(before))) / sd if len(before) and len(after) else 0.0
    centred = inside - np.mean(inside)
    crossings = int(np.sum(np.abs(np.diff(np.sign(centred))) > 0)) if len(inside) > 2 else 0
    outside = np.concatenate([resid[:start], resid[end:]])
    var_ratio = float(np.std(resid[start:end]) / (np.std(outside) + 1e-12)) if len(outside) else 1.0
    mid = float(inside[len(inside) // 2])
    peak_ratio = abs(mid - base) / (abs(float(np.mean(inside)) - base) + 1e-12)
    return {"shift_sigma": shift, "step_sigma": step, "var_ratio": var_ratio,
            "crossing_rate": crossings / max(1, len(inside)), "peak_ratio": min(peak_ratio, 1e6)}


def _tc_grow(score, peak):
    """The window around `peak` where the score stays above max(2.5, 0.35 * peak score)."""
    cut = max(2.5, 0.35 * float(score[peak]))
    start, end = peak, peak + 1
    while start > 0 and score[start - 1] > cut:
        start -= 1
    while end < len(score) and score[end] > cut:
        end += 1
    return start, end


def list_channels() -> dict:
    """Names of the channels loaded in the workspace and the number of samples L in each."""
    return {"channels": list(channels), "n_channels": len(channels), "length": L}


def series_overview() -> dict:
    """Per-channel summary (n, min, max, mean) with the timestamp count and the task metadata.

    The index is the sample number 0..L-1 (no timestamps). At most 64 channels are listed.
    """
    rows = {}
    for name in channels[:64]:
        x = series[name]
        finite = x[np.isfinite(x)]
        rows[name] = {"n": len(x), "min": finite.min() if finite.size else None,
                      "max": finite.max() if finite.size else None,
                      "mean": finite.mean() if finite.size else None}
    out = {"length": L, "n_channels": len(channels), "timestamps": 0,
           "task": {key: TASK.get(key) for key in ("category", "regime")}, "channels": rows}
    if len(channels) > 64:
        out["channels_not_listed"] = len(channels) - 64
    return out


def channel_stats(channel: str | None = None) -> dict:
    """Descriptive statistics of one channel: n, min, max, mean, std, median, q25, q75 (and argmin, argmax).

    Args:
        channel: channel name (may be omitted when there is only one channel)
    """
    name, x = _tc_channel(channel)
    finite = x[np.isfinite(x)]
    if not finite.size:
        return {"channel": name, "n": len(x), "n_finite": 0}
    q25, median, q75 = np.percentile(finite, [25, 50, 75])
    return {"channel": name, "n": len(x), "n_finite": int(finite.size), "min": finite.min(),
            "max": finite.max(), "mean": finite.mean(), "std": finite.std(ddof=1) if finite.size > 1 else 0.0,
            "median": median, "q25": q25, "q75": q75,
            "argmin": int(np.nanargmin(np.where(np.isfinite(x), x, np.inf))),
            "argmax": int(np.nanargmax(np.where(np.isfinite(x), x, -np.inf)))}


def channel_values(channel: str | None = None, start: int = 0, end: int | None = None, stride: int = 1) -> dict:
    """Raw values x[start:end:stride] of one channel, at most 500 per call.

    Args:
        channel: channel name (may be omitted when there is only one channel)
        start: first index (inclusive)
        end: last index (exclusive); default L
        stride: keep every stride-th sample (>= 1); raise it to see a long range coarsely
    """
    name, x = _tc_channel(channel)
    start, end = _tc_range(len(x), start, end)
    stride = int(stride)
    if stride < 1:
        raise ValueError("stride must be >= 1")
    picked = np.arange(start, end, stride)
    truncated = len(picked) > 500
    picked = picked[:500]
    out = {"channel": name, "start": start, "end": end, "stride": stride, "count": len(picked),
           "values": x[picked], "truncated": truncated}
    if truncated:
        out["next_start"] = int(picked[-1]) + stride
        out["note"] = "only 500 values are returned per call: raise stride or narrow [start, end)"
    return out


def compute_acf(channel: str | None = None, max_lag: int = 50, start: int = 0, end: int | None = None) -> dict:
    """Sample autocorrelation of one channel from lag 0 to max_lag (at most 500).

    Args:
        channel: channel name (may be omitted when there is only one channel)
        max_lag: largest lag, in samples
        start: first index of the stretch analysed
        end: end (exclusive) of the stretch analysed; default L
    """
    name, x = _tc_channel(channel)
    start, end = _tc_range(len(x), start, end)
    c = _tc_finite(x[start:end])
    c = c - c.mean()
    n = len(c)
    max_lag = int(max(0, min(int(max_lag), 500, n - 1)))
    spectrum = np.fft.rfft(c, 2 * n)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), 2 * n)[: max_lag + 1]
    acf = acov / (acov[0] if acov[0] > 0 else 1.0)
    return {"channel": name, "start": start, "end": end, "max_lag": max_lag, "acf": acf}


def detect_periodicity(channel: str | None = None, start: int = 0, end: int | None = None, top: int = 3) -> dict:
    """FFT-based dominant period (in samples) and the fraction of non-DC spectral power it carries.

    Args:
        channel: channel name (may be omitted when there is only one channel)
        start: first index of the stretch analysed
        end: end (exclusive) of the stretch analysed; default L
        top: how many candidate periods to list, strongest first
    """
    name, x = _tc_channel(channel)
    start, end = _tc_range(len(x), start, end)
    c = _tc_finite(x[start:end])
    c = c - c.mean()
    n = len(c)
    if n < 4:
        raise ValueError("need at least 4 samples")
    power = np.abs(np.fft.rfft(c)) ** 2
    total = float(power[1:].sum())
    if total <= 0:
        return {"channel": name, "start": start, "end": end, "dominant_period": None, "power_fraction": 0.0,
                "note": "the stretch is constant"}
    order = np.argsort(power[1:])[::-1][: max(1, min(int(top), 20))] + 1
    candidates = [{"period": n / k, "frequency": k / n, "power_fraction": power[k] / total} for k in order]
    best = candidates[0]
    return {"channel": name, "start": start, "end": end, "dominant_period": best["period"],
            "dominant_frequency": best["frequency"], "power_fraction": best["power_fraction"],
            "candidates": candidates}


def find_peaks(channel: str | None = None, height: float | None = None, prominence: float | None = None,
               distance: int | None = None, start: int = 0, end: int | None = None, max_peaks: int = 50) -> dict:
    """Local maxima via scipy.signal.find_peaks: indices, values and count (the most prominent max_peaks listed).

    Args:
        channel: channel name (may be omitted when there is only one channel)
        height: minimal peak height
        prominence: minimal peak prominence
        distance: minimal distance between peaks, in samples
        start: first index searched
        end: end (exclusive) of the search; default L
        max_peaks: most peaks listed (at most 500), the most prominent ones, in index order
    """
    from scipy.signal import find_peaks as scipy_find_peaks, peak_prominences

    name, x = _tc_channel(channel)
    start, end = _tc_range(len(x), start, end)
    segment = _tc_finite(x[start:end])
    options = {key: value for key, value in (("height", height), ("prominence", prominence),
                                               ("distance", distance)) if value is not None}
    peaks, _ = scipy_find_peaks(segment, **options)
    prominences = peak_prominences(segment, peaks)[0] if len(peaks) else np.zeros(0)
    keep = max(0, min(int(max_peaks), 500))
    chosen = np.sort(np.argsort(prominences)[::-1][:keep])
    return {"channel": name, "start": start, "end": end, "count": len(peaks),
            "indices": peaks[chosen] + start, "values": segment[peaks[chosen]],
            "prominences": prominences[chosen], "listed": len(chosen)}


def arima_forecast(channel: str | None = None, p: int = 1, d: int = 0, q: int = 0, periods: int = 10,
                   fit_last: int = 2000) -> dict:
    """Fit ARIMA(p, d, q) (statsmodels) on a channel's last fit_last samples; point forecast of the next periods steps and the in-sample AIC.

    Args:
        channel: channel name (may be omitted when there is only one channel)
        p: autoregressive order (0..5)
        d: differencing order (0..2)
        q: moving-average order (0..5)
        periods: steps to forecast (1..500)
        fit_last: fit on this many most recent samples (bounds the cost on long series)
    """
    import warnings

    from statsmodels.tsa.arima.model import ARIMA

    name, x = _tc_channel(channel)
    p, d, q, periods = int(p), int(d), int(q), int(periods)
    if not (0 <= p <= 5 and 0 <= d <= 2 and 0 <= q <= 5):
        raise ValueError("orders must satisfy 0 <= p <= 5, 0 <= d <= 2, 0 <= q <= 5")
    if not 1 <= periods <= 500:
        raise ValueError("periods must be between 1 and 500")
    fit_last = max(10, int(fit_last))
    y = _tc_finite(x[-fit_last:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = ARIMA(y, order=(p, d, q)).fit()
        forecast = fitted.forecast(steps=periods)
    return {"channel": name, "order": [p, d, q], "n_fit": len(y), "fit_start": len(x) - len(y),
            "periods": periods, "forecast": np.asarray(forecast), "aic": fitted.aic}


def robust_zscore_scan(channel: str | None = None, threshold: float = 6.0, detrend: int = 513, smooth: int = 8,
                       top: int = 3) -> dict:
    """Scan for anomalous windows: robust z-score (median/MAD) of the detrended series, smoothed.

    With a channel: its top windows (start, end half-open, peak index, max |z|). Without: every
    channel's strongest window, strongest channel first (at most 32 listed). Each window also
    carries its shape against the surroundings, in channel std units: shift_sigma (mean inside
    minus mean around), step_sigma (mean after minus mean before), var_ratio (residual std inside
    over outside), crossing_rate (mean crossings per sample inside), peak_ratio (mid-window
    excursion over mean excursion).

    Args:
        channel: channel name; omit to scan every channel
        threshold: |z| above which a window is flagged
        detrend: moving-average width removed before scoring, in samples
        smooth: moving-average width applied to |z|, in samples
        top: windows listed for a single channel (1..10)
    """
    def scan_one(name, top_n):
        x = _tc_finite(series[name])
        resid, score = _tc_zscan(x, detrend, smooth)
        masked = score.copy()
        windows = []
        for _ in range(max(1, min(int(top_n), 10))):
            peak = int(np.argmax(masked))
            value = float(masked[peak])
            if windows and value <= 0:
                break
            start, end = _tc_grow(score, peak)
            window = {"start": start, "end": end, "peak": peak, "max_z": value}
            window.update(_tc_window_features(x, resid, start, end))
            windows.append(window)
            masked[max(0, start - (end - start)):end + (end - start)] = 0.0
        return windows

    if channel is not None:
        name, _ = _tc_channel(channel)
        windows = scan_one(name, top)
        return {"channel": name, "threshold": threshold, "flagged": windows[0]["max_z"] > threshold,
                "windows": windows}
    scan = []
    for name in channels:
        best = scan_one(name, 1)[0]
        scan.append({"channel": name, **best})
    scan.sort(key=lambda item: -item["max_z"])
    out = {"threshold": threshold, "flagged": [s["channel"] for s in scan if s["max_z"] > threshold],
           "scan": scan[:32]}
    if len(scan) > 32:
        out["channels_not_listed"] = len(scan) - 32
    return out


def rolling_stats(channel: str | None = None, window: int = 64, start: int = 0, end: int | None = None,
                  points: int = 200) -> dict:
    """Centred rolling mean and std of one channel, reported at up to `points` (<= 500) evenly spaced indices, plus where the rolling mean jumps most and where the rolling std changes most.

    Args:
        channel: channel name (may be omitted when there is only one channel)
        window: rolling window width, in samples
        start: first index analysed
        end: end (exclusive) of the stretch analysed; default L
        points: how many positions to report (1..500)
    """
    from scipy.ndimage import uniform_filter1d

    name, x = _tc_channel(channel)
    start, end = _tc_range(len(x), start, end)
    segment = _tc_finite(x[start:end])
    n = len(segment)
    width = max(1, min(int(window), n))
    mean = uniform_filter1d(segment, size=width, mode="nearest")
    var = uniform_filter1d(segment ** 2, size=width, mode="nearest") - mean ** 2
    std = np.sqrt(np.maximum(var, 0.0))
    idx = np.unique(np.linspace(0, n - 1, max(1, min(int(points), 500))).round().astype(int))
    out = {"channel": name, "start": start, "end": end, "window": width, "index": idx + start,
           "mean": mean[idx], "std": std[idx]}
    if n > width:
        jump = np.abs(mean[width:] - mean[:-width])
        at = int(np.argmax(jump))
        out["largest_mean_jump"] = {"from": at + start, "to": at + width + start, "delta": mean[at + width] - mean[at]}
        ratio = (std[width:] + 1e-12) / (std[:-width] + 1e-12)
        log_ratio = np.abs(np.log(ratio))
        at = int(np.argmax(log_ratio))
        out["largest_std_change"] = {"from": at + start, "to": at + width + start, "ratio": ratio[at]}
    return out


def change_points(channel: str | None = None, method: str = "pelt", model: str = "l2", penalty: float | None = None,
                  n_bkps: int | None = None, min_size: int = 5, start: int = 0, end: int | None = None,
                  max_points: int = 1000) -> dict:
    """Change points of one channel with ruptures, and the mean/std of each segment (at most 50 listed).

    Long stretches are block-averaged to about max_points points and breakpoints are searched every
    `resolution` samples (reported); narrow [start, end) to locate a change more finely.

    Args:
        channel: channel name (may be omitted when there is only one channel)
        method: "pelt" (penalised; number of changes found) or "binseg" (binary segmentation)
        model: ruptures cost: "l2" (mean shifts), "l1", "normal" (mean and variance) or "rbf"
        penalty: Pelt penalty; default 3 * log(n) * sigma^2 for l2, 3 * log(n) * sigma for l1 (sigma: the robust std, 1.4826 * MAD, of the signal), 3 * log(n) otherwise
        n_bkps: number of change points wanted (binseg; with pelt it switches to binseg)
        min_size: smallest segment, in samples of the analysed signal
        start: first index analysed
        end: end (exclusive) of the stretch analysed; default L
        max_points: longer stretches are averaged in blocks down to about this many points first (100..5000)
    """
    import ruptures

    name, x = _tc_channel(channel)
    start, end = _tc_range(len(x), start, end)
    segment = _tc_finite(x[start:end])
    factor = max(1, -(-len(segment) // min(5000, max(100, int(max_points)))))
    usable = len(segment) // factor * factor
    signal = segment[:usable].reshape(-1, factor).mean(axis=1) if factor > 1 else segment
    n = len(signal)
    jump = max(1, n // 200)  # ruptures searches in Python: keep about 200 candidate positions
    if method not in ("pelt", "binseg"):
        raise ValueError("method must be 'pelt' or 'binseg'")
    if model not in ("l2", "l1", "normal", "rbf"):
        raise ValueError("model must be one of l2, l1, normal, rbf")
    min_size = max(2, int(min_size))
    if n_bkps is not None or method == "binseg":
        algo = ruptures.Binseg(model=model, min_size=min_size, jump=jump).fit(signal)
        if n_bkps is not None:
            breaks = algo.predict(n_bkps=int(n_bkps))
        else:
            breaks = algo.predict(pen=penalty if penalty is not None else 3 * np.log(n))
    else:
        if penalty is None:
            sigma = 1.4826 * np.median(np.abs(signal - np.median(signal))) + 1e-12
            scale = {"l2": sigma ** 2, "l1": sigma}.get(model, 1.0)
            penalty = 3 * np.log(n) * scale
        breaks = ruptures.Pelt(model=model, min_size=min_size, jump=jump).fit(signal).predict(pen=float(penalty))
    edges = [0] + [min(int(b) * factor, len(segment)) for b in breaks]
    edges[-1] = len(segment)
    segments = []
    for a, b in zip(edges[:-1], edges[1:]):
        if b > a:
            piece = segment[a:b]
            segments.append({"start": a + start, "end": b + start, "mean": piece.mean(), "std": piece.std()})
    points = [s["start"] for s in segments[1:]]
    return {"channel": name, "start": start, "end": end, "method": method, "model": model,
            "downsample": factor, "resolution": factor * jump, "count": len(points), "change_points": points[:50],
            "segments": segments[:51], "truncated": len(points) > 50}


def _tc_import_stumpy():
    """Import stumpy, reusing the host's compiled numba cache when it has one (else compile: slow)."""
    import os
    import shutil
    import sys

    if "stumpy" in sys.modules:
        return sys.modules["stumpy"]
    cache = _TC_CONFIG.get("numba_cache")
    if cache and "numba" not in sys.modules and os.path.isfile(os.path.join(cache, "READY")):
        local = os.path.join(os.getcwd(), ".numba_cache")
        if not os.path.isdir(local):
            shutil.copytree(cache, local)
        os.environ["NUMBA_CACHE_DIR"] = local
        import importlib
        import warnings

        import stumpy
        from stumpy import cache as stumpy_cache

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for module_name, function_name in stumpy_cache.get_njit_funcs():
                module = importlib.import_module(f"stumpy.{module_name}")
                getattr(module, function_name).enable_caching()
        return stumpy
    import stumpy

    return stumpy


def discords(channel: str | None = None, m: int | None = None, k: int = 3, start: int = 0, end: int | None = None,
             max_points: int = 20000) -> dict:
    """Top-k discords (the subsequences least like any other) from the stumpy matrix profile.

    Args:
        channel: channel name (may be omitted when there is only one channel)
        m: subsequence length in samples of the analysed signal; default max(8, min(256, n // 50))
        k: number of discords (1..20), non-overlapping, most unusual first
        start: first index analysed
        end: end (exclusive) of the stretch analysed; default L
        max_points: longer stretches are averaged in blocks down to about this many points first
    """
    name, x = _tc_channel(channel)
    start, end = _tc_range(len(x), start, end)
    segment = _tc_finite(x[start:end])
    factor = max(1, -(-len(segment) // max(100, int(max_points))))
    usable = len(segment) // factor * factor
    signal = segment[:usable].reshape(-1, factor).mean(axis=1) if factor > 1 else segment
    signal = np.ascontiguousarray(signal, dtype=np.float64)
    n = len(signal)
    m = int(m) if m is not None else max(8, min(256, n // 50))
    if not 3 <= m <= n // 2:
        raise ValueError(f"m must be between 3 and {n // 2} for {n} points")
    stumpy = _tc_import_stumpy()
    profile = np.asarray(stumpy.stump(signal, m)[:, 0], dtype=np.float64)
    profile = np.where(np.isfinite(profile), profile, -np.inf)
    found = []
    for _ in range(max(1, min(int(k), 20))):
        at = int(np.argmax(profile))
        if not np.isfinite(profile[at]):
            break
        found.append({"start": at * factor + start, "end": min((at + m) * factor, len(segment)) + start,
                      "distance": profile[at]})
        profile[max(0, at - m):at + m] = -np.inf
    return {"channel": name, "start": start, "end": end, "m": m * factor, "downsample": factor, "discords": found}


def plot_window(channels: list[str] | None = None, start: int = 0, end: int | None = None) -> dict:
    """A PNG plot of up to 8 channels over [start, end) (min/max envelope when long), attached as an image.

    Args:
        channels: channel names; default the first 8
        start: first index plotted
        end: end (exclusive) of the plot; default L
    """
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wanted = [channels] if isinstance(channels, str) else channels
    names = list(globals()["channels"][:8]) if not wanted else [_tc_channel(c)[0] for c in wanted][:8]
    start, end = _tc_range(L, start, end)
    figure, axes = plt.subplots(len(names), 1, figsize=(10, 1.2 + 1.3 * len(names)), sharex=True, squeeze=False)
    for axis, name in zip(axes[:, 0], names):
        x = _tc_finite(series[name][start:end])
        bucket = max(1, -(-len(x) // 2000))
        t = np.arange(start, start + len(x), bucket)
        if bucket > 1:
            padded = np.pad(x, (0, (-len(x)) % bucket), mode="edge").reshape(-1, bucket)
            axis.fill_between(t, padded.min(axis=1), padded.max(axis=1), lw=0.3)
        else:
            axis.plot(t, x, lw=0.7)
        axis.set_ylabel(name, rotation=0, ha="right", fontsize=8)
        axis.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("sample index")
    axes[-1, 0].set_xlim(start, end - 1)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=72)
    plt.close(figure)
    return {"channels": names, "start": start, "end": end, "_png": buffer.getvalue()}


_KERNEL_HELPERS = (_tc_names, _tc_channel, _tc_range, _tc_finite, _tc_num, _tc_jsonable, _tc_call, _tc_define,
                   _tc_select, _tc_zscan, _tc_window_features, _tc_grow, _tc_import_stumpy)
_SEED_FUNCTIONS = (list_channels, series_overview, channel_stats, channel_values, compute_acf, detect_periodicity,
                   find_peaks, arima_forecast, robust_zscore_scan, rolling_stats, change_points, discords, plot_window)
IMAGE_TOOLS = ("plot_window",)
SEED_TOOL_NAMES = tuple(f.__name__ for f in _SEED_FUNCTIONS)

# ================================================================================= host side ==

_JSON_TYPES = {"int": "integer", "float": "number", "str": "string", "bool": "boolean", "dict": "object",
               "list": "array", "tuple": "array", "Sequence": "array", "Any": None, "object": None}


def _annotation_schema(node: ast.expr | None) -> tuple[dict[str, Any], bool]:
    """(JSON schema of an annotation, whether None is allowed)."""
    if node is None:
        return {}, False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return {}, False
    if isinstance(node, ast.Constant) and node.value is None:
        return {"type": "null"}, True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, left_none = _annotation_schema(node.left)
        right, right_none = _annotation_schema(node.right)
        parts = [s for s in (left, right) if s and s != {"type": "null"}]
        return (parts[0] if len(parts) == 1 else {}), left_none or right_none
    if isinstance(node, ast.Subscript):
        outer = ast.unparse(node.value).split(".")[-1]
        if outer == "Optional":
            inner, _ = _annotation_schema(node.slice)
            return inner, True
        if outer == "Union":
            elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            schemas = [_annotation_schema(e) for e in elements]
            parts = [s for s, _ in schemas if s and s != {"type": "null"}]
            return (parts[0] if len(parts) == 1 else {}), any(n for _, n in schemas)
        kind = _JSON_TYPES.get(outer)
        schema: dict[str, Any] = {"type": kind} if kind else {}
        if kind == "array":
            element = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
            items, _ = _annotation_schema(element)
            if items:
                schema["items"] = items
        return schema, False
    name = ast.unparse(node).split(".")[-1]
    kind = _JSON_TYPES.get(name)
    return ({"type": kind} if kind else {}), False


def _docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) of a Google-style docstring (an "Args:" section)."""
    description: list[str] = []
    params: dict[str, str] = {}
    section = None  # None: the description; "args": inside Args; "other": another section
    param_indent = None
    current = None
    for line in doc.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if re.match(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):$", stripped):
            section = "args" if stripped in ("Args:", "Arguments:", "Parameters:") else "other"
            param_indent, current = None, None
            continue
        if section is None:
            description.append(stripped)
        elif section == "args" and stripped:
            found = re.match(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
            if found and (param_indent is None or indent <= param_indent):
                param_indent, current = indent, found.group(1)
                params[current] = found.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {stripped}".strip()
    return " ".join(" ".join(description).split()), params


@dataclass
class ToolSpec:
    """A typed tool: what the model is told (name, description, JSON-schema parameters) and its source."""

    name: str
    description: str
    parameters: dict[str, Any]
    source: str
    family: str = "seed"  # "seed" or "evolved"
    image: bool = False  # returns a picture (for vision models)
    meta: dict[str, Any] = field(default_factory=dict)

    def openai_tool(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}

    def signature(self) -> str:
        """One line for the text protocol: name(arg: type = default, ...)."""
        parts = []
        required = set(self.parameters.get("required", []))
        for arg, schema in self.parameters.get("properties", {}).items():
            kind = schema.get("type", "any")
            text = f"{arg}: {kind}"
            if arg not in required:
                text += f" = {json.dumps(schema.get('default'))}"
            parts.append(text)
        return f"{self.name}({', '.join(parts)})"


class ToolSourceError(ValueError):
    """Tool source that cannot be turned into a ToolSpec (no function, bad name, syntax error)."""


def spec_from_source(source: str, *, family: str = "evolved", name: str | None = None) -> ToolSpec:
    """Parse (never run) tool source: the one public top-level function is the tool; helpers start with `_`.

    The JSON schema comes from the signature (type hints, defaults) and the Google-style docstring.
    """
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        raise ToolSourceError(f"syntax error: {exc}") from None
    functions = [n for n in module.body if isinstance(n, ast.FunctionDef)]
    public = [f for f in functions if not f.name.startswith("_")]
    if name is not None:
        public = [f for f in public if f.name == name]
    if len(public) != 1:
        found = ", ".join(f.name for f in public) or "none"
        raise ToolSourceError(f"the source must define exactly one public function (found: {found})")
    function = public[0]
    if not _NAME.match(function.name):
        raise ToolSourceError(f"bad tool name {function.name!r}")
    args = function.args
    if args.vararg or args.kwarg or args.posonlyargs:
        raise ToolSourceError("tool parameters must be plain named parameters (no *args, **kwargs, /)")
    doc = ast.get_docstring(function) or ""
    description, param_docs = _docstring_parts(doc)
    positional = args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
    properties: dict[str, Any] = {}
    required = []
    for arg, default in pairs:
        schema, _nullable = _annotation_schema(arg.annotation)
        schema = dict(schema)
        if arg.arg in param_docs:
            schema["description"] = param_docs[arg.arg]
        if default is None:
            required.append(arg.arg)
        else:
            try:
                schema["default"] = ast.literal_eval(default)
            except ValueError:
                raise ToolSourceError(f"default of {arg.arg!r} must be a literal") from None
        properties[arg.arg] = schema
    parameters = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return ToolSpec(function.name, description or function.name, parameters, source, family=family)


def _seed_spec(function) -> ToolSpec:
    spec = spec_from_source(inspect.getsource(function), family="seed")
    spec.image = spec.name in IMAGE_TOOLS
    return spec


_seed_lock = threading.Lock()
_seed_cache: dict[str, ToolSpec] = {}


def seed_specs() -> dict[str, ToolSpec]:
    """The seed tools, by name (parsed once per process)."""
    with _seed_lock:
        if not _seed_cache:
            for function in _SEED_FUNCTIONS:
                spec = _seed_spec(function)
                _seed_cache[spec.name] = spec
        return dict(_seed_cache)


def load_tools_dir(path: str | Path) -> list[ToolSpec]:
    """Evolved tools under `path`: `path/<name>/{tool.py, tool.json}` (or `path` itself being one tool)."""
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"tools folder not found: {root}")
    folders = [root] if (root / TOOL_FILE).is_file() else sorted(p for p in root.iterdir() if (p / TOOL_FILE).is_file())
    specs = []
    for folder in folders:
        meta = json.loads((folder / TOOL_JSON).read_text()) if (folder / TOOL_JSON).is_file() else {}
        source = (folder / TOOL_FILE).read_text()
        spec = spec_from_source(source, family="evolved", name=meta.get("name"))
        if meta.get("description"):
            spec.description = str(meta["description"])
        spec.meta = meta
        specs.append(spec)
    return specs


@dataclass
class Observation:
    """What one tool call gave back: the compact JSON text the model sees, and any images."""

    text: str
    error: bool = False
    data: Any = None  # the parsed "ok" value (None on error)
    images: list[bytes] = field(default_factory=list)
    stdout: str = ""


def error_observation(message: str) -> Observation:
    return Observation(json.dumps({"error": message}, ensure_ascii=False), error=True)


class Toolset:
    """The tools of one harness: seed tools (minus images unless asked) plus evolved ones."""

    def __init__(self, specs: list[ToolSpec]):
        self.specs: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.name in self.specs:
                raise ValueError(f"two tools are named {spec.name!r}")
            self.specs[spec.name] = spec

    @classmethod
    def build(cls, *, image: bool = False, tools_dir: str | Path | None = None,
              extra: list[ToolSpec] | None = None, include: list[str] | None = None) -> "Toolset":
        seeds = [s for s in seed_specs().values() if image or not s.image]
        evolved = list(load_tools_dir(tools_dir)) if tools_dir else []
        evolved += list(extra or [])
        clashes = sorted({s.name for s in evolved} & set(seed_specs()))
        if clashes:
            raise ValueError(f"evolved tool name(s) clash with seed tools: {', '.join(clashes)}")
        specs = seeds + evolved
        if include is not None:
            specs = [s for s in specs if s.name in include]
        return cls(specs)

    @property
    def names(self) -> list[str]:
        return list(self.specs)

    def openai_tools(self) -> list[dict[str, Any]]:
        return [spec.openai_tool() for spec in self.specs.values()]

    def catalog(self) -> str:
        """The text-protocol listing: each tool's signature and the first sentence of its description
        (short, for small local models; the observations' keys describe themselves)."""
        return "\n".join(f"- {spec.signature()}: {_first_sentence(spec.description)}" for spec in self.specs.values())

    # -- the kernel side ------------------------------------------------------------------------
    def install_code(self, task_meta: dict[str, Any], *, numba_cache: str | None = None,
                     verification: bool = False) -> str:
        """The silent cell that defines the helpers, the seed tools and the evolved tools in the kernel."""
        seeds = [s for s in self.specs.values() if s.family == "seed"]
        evolved = [s for s in self.specs.values() if s.family != "seed"]
        parts = ["import json as _tc_json", f"_TC_TAG = {RESULT_TAG!r}",
                 f"_TC_CONFIG = {{'numba_cache': {numba_cache!r}}}",
                 f"TASK = _tc_json.loads({json.dumps(task_meta)!r})"]
        parts += [inspect.getsource(f) for f in _KERNEL_HELPERS]
        parts += [spec.source for spec in seeds]
        parts.append("_TC_TOOLS = {" + ", ".join(f"{s.name!r}: {s.name}" for s in seeds) + "}")
        if verification:
            parts.append("_TC_ALL = dict(series)")
        for spec in evolved:
            parts.append(f"_tc_define({spec.name!r}, {spec.source!r})")
        return "\n\n".join(parts) + "\n"

    def validate(self, name: str, arguments: Any) -> str | None:
        """Why a call is refused before it reaches the kernel (None when it is fine)."""
        spec = self.specs.get(name)
        if spec is None:
            return f"unknown tool {name!r}; tools are {', '.join(self.specs)}"
        if not isinstance(arguments, dict):
            return "arguments must be a JSON object"
        properties = spec.parameters.get("properties", {})
        unknown = sorted(set(arguments) - set(properties))
        if unknown:
            return f"{name} takes no argument(s) {', '.join(unknown)}; its signature is {spec.signature()}"
        missing = [p for p in spec.parameters.get("required", []) if p not in arguments]
        if missing:
            return f"{name} needs argument(s) {', '.join(missing)}; its signature is {spec.signature()}"
        for arg, value in arguments.items():
            kind = properties[arg].get("type")
            if value is None or kind is None:
                continue
            if not _matches(kind, value):
                return f"argument {arg!r} of {name} must be of type {kind}, got {json.dumps(value)[:80]}"
        return None

    @staticmethod
    def call_code(name: str, arguments: dict[str, Any]) -> str:
        return f"_tc_call({name!r}, _tc_json.loads({json.dumps(arguments)!r}))"


def _first_sentence(text: str) -> str:
    found = re.search(r"\.(\s|$)", text)
    return text[: found.start() + 1] if found else text


def _matches(kind: str, value: Any) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True


def read_observation(cell: CellResult, max_chars: int) -> Observation:
    """The tagged JSON line a `_tc_call` cell printed, as an Observation (an error when none came)."""
    text = cell.stdout
    at = text.rfind(RESULT_TAG)
    if at < 0:
        reason = cell.error.strip() or "the tool produced no result"
        return error_observation(truncate_observation(reason, max(200, max_chars // 2)))
    stray = text[:at].strip()
    line = text[at + len(RESULT_TAG):].split("\n", 1)[0]
    try:
        payload = json.loads(line)
    except ValueError:
        return error_observation("the tool result was not valid JSON")
    images = []
    if "image_png_b64" in payload:
        images.append(base64.b64decode(payload.pop("image_png_b64")))
    if "error" in payload:
        body: dict[str, Any] = {"error": payload["error"]}
        error, data = True, None
    else:
        body, error, data = payload.get("ok"), False, payload.get("ok")
    if stray:
        body = {"result": body, "printed": truncate_observation(stray, 1000)} if not error else {**body, "printed": stray[:1000]}
    rendered = json.dumps(body, ensure_ascii=False, separators=(", ", ": "))
    return Observation(truncate_observation(rendered, max_chars), error=error, data=data, images=images, stdout=stray)


# ------------------------------------------------------------------ stumpy's compiled cache --

_warm_lock = threading.Lock()
_warm_thread: threading.Thread | None = None
_WARM_CODE = """
import importlib, warnings
import numpy as np
import stumpy
from stumpy import cache
warnings.simplefilter("ignore")
for module_name, function_name in cache.get_njit_funcs():
    getattr(importlib.import_module(f"stumpy.{module_name}"), function_name).enable_caching()
stumpy.stump(np.random.default_rng(0).standard_normal(256), 16)
"""


def stumpy_cache_dir() -> Path:
    """Where the host keeps stumpy's numba-compiled functions (kernels copy it; they cannot write it)."""
    from tsbench.models.local_hf import cache_root

    try:
        from importlib.metadata import version

        tag = version("stumpy")
    except Exception:  # stumpy missing: discords reports it when called
        tag = "none"
    return cache_root() / "numba" / f"stumpy-{tag}-py{sys.version_info.major}{sys.version_info.minor}"


def stumpy_cache_ready() -> bool:
    return (stumpy_cache_dir() / STUMPY_READY).is_file()


def warm_stumpy_cache(timeout_s: float = 900.0) -> bool:
    """Compile stumpy's matrix profile once per machine (about a minute) into stumpy_cache_dir(), in a
    child process. Without it, every episode's first `discords` call compiles from scratch."""
    target = stumpy_cache_dir()
    if (target / STUMPY_READY).is_file():
        return True
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".stumpy-", dir=target.parent))
    try:
        env = dict(os.environ, NUMBA_CACHE_DIR=str(staging))
        done = subprocess.run([sys.executable, "-c", _WARM_CODE], env=env, capture_output=True, timeout=timeout_s)
        if done.returncode != 0:
            log.warning("stumpy warm-up failed: %s", done.stderr.decode(errors="replace")[-500:])
            return False
        (staging / STUMPY_READY).write_text("ok\n")
        try:
            os.rename(staging, target)
        except OSError:
            if not (target / STUMPY_READY).is_file():
                raise
        return True
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("stumpy warm-up failed: %s", exc)
        return False
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def warm_stumpy_cache_in_background() -> None:
    """Start warm_stumpy_cache() on a daemon thread once per process (no-op when the cache is ready
    or TSBENCH_STUMPY_WARMUP=0)."""
    global _warm_thread
    if os.environ.get("TSBENCH_STUMPY_WARMUP", "1") == "0" or stumpy_cache_ready():
        return
    with _warm_lock:
        if _warm_thread is None:
            _warm_thread = threading.Thread(target=warm_stumpy_cache, name="stumpy-warmup", daemon=True)
            _warm_thread.start()
