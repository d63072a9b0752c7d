"""The categorical part of an AnomalyXL answer: what TimeMaster's hard reward compares exactly.

MCQ: the option; classify-with-evidence: the kind; localize: present/absent; lead-lag: the
direction; measure-magnitude: the sigma band; all-channels: the set of anomalous channels.
"""

from __future__ import annotations

from tsbench.core.answers import extract_choice
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.extract import extract_answer
from tsbench.tasks.anomalyxl.labels import magnitude_band


def answer_class(category: str, gold: dict, answer_text: str) -> str | None:
    """The answer's class (see the module doc); None when the answer does not parse."""
    if category in lb.MCQ_CATEGORIES:
        return extract_choice(answer_text) or None
    extraction = extract_answer(category, gold, answer_text)
    if not extraction.valid:
        return None
    return _class_of(category, extraction.answer)


def gold_class(category: str, gold: dict) -> str:
    if category in lb.MCQ_CATEGORIES:
        return str(gold["answer"])
    return _class_of(category, gold)


def _class_of(category: str, answer: dict) -> str:
    if category == lb.LOCALIZE:
        return "present" if answer["present"] else "absent"
    if category == lb.CLASSIFY:
        return str(answer["kind"])
    if category == lb.LEAD_LAG:
        return str(answer["direction"])
    if category == lb.MAGNITUDE:
        return magnitude_band(float(answer["magnitude_sigma"]))
    if category == lb.ALL_CHANNELS:
        return ",".join(sorted({str(ev["channel"]) for ev in answer["anomalies"]}))
    raise ValueError(f"unknown category {category!r}")
