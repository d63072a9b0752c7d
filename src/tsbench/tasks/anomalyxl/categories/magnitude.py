"""Measure magnitude (1 channel): always a level shift; magnitude log-uniform over [1, 100] sigma."""

from __future__ import annotations

import math

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.categories import AnomalyPlan, describe_channels, single_channel_names
from tsbench.tasks.anomalyxl.injections import plan_injection

SCHEMA = '{"magnitude_sigma": <float>}'


def question(length: int, cfg) -> str:
    low, high = cfg.width_range
    smallest, largest = cfg.measure_magnitude_range
    return (
        f"You are given a time series with one {describe_channels(single_channel_names(), length)}. "
        f"It contains one level shift: over one contiguous window of {low} to {high} samples the level moves up or "
        "down by a constant offset. The channel was scaled to mean 0 and standard deviation 1 before the shift was "
        "added; σ is that standard deviation. Report the size of the offset in σ, as a positive number "
        f"(it is between {smallest:g} and {largest:g} σ, whether the level moves up or down). "
        f"Answer with one JSON object: {SCHEMA}."
    )


def plan(rng, length: int, cfg) -> AnomalyPlan:
    low, high = cfg.measure_magnitude_range
    # Rounded to 2 decimals before injection, so the gold is exactly the injected size.
    magnitude = round(math.exp(rng.uniform(math.log(low), math.log(high))), 2)
    inj = plan_injection(rng, length=length, kind=lb.LEVEL_SHIFT, width_range=cfg.width_range, magnitude=magnitude)
    gold = {"magnitude_sigma": magnitude, "_L": length}
    return AnomalyPlan(single_channel_names(), [inj], gold, question(length, cfg))
