"""Classify with evidence (1 channel): the anomaly's kind and its window; kind uniform over five."""

from __future__ import annotations

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.categories import AnomalyPlan, describe_channels, single_channel_names
from tsbench.tasks.anomalyxl.injections import plan_injection

SCHEMA = '{"kind": "<label>", "start": <int>, "end": <int>}'


def question(length: int) -> str:
    labels = ", ".join(f'"{k}"' for k in lb.KINDS)
    return (
        f"You are given a time series with one {describe_channels(single_channel_names(), length)}. "
        f"It contains one anomaly, of one of these kinds: {labels}. "
        "Name the kind and give the anomaly's window as half-open indices [start, end). "
        f'Answer with one JSON object: {SCHEMA}, using the label text exactly; if you find no anomaly, answer {{"kind": "{lb.NO_ANOMALY_KIND}"}}.'
    )


def plan(rng, length: int, cfg) -> AnomalyPlan:
    kind = lb.KINDS[int(rng.integers(len(lb.KINDS)))]
    inj = plan_injection(
        rng, length=length, kind=kind, width_range=cfg.width_range,
        variance_floor=cfg.variance_width_floor, magnitude_range=cfg.magnitude_range,
    )
    gold = {"kind": kind, "start": inj["start"], "end": inj["end"], "_L": length}
    return AnomalyPlan(single_channel_names(), [inj], gold, question(length))
