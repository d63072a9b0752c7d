"""One module per precise category. Each exposes N_CHANNELS-style naming via `channel_names(cfg)`
and `plan(rng, length, cfg) -> AnomalyPlan`: the anomaly and its gold, decided without arrays."""

from __future__ import annotations

from dataclasses import dataclass, field

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.injections import plan_injection


@dataclass
class AnomalyPlan:
    channel_names: list[str]
    injections: list[dict]
    gold: dict
    question: str
    facts: dict = field(default_factory=dict)  # plan-level facts the MCQ projection needs


def single_channel_names() -> list[str]:
    return ["ch_00"]


def draw(rng, length: int, cfg, variance_floor: int | None = None, *, kind: str | None = None, **fixed) -> dict:
    """One injection within the generator's widths and sizes; its kind drawn uniformly unless given."""
    return plan_injection(
        rng,
        length=length,
        kind=kind or lb.KINDS[int(rng.integers(len(lb.KINDS)))],
        width_range=cfg.width_range,
        variance_floor=cfg.variance_width_floor if variance_floor is None else variance_floor,
        magnitude_range=cfg.magnitude_range,
        **fixed,
    )


# What each kind adds over its window, in the question's words (spec: "Anomaly").
KIND_MEANINGS = {
    lb.LEVEL_SHIFT: "the level moves up or down by a constant offset",
    lb.TRANSIENT_SPIKE: "a triangular pulse, zero at both edges of the window and largest at its centre",
    lb.SEASONALITY: "an added sine wave whose period is between 4 samples and half the window",
    lb.VARIANCE: "extra random noise, drawn sample by sample",
    lb.TREND: "a ramp from zero that reaches its full size at the window's end, after which the series "
    "stays offset by that amount, the window being the ramp",
}


def scale_fact(n_channels: int) -> str:
    which = "Every channel" if n_channels > 1 else "The channel"
    return (
        f"{which} was scaled to mean 0 and standard deviation 1 before any anomaly was added, and "
        "sizes are in units of that standard deviation (σ)."
    )


def window_fact(cfg, variance_floor: int) -> str:
    """Anomaly widths are absolute sample counts, whatever L is (the model should know the scale)."""
    low, high = cfg.width_range
    return (
        f"An anomaly covers one contiguous window of {low} to {high} samples (a change in variance at least "
        f"{max(low, variance_floor)}), whatever the series length; a window is given as half-open indices "
        "[start, end), so end - start is its width."
    )


def kinds_fact(cfg, *, meanings: bool = True) -> str:
    low, high = cfg.magnitude_range
    if meanings:
        kinds = "; ".join(f'"{kind}" ({meaning})' for kind, meaning in KIND_MEANINGS.items())
    else:
        kinds = ", ".join(f'"{kind}"' for kind in KIND_MEANINGS)
    return (
        f"An anomaly is one of five kinds: {kinds}. Its size (the offset, peak, amplitude, noise standard "
        f"deviation or final offset) is between {low:g} and {high:g} σ."
    )


def describe_channels(names: list[str], length: int) -> str:
    shown = ", ".join(names)
    if len(names) == 1:
        return f"channel {shown} of L = {length} samples (indices 0 to {length - 1})"
    return f"channels {shown}, each L = {length} samples (indices 0 to {length - 1})"


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
