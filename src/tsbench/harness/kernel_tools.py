"""TimeClaw's seed tools (paper Table 10 plus anomaly primitives): shipped to the kernel as source.

Each tool is an ordinary Python function with type hints and a Google-style docstring; its JSON
schema and one-line signature are derived from that source (harness/tool_specs.py). The functions
reference kernel globals (`series`, `channels`, `L`, `np`, `TASK`) and the `_tc_*` helpers of
harness/kernel_helpers.py; they are never called in the host process. Heavy libraries
(statsmodels, ruptures, stumpy, matplotlib) are imported on first use only.
"""
# ruff: noqa: F821  (kernel globals)

from tsbench.harness.kernel_helpers import (  # noqa: F401  (resolved in the kernel, where all are defined together)
    _tc_call,
    _tc_channel,
    _tc_define,
    _tc_finite,
    _tc_grow,
    _tc_jsonable,
    _tc_names,
    _tc_num,
    _tc_range,
    _tc_select,
    _tc_window_features,
    _tc_zscan,
)


def list_channels() -> dict:
    """Names of the channels loaded in the workspace and the number of samples L in each."""
    return {"channels": list(channels), "n_channels": len(channels), "length": L}


def series_overview() -> dict:
    """Per-channel summary (n, min, max, mean) with the timestamp count and the task metadata.

    The index is the sample number 0..L-1; when the task has timestamps (seconds), their count, first
    and last time and median spacing are given, and sample i is at timestamps[i]. At most 64 channels
    are listed.
    """
    rows = {}
    for name in channels[:64]:
        x = series[name]
        finite = x[np.isfinite(x)]
        rows[name] = {
            "n": len(x),
            "min": finite.min() if finite.size else None,
            "max": finite.max() if finite.size else None,
            "mean": finite.mean() if finite.size else None,
        }
    stamps = TASK.get("timestamps") or []
    out = {
        "length": L,
        "n_channels": len(channels),
        "timestamps": len(stamps),
        "task": {key: TASK.get(key) for key in ("category", "regime")},
        "channels": rows,
    }
    if len(stamps) > 1:
        t = np.asarray(stamps, dtype=np.float64)
        out["time"] = {"first_s": t[0], "last_s": t[-1], "median_step_s": float(np.median(np.diff(t)))}
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
    return {
        "channel": name,
        "n": len(x),
        "n_finite": int(finite.size),
        "min": finite.min(),
        "max": finite.max(),
        "mean": finite.mean(),
        "std": finite.std(ddof=1) if finite.size > 1 else 0.0,
        "median": median,
        "q25": q25,
        "q75": q75,
        "argmin": int(np.nanargmin(np.where(np.isfinite(x), x, np.inf))),
        "argmax": int(np.nanargmax(np.where(np.isfinite(x), x, -np.inf))),
    }


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
    out = {
        "channel": name,
        "start": start,
        "end": end,
        "stride": stride,
        "count": len(picked),
        "values": x[picked],
        "truncated": truncated,
    }
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
        return {
            "channel": name,
            "start": start,
            "end": end,
            "dominant_period": None,
            "power_fraction": 0.0,
            "note": "the stretch is constant",
        }
    order = np.argsort(power[1:])[::-1][: max(1, min(int(top), 20))] + 1
    candidates = [{"period": n / k, "frequency": k / n, "power_fraction": power[k] / total} for k in order]
    best = candidates[0]
    return {
        "channel": name,
        "start": start,
        "end": end,
        "dominant_period": best["period"],
        "dominant_frequency": best["frequency"],
        "power_fraction": best["power_fraction"],
        "candidates": candidates,
    }


def find_peaks(
    channel: str | None = None,
    height: float | None = None,
    prominence: float | None = None,
    distance: int | None = None,
    start: int = 0,
    end: int | None = None,
    offset: int = 0,
    limit: int = 500,
    order: str = "index",
) -> dict:
    """Local maxima via scipy.signal.find_peaks: indices, values, prominences and the count of all of them, a page at a time.

    Every peak is reachable: a call lists at most `limit` (<= 500) of them from position `offset` of
    the chosen order, and `next_offset` says where the next page starts.

    Args:
        channel: channel name (may be omitted when there is only one channel)
        height: minimal peak height
        prominence: minimal peak prominence
        distance: minimal distance between peaks, in samples
        start: first index searched
        end: end (exclusive) of the search; default L
        offset: position of the first peak listed, in the chosen order
        limit: most peaks listed per call (1..500)
        order: "index" (left to right) or "prominence" (most prominent first)
    """
    from scipy.signal import find_peaks as scipy_find_peaks
    from scipy.signal import peak_prominences

    name, x = _tc_channel(channel)
    start, end = _tc_range(len(x), start, end)
    segment = _tc_finite(x[start:end])
    options = {
        key: value
        for key, value in (("height", height), ("prominence", prominence), ("distance", distance))
        if value is not None
    }
    if order not in ("index", "prominence"):
        raise ValueError('order must be "index" or "prominence"')
    peaks, _ = scipy_find_peaks(segment, **options)
    prominences = peak_prominences(segment, peaks)[0] if len(peaks) else np.zeros(0)
    ranked = np.arange(len(peaks)) if order == "index" else np.argsort(-prominences, kind="stable")
    offset = max(0, int(offset))
    chosen = ranked[offset : offset + max(1, min(int(limit), 500))]
    out = {
        "channel": name,
        "start": start,
        "end": end,
        "count": len(peaks),
        "order": order,
        "offset": offset,
        "indices": peaks[chosen] + start,
        "values": segment[peaks[chosen]],
        "prominences": prominences[chosen],
        "listed": len(chosen),
    }
    if offset + len(chosen) < len(peaks):
        out["next_offset"] = offset + len(chosen)
    return out


