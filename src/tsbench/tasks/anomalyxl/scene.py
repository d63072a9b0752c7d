"""Background scenes: one channel = base noise + optional periodic part + optional trend, z-normalised.

`plan_scene` decides every parameter (cheap, no arrays); `build_scene` turns that decision into
values. The split keeps rows rebuildable from their stored plan alone.
"""

from __future__ import annotations

import numpy as np
from scipy import signal

NOISE_KINDS = ("white", "red", "ar1")
PERIODIC_SHAPES = ("sine", "square", "sawtooth")
TREND_FORMS = ("linear", "exponential", "logarithmic", "constant")
AR1_PHI = 0.7


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


def _base_noise(kind: str, length: int, rng: np.random.Generator) -> np.ndarray:
    e = rng.standard_normal(length)
    if kind == "white":
        return e
    if kind == "red":
        return np.cumsum(e) / np.sqrt(length)
    # AR(1) with unit stationary variance: x_t = phi x_{t-1} + sqrt(1 - phi^2) e_t, x_0 = e_0.
    c = np.sqrt(1.0 - AR1_PHI**2)
    x, _ = signal.lfilter([c], [1.0, -AR1_PHI], e, zi=[(1.0 - c) * e[0]])
    return x


def _periodic(spec: dict, t: np.ndarray) -> np.ndarray:
    angle = 2 * np.pi * t / spec["period"] + spec["phase"]
    if spec["shape"] == "sine":
        wave = np.sin(angle)
    elif spec["shape"] == "square":
        wave = signal.square(angle)
    else:
        wave = signal.sawtooth(angle)
    return spec["amplitude"] * wave


def _trend(spec: dict, t: np.ndarray) -> np.ndarray:
    form, p = spec["form"], spec["param"]
    if form == "linear":
        return p * t
    if form == "exponential":
        return np.expm1(p * t)
    if form == "logarithmic":
        return p * np.log1p(t)
    return np.full_like(t, p)


def build_scene(scene: dict, length: int) -> np.ndarray:
    """float64 values, mean 0 and std 1."""
    rng = np.random.default_rng(scene["noise_seed"])
    x = _base_noise(scene["noise"], length, rng)
    if scene["periodic"] is not None or scene["trend"] is not None:
        t = np.arange(length, dtype=np.float64)
        if scene["periodic"] is not None:
            x = x + _periodic(scene["periodic"], t)
        if scene["trend"] is not None:
            x = x + _trend(scene["trend"], t)
    std = x.std()
    return (x - x.mean()) / (std if std > 0 else 1.0)
