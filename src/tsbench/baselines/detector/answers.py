"""From analysed channels to an answer object in any AnomalyXL category."""

from __future__ import annotations

import math

import numpy as np

from tsbench.baselines import decode
from tsbench.baselines.detector.model import DEFAULT, ChannelResult, Finding, Settings
from tsbench.baselines.detector.search import analyse_channel, presence_threshold
from tsbench.core.episode import EpisodeTask
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.labels import magnitude_band, start_bin


def _series(task: EpisodeTask) -> list[np.ndarray]:
    if task.values is None:
        raise ValueError("the detector needs the task's series")
    return [np.asarray(values, dtype=np.float64) for values in task.values]


def _lead_lag(a: Finding, b: Finding, length: int) -> tuple[str, int]:
    """Direction and lag from the two onsets: more than L/4 apart means independent."""
    delta = b.start - a.start
    if abs(delta) > length / 4:
        return "independent", 0
    if delta == 0:
        return "lead", 1
    return ("lead" if delta > 0 else "lag"), abs(delta)


def analyse(category: str, values: list[np.ndarray]) -> list[ChannelResult]:
    """Every channel's analysis. Only lead-lag rows let a variance window be as short as 11 samples."""
    short = category in (lb.LEAD_LAG, lb.INDICATOR)
    return [analyse_channel(v, variance_min_width=11 if short else 64) for v in values]


def decide(
    category: str,
    length: int,
    names: list[str],
    options: list[str],
    results: list[ChannelResult],
    settings: Settings = DEFAULT,
) -> dict:
    """The answer object for any category from the channels' analyses (pure: no signal work)."""
    c, L = category, length
    best = [r.best(settings) for r in results]
    if c in (lb.LEAD_LAG, lb.INDICATOR):
        direction, lag = _lead_lag(best[0], best[1], L)
        if c == lb.LEAD_LAG:
            return decode.lead_lag_answer(direction, lag, L)
        return {"answer": decode.preferred_option(options, [lb.DIRECTION_TO_INDICATOR[direction]])}
    if c in (lb.ALL_CHANNELS, lb.IDENTIFICATION):
        threshold = presence_threshold(L, settings.channel_offset, channels=len(results))
        evidence = [r.evidence(settings) for r in results]
        if c == lb.ALL_CHANNELS:
            events = [(names[i], best[i].start, best[i].end) for i in _flag_channels(best, evidence, threshold)]
            return decode.all_channels_answer(events, L)
        probability = {}
        for i, name in enumerate(names):
            margin = min(max(evidence[i] - threshold, -50.0), 50.0)
            probability[name] = 1.0 / (1.0 + math.exp(-margin))
        return {"answer": decode.identification_option(options, probability)}
    result, top = results[0], best[0]
    present = result.evidence(settings) > presence_threshold(L, settings.presence_offset)
    if c == lb.LOCALIZE:
        return decode.localize_answer(present, top.start, top.end, L)
    if c == lb.CLASSIFY:
        return decode.classify_answer(top.kind, top.start, top.end, L)
    if c == lb.MAGNITUDE:
        return decode.magnitude_answer(result.magnitude())
    if c == lb.PRESENCE:
        return {"answer": decode.preferred_option(options, [lb.YES if present else lb.NO])}
    if c == lb.START_TIME:
        wanted = start_bin(top.start, L) if present else lb.NO_ANOMALY_OPTION
        return {"answer": decode.preferred_option(options, [wanted])}
    if c == lb.CATEGORIZATION:
        kinds = [f.kind for f in result.ranked(settings)]
        return {"answer": decode.preferred_option(options, kinds + [lb.NO_ANOMALY_OPTION])}
    if c == lb.MAGNITUDE_BAND:
        return {"answer": decode.preferred_option(options, [magnitude_band(result.magnitude())])}
    raise ValueError(f"unknown category {c!r}")


def answer_object(task: EpisodeTask, settings: Settings = DEFAULT) -> dict:
    """The answer object for any category, computed from the task's series alone."""
    results = analyse(task.category, _series(task))
    return decide(task.category, task.length, list(task.channel_names), list(task.options), results, settings)


def _flag_channels(best: list[Finding], evidence: list[float], threshold: float, max_events: int = 3) -> list[int]:
    """Channels whose evidence clears the threshold, strongest first, at most three, and never two
    whose windows overlap in time (the generator keeps all-channels windows disjoint)."""
    chosen: list[int] = []
    for i in sorted(range(len(best)), key=lambda i: -evidence[i]):
        f = best[i]
        if evidence[i] <= threshold or len(chosen) == max_events:
            break
        if any(f.start < best[j].end and best[j].start < f.end for j in chosen):
            continue
        chosen.append(i)
    return chosen
