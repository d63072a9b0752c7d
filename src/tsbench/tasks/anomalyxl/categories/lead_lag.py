"""Lead-lag with magnitude (channels A and B): coupled anomalies offset in time, or independent ones.

lead = A's anomaly starts `lag_samples` before B's; lag = after. Coupled pairs share kind, width,
magnitude and sign. Independent sides draw their own anomalies with starts more than L/4 apart.
"""

from __future__ import annotations

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.categories import AnomalyPlan, describe_channels, draw, kinds_fact, scale_fact, window_fact

NAMES = ["A_ch_00", "B_ch_00"]
SCHEMA = '{"direction": "lead" | "lag" | "independent", "lag_samples": <int>}'
MAX_TRIES = 10_000


def max_lag(length: int) -> int:
    """The largest offset of a coupled pair: L/4 (and never past L - 256, which binds only for tiny L)."""
    return min(length // 4, length - 256)


def question(length: int, cfg) -> str:
    quarter = length // 4
    return (
        f"You are given a two-channel time series: {describe_channels(NAMES, length)}. {scale_fact(len(NAMES))} "
        f"Each channel contains one anomaly. {window_fact(cfg, cfg.lead_lag_variance_width_floor)} "
        f"{kinds_fact(cfg, meanings=False)} Either the two anomalies are coupled (the same kind, width, size and sign) "
        f'and A\'s starts some number of samples before B\'s (direction "lead") or after B\'s ("lag"); that offset '
        f"is between 1 and {max_lag(length)} samples, never more than L/4 = {quarter}. Or they are independent: each has "
        f"its own kind, width and size, and their starts are more than L/4 = {quarter} samples apart. "
        "Give the direction and lag_samples, the distance between the two starts in samples "
        "(0 when independent, where it is not scored). "
        f"Answer with one JSON object: {SCHEMA}."
    )


def plan(rng, length: int, cfg) -> AnomalyPlan:
    direction = lb.DIRECTIONS[int(rng.integers(3))]
    if direction == "independent":
        a = draw(rng, length, cfg, cfg.lead_lag_variance_width_floor, channel=0)
        for _ in range(MAX_TRIES):
            b = draw(rng, length, cfg, cfg.lead_lag_variance_width_floor, channel=1)
            if abs(b["start"] - a["start"]) > length / 4:
                break
        else:
            raise ValueError(f"could not place independent windows in L={length}")
        lag = 0
    else:
        shared = draw(rng, length, cfg, cfg.lead_lag_variance_width_floor)
        width = shared["end"] - shared["start"]
        lag = int(rng.integers(1, max_lag(length) + 1))
        first = int(rng.integers(0, length - width - lag + 1))
        a_start, b_start = (first, first + lag) if direction == "lead" else (first + lag, first)
        keep = {k: v for k, v in shared.items() if k not in ("channel", "start", "end")}
        a = {**keep, "channel": 0, "start": a_start, "end": a_start + width}
        b = {**keep, "channel": 1, "start": b_start, "end": b_start + width}
    gold = {"direction": direction, "lag_samples": lag, "_L": length}
    return AnomalyPlan(list(NAMES), [a, b], gold, question(length, cfg), {"direction": direction})
