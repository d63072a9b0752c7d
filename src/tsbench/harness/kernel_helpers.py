"""Kernel-side helpers of TimeClaw's tools: shipped to the kernel as source, run only there.

They reference the kernel's globals (`series`, `channels`, `L`, `np`, `TASK`, `_TC_TAG`, ...) set up by
the sandbox boot and the install cell (see harness/toolset.py); the host only reads their source.
"""
# ruff: noqa: F821  (kernel globals)


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
    series = {key[len(prefix) :]: values for key, values in _TC_ALL.items() if key.startswith(prefix)}
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
    before, after = x[max(0, start - 256) : start], x[end : end + 256]
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
    return {
        "shift_sigma": shift,
        "step_sigma": step,
        "var_ratio": var_ratio,
        "crossing_rate": crossings / max(1, len(inside)),
        "peak_ratio": min(peak_ratio, 1e6),
    }


def _tc_grow(score, peak):
    """The window around `peak` where the score stays above max(2.5, 0.35 * peak score)."""
    cut = max(2.5, 0.35 * float(score[peak]))
    start, end = peak, peak + 1
    while start > 0 and score[start - 1] > cut:
        start -= 1
    while end < len(score) and score[end] > cut:
        end += 1
    return start, end
