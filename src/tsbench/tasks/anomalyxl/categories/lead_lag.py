"""Lead-lag with magnitude (channels A and B): coupled anomalies offset in time, or independent ones.

lead = A's anomaly starts `lag_samples` before B's; lag = after. Coupled pairs share kind, width,
magnitude and sign. Independent sides draw their own anomalies with starts more than L/4 apart.
"""

from __future__ import annotations

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.categories import AnomalyPlan, describe_channels
from tsbench.tasks.anomalyxl.injections import plan_injection

NAMES = ["A_ch_00", "B_ch_00"]
SCHEMA = '{"direction": "lead" | "lag" | "independent", "lag_samples": <int>}'
MAX_TRIES = 10_000


def question(length: int) -> str:
    return (
        f"You are given a two-channel time series: {describe_channels(NAMES, length)}. "
        "Each channel contains one anomaly. Either the two anomalies are coupled (same kind, width and size) and "
        "A's anomaly starts some number of samples before B's (A leads) or after B's (A lags), or the two are independent. "
        "Give the direction and the distance between the two onsets in samples (0 when independent). "
        f"Answer with one JSON object: {SCHEMA}."
    )


def _draw(rng, length: int, cfg, **fixed) -> dict:
    return plan_injection(
        rng, length=length, width_range=cfg.width_range,
        variance_floor=cfg.lead_lag_variance_width_floor, magnitude_range=cfg.magnitude_range, **fixed,
    )


def plan(rng, length: int, cfg) -> AnomalyPlan:
    direction = lb.DIRECTIONS[int(rng.integers(3))]
    if direction == "independent":
        a = _draw(rng, length, cfg, kind=lb.KINDS[int(rng.integers(5))], channel=0)
        for _ in range(MAX_TRIES):
            b = _draw(rng, length, cfg, kind=lb.KINDS[int(rng.integers(5))], channel=1)
            if abs(b["start"] - a["start"]) > length / 4:
                break
        else:
            raise ValueError(f"could not place independent windows in L={length}")
        lag = 0
    else:
        shared = _draw(rng, length, cfg, kind=lb.KINDS[int(rng.integers(5))])
        width = shared["end"] - shared["start"]
        lag = int(rng.integers(1, min(length // 4, length - 256) + 1))
        first = int(rng.integers(0, length - width - lag + 1))
        a_start, b_start = (first, first + lag) if direction == "lead" else (first + lag, first)
        keep = {k: v for k, v in shared.items() if k not in ("channel", "start", "end")}
        a = {**keep, "channel": 0, "start": a_start, "end": a_start + width}
        b = {**keep, "channel": 1, "start": b_start, "end": b_start + width}
    gold = {"direction": direction, "lag_samples": lag, "_L": length}
    return AnomalyPlan(list(NAMES), [a, b], gold, question(length), {"direction": direction})