def arima_forecast(
    channel: str | None = None, p: int = 1, d: int = 0, q: int = 0, periods: int = 10, fit_last: int | None = None
) -> dict:
    """Fit ARIMA(p, d, q) (statsmodels) on a channel (the whole series unless fit_last is set); point forecast of the next periods steps, its 80% interval and the in-sample AIC.

    Args:
        channel: channel name (may be omitted when there is only one channel)
        p: autoregressive order (0..5)
        d: differencing order (0..2)
        q: moving-average order (0..5)
        periods: steps to forecast (1..500)
        fit_last: fit on only this many most recent samples (default: the whole series; set it to bound the cost on very long series)
    """
    import warnings

    from statsmodels.tsa.arima.model import ARIMA

    name, x = _tc_channel(channel)
    p, d, q, periods = int(p), int(d), int(q), int(periods)
    if not (0 <= p <= 5 and 0 <= d <= 2 and 0 <= q <= 5):
        raise ValueError("orders must satisfy 0 <= p <= 5, 0 <= d <= 2, 0 <= q <= 5")
    if not 1 <= periods <= 500:
        raise ValueError("periods must be between 1 and 500")
    y = _tc_finite(x if fit_last is None else x[-max(10, int(fit_last)) :])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = ARIMA(y, order=(p, d, q)).fit()
        predicted = fitted.get_forecast(steps=periods)
        forecast = predicted.predicted_mean
        interval = np.asarray(predicted.conf_int(alpha=0.2))
    return {
        "channel": name,
        "order": [p, d, q],
        "n_fit": len(y),
        "fit_start": len(x) - len(y),
        "periods": periods,
        "forecast": np.asarray(forecast),
        "lower_80": interval[:, 0],
        "upper_80": interval[:, 1],
        "aic": fitted.aic,
    }


def robust_zscore_scan(
    channel: str | None = None, threshold: float = 6.0, detrend: int = 513, smooth: int = 8, top: int = 3
) -> dict:
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
            masked[max(0, start - (end - start)) : end + (end - start)] = 0.0
        return windows

    if channel is not None:
        name, _ = _tc_channel(channel)
        windows = scan_one(name, top)
        return {"channel": name, "threshold": threshold, "flagged": windows[0]["max_z"] > threshold, "windows": windows}
    scan = []
    for name in channels:
        best = scan_one(name, 1)[0]
        scan.append({"channel": name, **best})
    scan.sort(key=lambda item: -item["max_z"])
    out = {"threshold": threshold, "flagged": [s["channel"] for s in scan if s["max_z"] > threshold], "scan": scan[:32]}
    if len(scan) > 32:
        out["channels_not_listed"] = len(scan) - 32
    return out


def rolling_stats(
    channel: str | None = None, window: int = 64, start: int = 0, end: int | None = None, points: int = 200
) -> dict:
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
    var = uniform_filter1d(segment**2, size=width, mode="nearest") - mean**2
    std = np.sqrt(np.maximum(var, 0.0))
    idx = np.unique(np.linspace(0, n - 1, max(1, min(int(points), 500))).round().astype(int))
    out = {
        "channel": name,
        "start": start,
        "end": end,
        "window": width,
        "index": idx + start,
        "mean": mean[idx],
        "std": std[idx],
    }
    if n > width:
        jump = np.abs(mean[width:] - mean[:-width])
        at = int(np.argmax(jump))
        out["largest_mean_jump"] = {"from": at + start, "to": at + width + start, "delta": mean[at + width] - mean[at]}
        ratio = (std[width:] + 1e-12) / (std[:-width] + 1e-12)
        log_ratio = np.abs(np.log(ratio))
        at = int(np.argmax(log_ratio))
        out["largest_std_change"] = {"from": at + start, "to": at + width + start, "ratio": ratio[at]}
    return out


def change_points(
    channel: str | None = None,
    method: str = "pelt",
    model: str = "l2",
    penalty: float | None = None,
    n_bkps: int | None = None,
    min_size: int = 5,
    start: int = 0,
    end: int | None = None,
    max_points: int = 1000,
) -> dict:
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
            scale = {"l2": sigma**2, "l1": sigma}.get(model, 1.0)
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
    return {
        "channel": name,
        "start": start,
        "end": end,
        "method": method,
        "model": model,
        "downsample": factor,
        "resolution": factor * jump,
        "count": len(points),
        "change_points": points[:50],
        "segments": segments[:51],
        "truncated": len(points) > 50,
    }


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


def discords(
    channel: str | None = None,
    m: int | None = None,
    k: int = 3,
    start: int = 0,
    end: int | None = None,
    max_points: int = 20000,
) -> dict:
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
        found.append(
            {"start": at * factor + start, "end": min((at + m) * factor, len(segment)) + start, "distance": profile[at]}
        )
        profile[max(0, at - m) : at + m] = -np.inf
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


_KERNEL_HELPERS = (
    _tc_names,
    _tc_channel,
    _tc_range,
    _tc_finite,
    _tc_num,
    _tc_jsonable,
    _tc_call,
    _tc_define,
    _tc_select,
    _tc_zscan,
    _tc_window_features,
    _tc_grow,
    _tc_import_stumpy,
)
_SEED_FUNCTIONS = (
    list_channels,
    series_overview,
    channel_stats,
    channel_values,
    compute_acf,
    detect_periodicity,
    find_peaks,
    arima_forecast,
    robust_zscore_scan,
    rolling_stats,
    change_points,
    discords,
    plot_window,
)
IMAGE_TOOLS = ("plot_window",)
SEED_TOOL_NAMES = tuple(f.__name__ for f in _SEED_FUNCTIONS)
