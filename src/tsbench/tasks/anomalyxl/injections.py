"""The five anomaly transforms, each added to one window [start, end) of one channel.

An injection is a plain dict decided at planning time; magnitudes are in units of the channel's
std measured just before injection, so the same plan means the same visual size on any scene.
"""

from __future__ import annotations

import numpy as np

from tsbench.tasks.anomalyxl import labels as lb


def plan_injection(
    rng: np.random.Generator,
    *,
    length: int,
    kind: str,
    channel: int = 0,
    width: int | None = None,
    start: int | None = None,
    magnitude: float | None = None,
    sign: int | None = None,
    width_range=(8, 256),
    variance_floor: int = 64,
    magnitude_range=(2.0, 6.0),
) -> dict:
    """Decide one anomaly; any argument given is kept, the rest is drawn."""
    if width is None:
        low = max(width_range[0], variance_floor) if kind == lb.VARIANCE else width_range[0]
        width = int(rng.integers(low, max(low, width_range[1]) + 1))
    if start is None:
        start = int(rng.integers(0, length - width + 1))
    if magnitude is None:
        magnitude = float(rng.uniform(*magnitude_range))
    if sign is None:
        sign = int(rng.choice([-1, 1]))
    inj = {"channel": channel, "kind": kind, "start": start, "end": start + width, "magnitude": magnitude, "sign": sign}
    if kind == lb.SEASONALITY:
        inj["period"] = int(rng.integers(4, width // 2 + 1))
        inj["phase"] = float(rng.uniform(0.0, 2 * np.pi))
    if kind == lb.VARIANCE:
        inj["noise_seed"] = int(rng.integers(2**63 - 1))
    return inj


def apply_injection(x: np.ndarray, inj: dict) -> None:
    """Add the anomaly to channel values `x` in place."""
    s, e = inj["start"], inj["end"]
    w = e - s
    m = inj["magnitude"] * float(x.std())
    signed = inj["sign"] * m
    kind = inj["kind"]
    if kind == lb.LEVEL_SHIFT:
        x[s:e] += signed
    elif kind == lb.TRANSIENT_SPIKE:
        half = (w - 1) / 2.0
        x[s:e] += signed * (1.0 - np.abs(np.arange(w) - half) / half)
    elif kind == lb.SEASONALITY:
        t = np.arange(w)
        x[s:e] += m * np.sin(2 * np.pi * t / inj["period"] + inj["phase"])
    elif kind == lb.VARIANCE:
        x[s:e] += np.random.default_rng(inj["noise_seed"]).normal(0.0, m, size=w)
    elif kind == lb.TREND:
        x[s:e] += np.linspace(0.0, signed, w)
        x[e:] += signed
    else:
        raise ValueError(f"unknown anomaly kind {kind!r}")
