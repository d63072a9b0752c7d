"""Measure magnitude (1 channel): always a level shift; magnitude log-uniform over [1, 100] sigma."""

from __future__ import annotations

import math

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.categories import AnomalyPlan, describe_channels, single_channel_names
from tsbench.tasks.anomalyxl.injections import plan_injection

SCHEMA = '{"magnitude_sigma": <float>}'


def question(length: int) -> str:
    return (
        f"You are given a time series with one {describe_channels(single_channel_names(), length)}. "
        "It contains one level shift: over a contiguous window the level moves up or down by a constant offset. "
        "Report the size of that offset in units of the series' standard deviation (the std of the whole series without the shift). "
        f"Answer with one JSON object: {SCHEMA}."
    )


def plan(rng, length: int, cfg) -> AnomalyPlan:
    low, high = cfg.measure_magnitude_range
    # Rounded to 2 decimals before injection, so the gold is exactly the injected size.
    magnitude = round(math.exp(rng.uniform(math.log(low), math.log(high))), 2)
    inj = plan_injection(rng, length=length, kind=lb.LEVEL_SHIFT, width_range=cfg.width_range, magnitude=magnitude)
    gold = {"magnitude_sigma": magnitude, "_L": length}
    return AnomalyPlan(single_channel_names(), [inj], gold, question(length))
