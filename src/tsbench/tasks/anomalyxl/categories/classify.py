"""Classify with evidence (1 channel): the anomaly's kind and its window; kind uniform over five."""

from __future__ import annotations

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.categories import (
    AnomalyPlan,
    describe_channels,
    draw,
    kinds_fact,
    scale_fact,
    single_channel_names,
    window_fact,
)

SCHEMA = '{"kind": "<label>", "start": <int>, "end": <int>}'


def question(length: int, cfg) -> str:
    return (
        f"You are given a time series with one {describe_channels(single_channel_names(), length)}. "
        f"{scale_fact(1)} The series contains one anomaly. {window_fact(cfg, cfg.variance_width_floor)} "
        f"{kinds_fact(cfg)} Name the anomaly's kind and give its window. "
        f'Answer with one JSON object: {SCHEMA}, using the label text exactly; if you find no anomaly, answer {{"kind": "{lb.NO_ANOMALY_KIND}"}}.'
    )


def plan(rng, length: int, cfg) -> AnomalyPlan:
    inj = draw(rng, length, cfg)
    gold = {"kind": inj["kind"], "start": inj["start"], "end": inj["end"], "_L": length}
    return AnomalyPlan(single_channel_names(), [inj], gold, question(length, cfg))
