"""One module per precise category. Each exposes N_CHANNELS-style naming via `channel_names(cfg)`
and `plan(rng, length, cfg) -> AnomalyPlan`: the anomaly and its gold, decided without arrays."""

from __future__ import annotations

from dataclasses import dataclass, field

from tsbench.tasks.anomalyxl import labels as lb


@dataclass
class AnomalyPlan:
    channel_names: list[str]
    injections: list[dict]
    gold: dict
    question: str
    facts: dict = field(default_factory=dict)  # plan-level facts the MCQ projection needs


def single_channel_names() -> list[str]:
    return ["ch_00"]


def describe_channels(names: list[str], length: int) -> str:
    shown = ", ".join(names)
    return f"channel{'s' if len(names) > 1 else ''} {shown}, each L = {length} samples (indices 0 to {length - 1})"


def category_module(category: str):
    from tsbench.tasks.anomalyxl.categories import all_channels, classify, lead_lag, localize, magnitude

    modules = {
        lb.LOCALIZE: localize,
        lb.CLASSIFY: classify,
        lb.MAGNITUDE: magnitude,
        lb.ALL_CHANNELS: all_channels,
        lb.LEAD_LAG: lead_lag,
    }
    return modules[category]
