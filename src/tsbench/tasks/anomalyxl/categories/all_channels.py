"""Localize all channels (16 channels): K ~ U{min_k..max_k} anomalies on K distinct channels,
windows that never overlap in time; the gold lists every event sorted by (channel, start)."""

from __future__ import annotations

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.categories import AnomalyPlan, describe_channels, draw, kinds_fact, scale_fact, window_fact

SCHEMA = '{"anomalies": [{"channel": "<name>", "start": <int>, "end": <int>}, ...]}'
MAX_TRIES = 10_000


def channel_names(cfg) -> list[str]:
    return [f"ch_{i:02d}" for i in range(cfg.n_channels_all)]


def question(names: list[str], length: int, cfg) -> str:
    return (
        f"You are given a multichannel time series: {describe_channels(names, length)}. {scale_fact(len(names))} "
        f"Between {cfg.min_k} and {cfg.max_k} of the channels carry one anomaly each, each on a different channel; "
        "the anomalous windows never overlap in time, and the other channels carry none. "
        f"{window_fact(cfg, cfg.variance_width_floor)} {kinds_fact(cfg, meanings=False)} "
        "List every anomalous channel with its window; a channel may be named, or given by its index in the list above. "
        f"Answer with one JSON object: {SCHEMA}; use an empty list if there is no anomaly."
    )


def _overlaps(start: int, end: int, taken: list[tuple[int, int]]) -> bool:
    return any(start < e and s < end for s, e in taken)


def plan(rng, length: int, cfg) -> AnomalyPlan:
    names = channel_names(cfg)
    k = int(rng.integers(cfg.min_k, cfg.max_k + 1))
    targets = sorted(int(c) for c in rng.choice(len(names), size=k, replace=False))
    injections: list[dict] = []
    taken: list[tuple[int, int]] = []
    for channel in targets:
        kind = lb.KINDS[int(rng.integers(len(lb.KINDS)))]
        for _ in range(MAX_TRIES):
            inj = draw(rng, length, cfg, kind=kind, channel=channel)
            if not _overlaps(inj["start"], inj["end"], taken):
                break
        else:
            raise ValueError(f"could not place {k} non-overlapping windows in L={length}")
        taken.append((inj["start"], inj["end"]))
        injections.append(inj)
    events = sorted(
        ({"channel": names[i["channel"]], "start": i["start"], "end": i["end"]} for i in injections),
        key=lambda ev: (ev["channel"], ev["start"]),
    )
    gold = {"anomalies": events, "channels": names, "_L": length}
    facts = {"anomalous_channels": sorted({ev["channel"] for ev in events})}
    return AnomalyPlan(names, injections, gold, question(names, length, cfg), facts)
