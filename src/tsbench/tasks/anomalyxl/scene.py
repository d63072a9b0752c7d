"""Background scenes: one channel = base noise + optional periodic part + optional trend, z-normalised.

`plan_scene` decides every parameter (cheap, no arrays); `build_scene` turns that decision into
values. The split keeps rows rebuildable from their stored plan alone.

`build_scene` works in place on two float64 buffers (fresh 1 MB arrays cost page faults, and a
16-channel row made about six per channel); every operation is the one the plain expressions in
the comments perform, in the same order, so the values are bit-identical to them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from scipy import signal

NOISE_KINDS = ("white", "red", "ar1")
PERIODIC_SHAPES = ("sine", "square", "sawtooth")
TREND_FORMS = ("linear", "exponential", "logarithmic", "constant")
AR1_PHI = 0.7
TWO_PI = 2 * np.pi
# TWO_PI as hi + lo, hi its top 26 significant bits and lo the other 27: for an integer k < 2**26
# both k * hi and k * lo are exact, so angle - k*hi - k*lo is the exact remainder (see fmod_two_pi).
_mantissa, _exponent = math.frexp(TWO_PI)
_TWO_PI_HI = math.ldexp(math.floor(math.ldexp(_mantissa, 26)), _exponent - 26)
_TWO_PI_LO = TWO_PI - _TWO_PI_HI
_EXACT_QUOTIENT_BELOW = 2.0**26


def plan_scene(rng: np.random.Generator, noise_weights=(1.0, 1.0, 1.0), p_periodic=0.4, p_trend=0.3) -> dict:
    weights = np.asarray(noise_weights, dtype=float)
    noise = NOISE_KINDS[int(rng.choice(3, p=weights / weights.sum()))]
    periodic = None
    if rng.random() < p_periodic:
        periodic = {
            "shape": PERIODIC_SHAPES[int(rng.integers(3))],
            "period": float(rng.uniform(16.0, 256.0)),
            "amplitude": float(rng.uniform(0.5, 2.0)),
            "phase": float(rng.uniform(0.0, 2 * np.pi)),
        }
    trend = None
    if rng.random() < p_trend:
        form = TREND_FORMS[int(rng.integers(4))]
        if form in ("linear", "exponential"):
            param = float(rng.uniform(-1e-3, 1e-3))
        elif form == "logarithmic":
            param = float(rng.choice([-1.0, 1.0]) * rng.uniform(0.1, 2.0))
        else:
            param = float(rng.uniform(-2.0, 2.0))
        trend = {"form": form, "param": param}
    return {"noise": noise, "periodic": periodic, "trend": trend, "noise_seed": int(rng.integers(2**63 - 1))}


@functools.lru_cache(maxsize=8)
def _time(length: int) -> tuple[np.ndarray, np.ndarray]:
    """t = 0..L-1 and log1p(t), shared read-only by every channel of that length."""
    t = np.arange(length, dtype=np.float64)
    log_t = np.log1p(t)
    t.flags.writeable = log_t.flags.writeable = False
    return t, log_t


def _base_noise(kind: str, rng: np.random.Generator, buffer: np.ndarray) -> np.ndarray:
    e = rng.standard_normal(out=buffer)  # == rng.standard_normal(length)
    if kind == "white":
        return e
    if kind == "red":
        np.cumsum(e, out=e)
        e /= np.sqrt(len(e))  # np.cumsum(e) / np.sqrt(length)
        return e
    # AR(1) with unit stationary variance: x_t = phi x_{t-1} + sqrt(1 - phi^2) e_t, x_0 = e_0.
    c = np.sqrt(1.0 - AR1_PHI**2)
    x, _ = signal.lfilter([c], [1.0, -AR1_PHI], e, zi=[(1.0 - c) * e[0]])
    return x


def _wave_angle(t: np.ndarray, spec: dict, out: np.ndarray) -> np.ndarray:
    """2 pi t / period + phase, operation by operation as the plain expression (same bits)."""
    np.multiply(t, TWO_PI, out=out)
    out /= spec["period"]
    out += spec["phase"]
    return out


def fmod_two_pi(angle: np.ndarray, quotient: np.ndarray, rebuild: Callable[[np.ndarray], np.ndarray]) -> None:
    """angle = np.fmod(angle, TWO_PI) for angle >= 0, bit for bit, at about a quarter of libm's cost.

    With k = floor(angle / TWO_PI), angle - k*hi - k*lo is exact: k*hi and k*lo are exact (k < 2**26),
    the first subtraction is exact (Sterbenz: k*hi is within a factor 2 of angle), and the second
    rounds the exact remainder, which is representable, to itself. Where the rounded division put k
    one off, the result falls outside [0, TWO_PI): `rebuild(indices)` gives those angles again and
    they go through fmod. `quotient`: a float64 scratch array of the same length."""
    np.divide(angle, TWO_PI, out=quotient)
    np.floor(quotient, out=quotient)
    if not quotient.size or quotient.max() >= _EXACT_QUOTIENT_BELOW:
        np.fmod(angle, TWO_PI, out=angle)
        return
    quotient *= _TWO_PI_HI
    angle -= quotient
    quotient /= _TWO_PI_HI  # k again, exactly: k * hi was exact
    quotient *= _TWO_PI_LO
    angle -= quotient
    if angle.min() < 0.0 or angle.max() >= TWO_PI:
        off = np.flatnonzero((angle < 0.0) | (angle >= TWO_PI))
        angle[off] = np.fmod(rebuild(off), TWO_PI)


def _add_periodic(x: np.ndarray, spec: dict, t: np.ndarray, angle: np.ndarray, quotient: np.ndarray) -> None:
    """x += amplitude * wave(2 pi t / period + phase), wave = sin, scipy's square or sawtooth."""
    _wave_angle(t, spec, angle)
    amplitude, shape = spec["amplitude"], spec["shape"]
    if shape != "sine" and not (spec["phase"] >= 0 and spec["period"] > 0):
        # a hand-made plan with a negative angle: the closed forms below assume angle >= 0
        wave = signal.square(angle) if shape == "square" else signal.sawtooth(angle)
        x += amplitude * wave
        return
    if shape == "sine":
        np.sin(angle, out=angle)
        angle *= amplitude
        x += angle
        return
    # == np.mod(angle, 2 pi), as the angle is >= 0
    fmod_two_pi(angle, quotient, lambda off: _wave_angle(t[off], spec, np.empty(len(off))))
    if shape == "square":  # scipy: +1 where mod(angle, 2 pi) < pi (duty 0.5), else -1
        up = angle < np.pi
        np.multiply(up, 2 * amplitude, out=angle)
        angle -= amplitude  # exactly +amplitude or -amplitude: amplitude * wave
        x += angle
        return
    angle /= np.pi  # scipy's sawtooth (width 1): mod(angle, 2 pi) / pi - 1
    angle -= 1.0
    angle *= amplitude
    x += angle


