"""Reads TSRBench's published files (nothing is downloaded).

Where the public data lives: the Hugging Face dataset `umd-zhou-lab/TSRBench`
(github.com/tianyi-lab/TSRBench): `{perception,prediction,decision,reasoning}/[<subtask>/]<subtask>.jsonl`,
one multiple-choice item per line with question, choices (a list, or a dict keyed by letter), answer
(the label), domain, task, category, name_of_series and timeseries (a list of numbers, a list of
channels, possibly one of timestamp strings). Abductive items nest question, choices and answer under
multiple_choice_question, carry the events around the gap under context (history/future events and
times) and the series under numerical_time_series as {feature: {history: [...], future: [...]}}.

A file is named by its subtask, under the names the release uses now or those of the official
evaluator (math_reasoning, event_forecast, pattern_decision). Perception's one file holds four
subtasks, told apart by each item's `category` exactly as the official evaluator does (its "Anolmaly
Detection" is anomaly detection); a perception item of another category counts in no perception
subtask there, and lands in `perception_uncategorised` here. Files are read through the --path
folder's checks and budget (core/user_files.py), one line at a time; a line that is not JSON, or
nests too deeply to parse, stops the read with its file and line number.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder, user_folder

SOURCE_HINT = (
    "TSRBench's jsonl files ({perception,prediction,decision,reasoning}/*.jsonl) from the Hugging Face "
    "dataset umd-zhou-lab/TSRBench"
)
UNCATEGORISED = "perception_uncategorised"
DIMENSIONS = {
    "perception": (
        "pattern_recognition",
        "noise_understanding",
        "anomaly_detection",
        "similarity_analysis",
        UNCATEGORISED,
    ),
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
# The official evaluator's perception categories, spelled as it compares them.
CATEGORIES = {
    "Pattern Recognition": "pattern_recognition",
    "Noise Understanding": "noise_understanding",
    "Anolmaly Detection": "anomaly_detection",
    "Similarity Analysis": "similarity_analysis",
}
# A file's stem -> the subtask file it is (TimeClaw's names; the evaluator's names as aliases).
FILE_SUBTASKS = {s: s for s in SUBTASKS if DIMENSION_OF[s] != "perception"} | {
    "perception": "perception",
    "math_reasoning": "numerical_reasoning",
    "event_forecast": "event_prediction",
    "pattern_decision": "qualitative_decision",
}
LETTERS = "ABCDEFG"  # text_inference.py labels list choices A..G
_CONTEXT_KEYS = ("history_events", "history_times", "future_events", "future_times")


@dataclass
class Item:
    """One TSRBench item, as published."""

    key: str
    group: str  # the file's subtask (perception is one), what TimeClaw samples and splits by
    subtask: str
    question: str
    choices: list[str]
    letters: list[str]  # each choice's letter: A, B, ... for a list, the keys of a dict
    label: Any  # the answer as published, what the official evaluator compares with
    domain: str
    task: str
    channel_names: list[str]
    values: np.ndarray  # (channels, L), NaN-padded where channels differ in length
    times: list[str]
    listed: bool = True  # the choices were a list (a dict's keys are its letters)
    context: dict[str, list] = field(default_factory=dict)  # abductive: history/future events and times
    history_length: int | None = None  # abductive: samples before the gap
    timeclaw_options: int = 5  # how many letters TimeClaw's parser allows (timeclaw_option_count)

    @property
    def dimension(self) -> str:
        return DIMENSION_OF[self.subtask]

    @property
    def answer(self) -> str | None:
        """The gold letter (the label's first letter, as TimeClaw reads it)."""
        text = str(self.label if self.label is not None else "").strip().upper()
        return next((c for c in text if c.isalpha()), None)


def _choices(raw: Any) -> tuple[list[str], list[str]] | None:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return None
    if isinstance(raw, dict):  # text_inference.py lists a dict's values under its keys, keys sorted
        keys = sorted(raw, key=str)
        return [str(raw[k]) for k in keys], [str(k) for k in keys]
    if isinstance(raw, list) and 0 < len(raw) <= len(LETTERS):
        return [str(c) for c in raw], list(LETTERS[: len(raw)])
    return None


def _option_count(raw: Any) -> int:
    """TimeClaw's count of a `choices` value (evaluation/tsrbench.py): a JSON string decoded first; a
    list counts its items, anything else (a dict, a number, text that is no JSON, a missing value) 5."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            raw = None
    return len(raw) if isinstance(raw, list) else 5


def timeclaw_option_count(record: dict[str, Any], group: str, column_in_file: bool) -> int:
    """The option count TimeClaw gives a record: its top-level `choices`; abductive records without one
    take their `multiple_choice_question`'s (`setdefault`), unless another record of the file has a
    top-level `choices` (pandas then fills this one's with NaN, which counts 5)."""
    if "choices" in record:
        return _option_count(record["choices"])
    nested = record.get("multiple_choice_question")
    if group == "abductive_reasoning" and not column_in_file and isinstance(nested, dict):
        return _option_count(nested.get("choices"))
    return 5


def _numbers(values: Any) -> list[float]:
    return [math.nan if v is None else float(v) for v in values]


def _channels(raw: Any, names: list[str]) -> tuple[list[str], list[list[float]], list[str], int | None]:
    """(names, values, timestamps, history length) of a record's series."""
    if isinstance(raw, dict):  # abductive: each feature's history then its future, as the prompt joins them
        names_out, channels, history = [], [], None
        for feature, parts in raw.items():
            if isinstance(parts, dict):
                before, after = list(parts.get("history") or []), list(parts.get("future") or [])
                history = len(before) if history is None else history
                names_out.append(str(feature))
                channels.append(_numbers(before + after))
            elif isinstance(parts, list):
                names_out.append(str(feature))
                channels.append(_numbers(parts))
        return names_out, channels, [], history
    if isinstance(raw, list) and raw and all(isinstance(c, list) for c in raw):
        out_names, channels, times = [], [], []
        for channel in raw:
            if channel and isinstance(channel[0], str):
                times = [str(t) for t in channel]
                continue
            out_names.append(names[len(channels)] if len(channels) < len(names) else f"series_{len(channels)}")
            channels.append(_numbers(channel))
        return out_names, channels, times, None
    if isinstance(raw, list) and raw:
        return [names[0] if names else "series_0"], [_numbers(raw)], [], None
    return [], [], [], None


def subtask_of(group: str, record: dict[str, Any]) -> str:
    if group != "perception":
        return group
    return CATEGORIES.get(record.get("category"), UNCATEGORISED)


def parse_item(record: Any, group: str, number: int) -> tuple[Item | None, str | None]:
    """(item, None), or (None, why the record cannot be an item)."""
    if not isinstance(record, dict):
        return None, "not a JSON object"
    original = record
    nested = record.get("multiple_choice_question")
    if isinstance(nested, dict):
        record = {**record, **{k: nested[k] for k in ("question", "choices", "answer") if k in nested}}
    found = _choices(record.get("choices"))
    if found is None:
        return None, "no choices"
    label = record.get("answer")
    if label is None or (isinstance(label, str) and not label.strip()):
        return None, "no answer"
    series = record.get("timeseries", record.get("numerical_time_series"))
    names = record.get("name_of_series")
    if isinstance(names, str) and names.startswith("["):
        try:
            names = json.loads(names)
        except (ValueError, RecursionError):
            names = None
    names = [str(n) for n in names] if isinstance(names, list) else []
    try:
        channel_names, numbers, times, history = _channels(series, names)
    except (TypeError, ValueError):
        return None, "a series value is not a number"
    if not numbers or not any(numbers):
        return None, "no series"
    length = max(len(v) for v in numbers)
    values = np.full((len(numbers), length), np.nan)
    for row, channel in enumerate(numbers):
        values[row, : len(channel)] = channel
    context = record.get("context") if isinstance(record.get("context"), dict) else {}
    context = {k: [str(v) for v in context.get(k) or []] for k in _CONTEXT_KEYS if isinstance(context.get(k), list)}
    if context and not times:
        times = context.get("history_times", []) + context.get("future_times", [])
    subtask = subtask_of(group, record)
    choices, letters = found
    item = Item(
        key=f"{subtask}-{number:05d}",
        group=group,
        subtask=subtask,
        question=str(record.get("question") or ""),
        choices=choices,
        letters=letters,
        label=label,
        domain=str(record.get("domain") or ""),
        task=str(record.get("task") or ""),
        channel_names=channel_names,
        values=values,
        times=times,
        listed=isinstance(record.get("choices"), list),
        timeclaw_options=timeclaw_option_count(original, group, column_in_file=False),
        context=context,
        history_length=history,
    )
    return item, None


def subtask_files(path: Path | UserFolder) -> dict[str, Path]:
    """{file subtask: file} of the jsonl files at `path` (each under --path, by the folder's checks);
    one line for a file of no known subtask or two files of the same subtask."""
    folder = user_folder(path, "tsrbench")
    files = folder.walk(lambda p: p.suffix == ".jsonl")
    if not files:
        raise UserError(f"no .jsonl files under {folder.given}; --family tsrbench reads {SOURCE_HINT}")
    found: dict[str, Path] = {}
    for file in files:
        group = FILE_SUBTASKS.get(re.sub(r"[^a-z0-9]+", "_", file.stem.lower()).strip("_"))
        if group is None:
            known = ", ".join(sorted(FILE_SUBTASKS))
            raise UserError(f"{folder.label(file)}: not a TSRBench subtask file (the file names are: {known})")
        if group in found:
            raise UserError(
                f"{folder.label(found[group])} and {folder.label(file)} both hold {group}: keep one of them under --path"
            )
        found[group] = file
    return found


def read_items(path: Path | UserFolder) -> tuple[list[Item], dict[str, int]]:
    """(items in file order, {why: count} of the records that are not items). Each file is read
    through the folder's checks and budget, one line in memory at a time; a line that is not JSON
    (or nests too deeply to parse) is one line naming the file and line."""
    folder = user_folder(path, "tsrbench")
    items: list[Item] = []
    skipped: dict[str, int] = {}
    for group, file in sorted(subtask_files(folder).items()):
        column, untold = False, []  # items whose record has no top-level `choices`
        for number, record in enumerate(folder.json_lines(file)):
            column = column or (isinstance(record, dict) and "choices" in record)
            item, why = parse_item(record, group, number)
            if item is None:
                skipped[f"{file.name}: {why}"] = skipped.get(f"{file.name}: {why}", 0) + 1
                continue
            items.append(item)
            if "choices" not in record:
                untold.append(item)
        for item in untold if column else ():  # TimeClaw's pandas frame has the column: NaN here
            item.timeclaw_options = 5
    return items, skipped
