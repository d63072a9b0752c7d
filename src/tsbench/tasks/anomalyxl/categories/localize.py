"""Localize (1 channel): is there an anomaly, and where? Present with probability p_present."""

from __future__ import annotations

from tsbench.tasks.anomalyxl.categories import (
    AnomalyPlan,
    describe_channels,
    draw,
    kinds_fact,
    scale_fact,
    single_channel_names,
    window_fact,
)

SCHEMA = '{"present": true, "start": <int>, "end": <int>} or {"present": false}'


def question(length: int, cfg) -> str:
    return (
        f"You are given a time series with one {describe_channels(single_channel_names(), length)}. "
        f"{scale_fact(1)} The series contains at most one anomaly, and may contain none. "
        f"{window_fact(cfg, cfg.variance_width_floor)} {kinds_fact(cfg, meanings=False)} "
        "Decide whether an anomaly is present and, if it is, give its window. "
        f"Answer with one JSON object: {SCHEMA}."
    )


def plan(rng, length: int, cfg) -> AnomalyPlan:
    present = bool(rng.random() < cfg.p_present)
    injections = []
    gold: dict = {"present": present}
    if present:
        inj = draw(rng, length, cfg)
        injections.append(inj)
        gold.update(start=inj["start"], end=inj["end"])
    gold["_L"] = length
    return AnomalyPlan(single_channel_names(), injections, gold, question(length, cfg))
