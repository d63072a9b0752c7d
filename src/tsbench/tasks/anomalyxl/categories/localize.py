"""Localize (1 channel): is there an anomaly, and where? Present with probability p_present."""

from __future__ import annotations

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.categories import AnomalyPlan, describe_channels, single_channel_names
from tsbench.tasks.anomalyxl.injections import plan_injection

SCHEMA = '{"present": true, "start": <int>, "end": <int>} or {"present": false}'


def question(length: int) -> str:
    return (
        f"You are given a time series with one {describe_channels(single_channel_names(), length)}. "
        "It may contain one anomaly: a contiguous window where the values depart from the series' usual behaviour. "
        "Decide whether an anomaly is present and, if it is, give its window as half-open indices [start, end). "
        f"Answer with one JSON object: {SCHEMA}."
    )


def plan(rng, length: int, cfg) -> AnomalyPlan:
    present = bool(rng.random() < cfg.p_present)
    injections = []
    gold: dict = {"present": present}
    if present:
        kind = lb.KINDS[int(rng.integers(len(lb.KINDS)))]
        inj = plan_injection(
            rng, length=length, kind=kind, width_range=cfg.width_range,
            variance_floor=cfg.variance_width_floor, magnitude_range=cfg.magnitude_range,
        )
        injections.append(inj)
        gold.update(start=inj["start"], end=inj["end"])
    gold["_L"] = length
    return AnomalyPlan(single_channel_names(), injections, gold, question(length))
