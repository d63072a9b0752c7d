"""AnomalyXL-MCQ: project a precise row onto a multiple-choice template over the identical signal.

Only the question, options and gold change; the plan (and hence every value) is the source row's.
"""

from __future__ import annotations

import copy

import numpy as np

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.categories import describe_channels
from tsbench.tasks.anomalyxl.rowplan import RowPlan
from tsbench.tasks.anomalyxl.seeds import MCQ_STREAM, derive_seed

TEMPLATES_BY_SOURCE = {
    lb.LOCALIZE: (lb.PRESENCE, lb.START_TIME),
    lb.CLASSIFY: (lb.CATEGORIZATION,),
    lb.MAGNITUDE: (lb.MAGNITUDE_BAND,),
    lb.ALL_CHANNELS: (lb.IDENTIFICATION,),
    lb.LEAD_LAG: (lb.INDICATOR,),
}
# Source rows projected from the paper's 800-row test split (40 localize, 42 of each other).
PAPER_SOURCE_SHARE = {
    lb.LOCALIZE: 40 / 200,
    lb.CLASSIFY: 42 / 200,
    lb.MAGNITUDE: 42 / 200,
    lb.ALL_CHANNELS: 42 / 100,
    lb.LEAD_LAG: 42 / 100,
}


def start_bin(start: int, length: int) -> str:
    return lb.START_BINS[min(3, start * 4 // length)]


def magnitude_band(m: float) -> str:
    edges = lb.MAGNITUDE_BAND_EDGES
    for i, band in enumerate(lb.MAGNITUDE_BANDS):
        if m < edges[i + 1]:
            return band
    return lb.MAGNITUDE_BANDS[-1]


def _join(names) -> str:
    return ", ".join(names)


def _identification(source: RowPlan, rng) -> tuple[str, list[str], str]:
    all_names = source.channel_names
    anomalous = list(source.facts["anomalous_channels"])
    others = [n for n in all_names if n not in anomalous]
    fillers = [others[i] for i in rng.choice(len(others), size=3 - len(anomalous), replace=False)]
    named = sorted(anomalous + fillers)
    gold_set = sorted(anomalous)
    singles = [[n] for n in named]
    if len(gold_set) == 1:
        rest = [s for s in singles if s != gold_set]
        singletons = [gold_set, rest[int(rng.integers(len(rest)))]]
    else:
        picks = rng.choice(3, size=2, replace=False)
        singletons = [singles[int(i)] for i in picks]
    if len(gold_set) == 2:
        pair = gold_set
    else:
        drop = int(rng.integers(3))
        pair = [n for i, n in enumerate(named) if i != drop]
    options = [_join(s) for s in singletons] + [_join(pair), _join(named), lb.IDENTIFICATION_NONE]
    gold = _join(gold_set) if gold_set else lb.IDENTIFICATION_NONE
    question = f"Which of the channels {_join(named)} carry an anomaly? (Other channels are not asked about.)"
    return question, options, gold


def _template(source: RowPlan, template: str, rng) -> tuple[str, list[str], str]:
    gold = source.gold
    if template == lb.PRESENCE:
        return "Does the series contain an anomaly?", [lb.YES, lb.NO], lb.YES if gold["present"] else lb.NO
    if template == lb.START_TIME:
        answer = start_bin(gold["start"], source.length) if gold["present"] else lb.NO_ANOMALY_OPTION
        question = (
            "When does the anomaly start? Before: in the first quarter of the series [0, L/4); Early: the second quarter; "
            "Medium: the third quarter; Late: the last quarter."
        )
        return question, list(lb.START_BINS) + [lb.NO_ANOMALY_OPTION], answer
    if template == lb.CATEGORIZATION:
        wrong = [k for k in lb.KINDS if k != gold["kind"]]
        dropped = wrong[int(rng.integers(len(wrong)))]
        options = [k for k in lb.KINDS if k != dropped] + [lb.NO_ANOMALY_OPTION]
        return "What kind of anomaly does the series contain?", options, gold["kind"]
    if template == lb.MAGNITUDE_BAND:
        question = "The series contains one level shift. How large is it, in units of the series' standard deviation (σ)?"
        return question, list(lb.MAGNITUDE_BANDS) + [lb.NO_ANOMALY_OPTION], magnitude_band(gold["magnitude_sigma"])
    if template == lb.IDENTIFICATION:
        return _identification(source, rng)
    if template == lb.INDICATOR:
        question = (
            "How does channel A's anomaly relate in time to channel B's? Leading: A's starts first and the two are coupled; "
            "Lagging: A's starts after B's; Uncorrelated: the two anomalies are independent."
        )
        return question, list(lb.INDICATOR_OPTIONS), lb.DIRECTION_TO_INDICATOR[gold["direction"]]
    raise ValueError(f"unknown MCQ template {template!r}")


def project(source: RowPlan, template: str) -> RowPlan:
    key = source.plan["key"]
    rng = np.random.default_rng(derive_seed(key["seed"], key["split"], key["category"], key["length"], key["index"], MCQ_STREAM, template))
    stem, options, answer = _template(source, template, rng)
    options = [options[int(i)] for i in rng.permutation(len(options))]
    listed = "\n".join(f"- {o}" for o in options)
    question = (
        f"You are given a time series: {describe_channels(source.channel_names, source.length)}. {stem}\n"
        f"Options:\n{listed}\n"
        'Answer with exactly one option text, as one JSON object: {"answer": "<option>"}.'
    )
    plan = copy.deepcopy(source.plan)
    plan["projection"] = {"template": template, "source_id": source.id}
    return RowPlan(
        id=f"{source.id}-{template}", split=source.split, regime="coarse", category=template,
        length=source.length, channel_names=list(source.channel_names), question=question, options=options,
        gold={"answer": answer, "options": options}, plan=plan, seed=source.seed, source_id=source.id,
    )


def select_sources(plans: list[RowPlan], split: str, seed: int) -> set[str]:
    """Ids of precise rows to project: the paper's share of each category on test, all rows otherwise."""
    if split != "test":
        return {p.id for p in plans}
    chosen: set[str] = set()
    for category, share in PAPER_SOURCE_SHARE.items():
        rows = [p for p in plans if p.category == category]
        if not rows:
            continue
        n = min(len(rows), max(1, round(len(rows) * share)))
        ranked = sorted(rows, key=lambda p: derive_seed(seed, split, "mcq-select", p.id))
        chosen.update(p.id for p in ranked[:n])
    return chosen
