"""TimeClaw's seed tools (paper Table 10; the anomaly primitives in kernel_anomaly_tools.py): shipped to the
kernel as source.

Each tool is an ordinary Python function with type hints and a Google-style docstring; its JSON
schema and one-line signature are derived from that source (harness/tool_specs.py). The functions
reference kernel globals (`series`, `channels`, `L`, `np`, `TASK`) and the `_tc_*` helpers of
harness/kernel_helpers.py; they are never called in the host process. Heavy libraries
(statsmodels, ruptures, stumpy, matplotlib) are imported on first use only.
"""
# ruff: noqa: F821  (kernel globals)

from tsbench.harness.kernel_anomaly_tools import (
    _tc_import_stumpy,
    change_points,
    discords,
    robust_zscore_scan,
    rolling_stats,
)
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


KERNEL_HELPERS = (
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
SEED_FUNCTIONS = (
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
SEED_TOOL_NAMES = tuple(f.__name__ for f in SEED_FUNCTIONS)
