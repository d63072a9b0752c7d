"""Reads TSRBench's published files (nothing is downloaded).

Where the public data lives: the Hugging Face dataset `umd-zhou-lab/TSRBench`
(github.com/tianyi-lab/TSRBench): `{perception,prediction,decision,reasoning}/<subtask>.jsonl`, one
multiple-choice item per line with question, choices, answer (a letter), domain, task, type,
name_of_series and timeseries (a list of numbers, a list of channels, possibly one of timestamp
strings, or {feature: {history: [...], future: [...]}}; abductive items nest question, choices and
answer under multiple_choice_question). Perception's one file holds four subtasks, told apart by
each item's `task` field, so there are 15 subtasks in 4 dimensions (paper Table 7).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tsbench.core.errors import UserError
from tsbench.tasks.user_files import UserFolder, user_folder

SOURCE_HINT = (
    "TSRBench's jsonl files ({perception,prediction,decision,reasoning}/*.jsonl) from the Hugging Face "
    "dataset umd-zhou-lab/TSRBench"
)
DIMENSIONS = {
    "perception": ("pattern_recognition", "noise_understanding", "anomaly_detection", "similarity_analysis"),
    "reasoning": (
        "etiological_reasoning",
        "causal_reasoning",
        "abductive_reasoning",
        "temporal_relation_reasoning",
        "numerical_reasoning",
        "deductive_reasoning",
        "inductive_reasoning",
    ),
    "prediction": ("time_series_forecasting", "event_prediction"),
    "decision": ("qualitative_decision", "quantitative_decision"),
}
SUBTASKS = tuple(s for group in DIMENSIONS.values() for s in group)
DIMENSION_OF = {s: d for d, group in DIMENSIONS.items() for s in group}
LETTERS = "ABCDEFGHIJ"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(text).lower()).strip("_")


@dataclass
class Item:
    """One TSRBench item, as published."""

    key: str
    subtask: str
    question: str
    choices: list[str]
    answer: str  # the gold letter
    domain: str
    task: str
    channel_names: list[str]
    values: np.ndarray  # (channels, L), NaN-padded where channels differ in length
    times: list[str]

    @property
    def dimension(self) -> str:
        return DIMENSION_OF[self.subtask]


def subtask_of(file_stem: str, record: dict[str, Any]) -> str | None:
    stem = slug(file_stem)
    if stem == "perception":
        task = slug(record.get("task") or "")
        found = next((s for s in DIMENSIONS["perception"] if s in task or task in s), None)
        if found is None and "comparative" in task:
            found = "similarity_analysis"  # Table 7 names it Comparative Analysis
        return found
    if stem in SUBTASKS:
        return stem
    return next((s for s in SUBTASKS if s.startswith(stem) or stem.startswith(s)), None)


def gold_letter(answer: Any) -> str | None:
    text = str(answer or "").strip().upper()
    return next((c for c in text if c.isalpha()), None)


def _channels(raw: Any, names: list[str]) -> tuple[list[str], list[list[float]], list[str]]:
    if isinstance(raw, str):
        raw = json.loads(raw)
    channels: list[tuple[str, list[float]]] = []
    times: list[str] = []
    if isinstance(raw, dict):
        for feature, parts in raw.items():
            if isinstance(parts, dict):
                channels += [(f"{feature}.{part}", list(v)) for part, v in parts.items() if isinstance(v, list)]
            elif isinstance(parts, list):
                channels.append((str(feature), list(parts)))
    elif isinstance(raw, (list, np.ndarray)) and len(raw) and isinstance(raw[0], (list, np.ndarray)):
        numeric = 0
        for channel in raw:
            channel = list(channel)
            if channel and isinstance(channel[0], str):
                times = [str(t) for t in channel]
                continue
            name = names[numeric] if numeric < len(names) else f"series_{numeric}"
            channels.append((str(name), channel))
            numeric += 1
    elif isinstance(raw, (list, np.ndarray)) and len(raw):
        channels.append((str(names[0]) if names else "series_0", list(raw)))
    numbers = [[float(v) if v is not None else math.nan for v in values] for _, values in channels]
    return [n for n, _ in channels], numbers, times


def parse_item(record: dict[str, Any], file_stem: str, number: int) -> Item | None:
    """One record as an Item; None for a record of no known subtask or without a usable answer/series."""
    subtask = subtask_of(file_stem, record)
    nested = record.get("multiple_choice_question")
    if isinstance(nested, dict):
        record = {**nested, **{k: v for k, v in record.items() if k not in nested}}
    series = record.get("timeseries", record.get("numerical_time_series"))
    names = record.get("name_of_series")
    names = json.loads(names) if isinstance(names, str) and names.startswith("[") else names
    names = [str(n) for n in list(names)] if isinstance(names, (list, np.ndarray)) else []
    choices = [str(c) for c in list(record.get("choices") if record.get("choices") is not None else [])]
    answer = gold_letter(record.get("answer"))
    if subtask is None or answer is None or not choices or series is None:
        return None
    channel_names, numbers, times = _channels(series, names)
    if not numbers:
        return None
    length = max(len(v) for v in numbers)
    values = np.full((len(numbers), length), np.nan)
    for row, channel in enumerate(numbers):
        values[row, : len(channel)] = channel
    return Item(
        key=f"{subtask}-{number:05d}",
        subtask=subtask,
        question=str(record.get("question") or ""),
        choices=choices,
        answer=answer,
        domain=str(record.get("domain") or ""),
        task=str(record.get("task") or ""),
        channel_names=channel_names,
        values=values,
        times=times,
    )


def read_items(path: Path | UserFolder) -> list[Item]:
    """Every item of the .jsonl files at --path, each file read through the folder's checks and
    budget, one line in memory at a time."""
    folder = user_folder(path, "tsrbench")
    files = folder.walk(lambda p: p.suffix == ".jsonl")
    if not files:
        raise UserError(f"no .jsonl files under {folder.given}; --family tsrbench reads {SOURCE_HINT}")
    items: list[Item] = []
    for file in files:
        for number, record in enumerate(folder.json_lines(file)):
            item = parse_item(record, file.stem, number) if isinstance(record, dict) else None
            if item is not None:
                items.append(item)
    return items


def stratified_split(items: list[Item], fraction: float = 0.2, seed: int = 42) -> tuple[list[Item], list[Item]]:
    """The paper's evaluation split (Table 8): per subtask, a seeded `fraction` (at least one item) to
    test; the rest is train (what the memory bank is built from)."""
    train, test = [], []
    for subtask in SUBTASKS:
        group = sorted((i for i in items if i.subtask == subtask), key=lambda i: i.key)
        if not group:
            continue
        order = np.random.default_rng([seed, *subtask.encode()]).permutation(len(group))
        chosen = set(order[: max(1, int(round(fraction * len(group))))].tolist())
        for position, item in enumerate(group):
            (test if position in chosen else train).append(item)
    return train, test