def _add_trend(x: np.ndarray, spec: dict, t: np.ndarray, log_t: np.ndarray, scratch: np.ndarray) -> None:
    form, p = spec["form"], spec["param"]
    if form == "constant":
        x += p
        return
    if form == "logarithmic":
        np.multiply(log_t, p, out=scratch)  # p * log1p(t)
    else:
        np.multiply(t, p, out=scratch)  # p * t
        if form == "exponential":
            np.expm1(scratch, out=scratch)
    x += scratch


def build_scene(
    scene: dict,
    length: int,
    buffers: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """float64 values, mean 0 and std 1. `buffers`: three float64 arrays of `length` to work in (the
    result is one of them, or a fresh array); pass them when building many channels. `out`: a float32
    array to receive the values instead (the last division writes it: the same values as a cast)."""
    first, second, third = buffers if buffers is not None else (np.empty(length), np.empty(length), np.empty(length))
    rng = np.random.default_rng(scene["noise_seed"])
    x = _base_noise(scene["noise"], rng, first)
    scratch, spare = (second, third) if x is first else (first, second)
    if scene["periodic"] is not None or scene["trend"] is not None:
        t, log_t = _time(length)
        if scene["periodic"] is not None:
            _add_periodic(x, scene["periodic"], t, scratch, spare)
        if scene["trend"] is not None:
            _add_trend(x, scene["trend"], t, log_t, scratch)
    # (x - x.mean()) / x.std(), with numpy's own sums: mean = sum / n, std = sqrt(sum((x - mean)^2) / n)
    mean = np.add.reduce(x) / np.intp(length)
    x -= mean
    np.multiply(x, x, out=scratch)
    std = np.sqrt(np.add.reduce(scratch) / np.intp(length))
    return np.divide(x, std if std > 0 else 1.0, out=x if out is None else out)
