"""TimeClaw's anomaly primitives among the seed tools (robust z-scan, rolling statistics, change points,
discords), shipped to the kernel as source with the others (harness/kernel_tools.py lists them all).
Like every seed tool they reference kernel globals and the `_tc_*` helpers, defined together there.
"""
# ruff: noqa: F821  (kernel globals and the kernel_helpers.py `_tc_*` helpers, all defined together in the kernel)


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
