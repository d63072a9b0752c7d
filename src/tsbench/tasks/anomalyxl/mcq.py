"""AnomalyXL-MCQ: project a precise row onto a multiple-choice template over the identical signal.

Only the question, options and gold change; the plan (and hence every value) is the source row's.
"""

from __future__ import annotations

import copy

import numpy as np

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.categories import KIND_MEANINGS, describe_channels, kinds_fact, scale_fact, window_fact
from tsbench.tasks.anomalyxl.categories.lead_lag import max_lag
from tsbench.tasks.anomalyxl.rows import Row
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


def _join(names) -> str:
    return ", ".join(names)


def _identification(source: Row, rng) -> tuple[str, list[str], str]:
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
    question = (
        f"Each anomalous channel carries one anomaly, the anomalous windows never overlap in time, and every "
        f"anomalous channel of the series is among {_join(named)}. Which of these three channels carry an anomaly? "
        "Choose the option that names exactly those channels (None if none of them does)."
    )
    return question, options, gold


def _quarters(length: int) -> str:
    edges = [length * q // 4 for q in range(5)]
    names = ", ".join(f"{name}: [{edges[i]}, {edges[i + 1]})" for i, name in enumerate(lb.START_BINS))
    return f"{names}; {lb.NO_ANOMALY_OPTION}: there is none"


def _template(source: Row, template: str, rng, cfg) -> tuple[str, list[str], str]:
    gold = source.gold
    window = window_fact(cfg, cfg.variance_width_floor)
    if template == lb.PRESENCE:
        question = f"The series contains at most one anomaly. {window} {kinds_fact(cfg, meanings=False)} Does the series contain an anomaly?"
        return question, [lb.YES, lb.NO], lb.YES if gold["present"] else lb.NO
    if template == lb.START_TIME:
        answer = lb.start_bin(gold["start"], source.length) if gold["present"] else lb.NO_ANOMALY_OPTION
        question = (
            f"The series contains at most one anomaly. {window} In which quarter of the series does the anomaly "
            f"start (the index of its first sample)? {_quarters(source.length)}."
        )
        return question, list(lb.START_BINS) + [lb.NO_ANOMALY_OPTION], answer
    if template == lb.CATEGORIZATION:
        wrong = [k for k in lb.KINDS if k != gold["kind"]]
        dropped = wrong[int(rng.integers(len(wrong)))]
        options = [k for k in lb.KINDS if k != dropped] + [lb.NO_ANOMALY_OPTION]
        meanings = "; ".join(f"{k}: {KIND_MEANINGS[k]}" for k in lb.KINDS if k != dropped)
        question = (
            f"The series contains at most one anomaly. {window} The kinds offered mean: {meanings}. "
            "What kind of anomaly does the series contain?"
        )
        return question, options, gold["kind"]
    if template == lb.MAGNITUDE_BAND:
        question = (
            f"The series contains one level shift: over one window of {cfg.width_range[0]} to {cfg.width_range[1]} samples "
            "the level moves up or down by a constant offset. How large is the offset in σ, up or down alike? "
            "A band includes its lower edge and excludes its upper one (1-3σ: at least 1, below 3)."
        )
        return question, list(lb.MAGNITUDE_BANDS) + [lb.NO_ANOMALY_OPTION], lb.magnitude_band(gold["magnitude_sigma"])
    if template == lb.IDENTIFICATION:
        return _identification(source, rng)
    if template == lb.INDICATOR:
        quarter = source.length // 4
        question = (
            f"Each channel contains one anomaly. {window_fact(cfg, cfg.lead_lag_variance_width_floor)} "
            "How does channel A's anomaly relate in time to channel B's? Coupled anomalies have the same kind, width, "
            f"size and sign, and their starts are 1 to {max_lag(source.length)} samples apart (never more than L/4 = "
            f"{quarter}); independent ones each have their own and start more than {quarter} samples apart. "
            "Leading: coupled, and A's starts first; Lagging: coupled, and A's starts after B's; Correlated: coupled, "
            "starting at the same sample; Uncorrelated: independent; No anomaly: neither channel has one."
        )
        return question, list(lb.INDICATOR_OPTIONS), lb.DIRECTION_TO_INDICATOR[gold["direction"]]
    raise ValueError(f"unknown MCQ template {template!r}")


def project(source: Row, template: str, cfg) -> Row:
    """The MCQ row `template` over `source`'s signal; `cfg` is the generator config (for the facts its question states)."""
    key = source.plan["key"]
    rng = np.random.default_rng(
        derive_seed(key["seed"], key["split"], key["category"], key["length"], key["index"], MCQ_STREAM, template)
    )
    stem, options, answer = _template(source, template, rng, cfg)
    options = [options[int(i)] for i in rng.permutation(len(options))]
    listed = "\n".join(f"- {o}" for o in options)
    question = (
        f"You are given a time series: {describe_channels(source.channel_names, source.length)}. {scale_fact(len(source.channel_names))} {stem}\n"
        f"Options:\n{listed}\n"
        'Answer with exactly one option text, as one JSON object: {"answer": "<option>"}.'
    )
    plan = copy.deepcopy(source.plan)
    plan["projection"] = {"template": template, "source_id": source.id}
    return Row(
        id=f"{source.id}-{template}",
        split=source.split,
        regime="coarse",
        category=template,
        length=source.length,
        channel_names=list(source.channel_names),
        question=question,
        options=options,
        gold={"answer": answer, "options": options},
        plan=plan,
        seed=source.seed,
        source_id=source.id,
    )


def select_sources(plans: list[Row], split: str, seed: int) -> set[str]:
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
