"""TSRBench as a TaskFamily (TimeClaw paper §4.2, Tables 2, 7, 8): 15 multiple-choice subtasks in 4
dimensions, scored by accuracy per subtask.

`tsbench generate --family tsrbench --path DIR` reads the published jsonl files (reader.py) and
samples and splits them as TimeClaw's code does (timeclaw_protocol.py): 20 % of each subtask file
(seed 42; 825 of 4,125 items), then half of each to `train.parquet` (the bank is built from it) and
the rest to `test.parquet` (split seed 2026); both files together are TimeClaw's `--mode full` set.
A row's series are the item's channels (its text input: the question and options; its image input:
the plot the image harnesses draw of the same series). The answer is the option letter.

Scoring is the official `evaluate_MCQ` (official.py): a reply it cannot read is left out of the
official accuracy (`official_accuracy`, the column's number) and scores 0 in the row score; both are
in results.json with the number of replies the official accuracy counts.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder
from tsbench.tasks.base import Column, Scored
from tsbench.tasks.recordings.family import RecordingFamily, write_train_test
from tsbench.tasks.recordings.rows import Row
from tsbench.tasks.recordings.sources import refuse_unknown, source_path
from tsbench.tasks.timeclaw_protocol import mc_letter, split_train_test, subsample
from tsbench.tasks.tsrbench import official, reader

OPTIONS = ("path", "seed", "split", "ratio")
RATIO = 0.2  # the paper's 20 % evaluation subset (Table 8)
OFFICIAL_METRIC = "official_accuracy"


def context_text(item: reader.Item) -> str:
    """Abductive items: the events before and after the gap, as the official prompt lays them out."""
    if not item.context:
        return ""
    ctx = item.context
    past = "\n".join(f"- {t}: {e}" for t, e in zip(ctx.get("history_times", []), ctx.get("history_events", [])))
    future = "\n".join(f"- {t}: {e}" for t, e in zip(ctx.get("future_times", []), ctx.get("future_events", [])))
    return (
        "Given a sequence of past events, future events, and corresponding time series data from a game, "
        "determine the most plausible event that occurred in between to link them.\n\n"
        f"Past Events (History):\n{past}\n\n... [A CRITICAL EVENT HAPPENED HERE] ...\n\nFuture Events:\n{future}\n\n"
    )


def question_text(item: reader.Item) -> str:
    listed = "\n".join(f"{letter}) {c}" for letter, c in zip(item.letters, item.choices))
    names = ", ".join(item.channel_names)
    gap = f" (the first {item.history_length} samples are before the gap)" if item.history_length else ""
    return (
        f"{context_text(item)}{item.question.strip()}\n\nThe series ({names}) are in the workspace{gap}.\n"
        f'Options:\n{listed}\nAnswer with the JSON object {{"answer": "<the option letter>"}}.'
    )


def memory_descriptor(item: reader.Item) -> str:
    """Appendix C's c_tau for TSRBench: subtask, domain, task name, channel names and question."""
    fields = [item.group, item.domain, item.task, ", ".join(item.channel_names), item.question]
    return "\n".join(f for f in fields if f)


def _seconds(times: list[str]) -> list[float] | None:
    try:
        with warnings.catch_warnings():  # "could not infer format": each stamp is parsed alone
            warnings.simplefilter("ignore", UserWarning)
            return [t.value / 1e9 for t in pd.to_datetime(times)]
    except (ValueError, TypeError, OverflowError):
        return None


def to_row(item: reader.Item, split: str, seed: int) -> Row:
    meta = {"subtask": item.subtask, "dimension": item.dimension, "domain": item.domain}
    meta["memory_descriptor"] = memory_descriptor(item)
    if item.context:
        meta["context"] = item.context
    if item.times and len(item.times) == item.values.shape[1]:
        meta["timestamps"] = item.times
        seconds = _seconds(item.times)
        if seconds is not None:
            meta["time_s"] = seconds
    gold = {"answer": item.answer, "label": item.label, "choices": item.choices, "letters": item.letters}
    gold["timeclaw_options"] = item.timeclaw_options  # what TimeClaw's parser allows
    return Row(
        id=item.key,
        split=split,
        category=item.subtask,
        regime=item.dimension,
        channel_names=item.channel_names,
        question=question_text(item),
        options=item.letters,
        gold=gold,
        seed=seed,
        values=item.values.astype(np.float32),
        meta=meta,
        source={"domain": item.domain, "task": item.task, "dimension": item.dimension, "file_subtask": item.group},
    )


def score_reply(gold: dict, message: str) -> Scored:
    """The official score (None: the official caller skips the reply) beside TimeClaw's own parse."""
    correct = official.evaluate_mcq(gold["label"], official.strip_fences(message or ""))
    timeclaw = mc_letter(message or "", int(gold.get("timeclaw_options", 5)))
    metrics = {
        OFFICIAL_METRIC: correct,
        "timeclaw_accuracy": float(timeclaw is not None and timeclaw == gold["answer"]),
    }
    if correct is None:
        return Scored(0.0, False, None, "the official evaluate_MCQ cannot read the reply", metrics)
    return Scored(correct, True, {"answer": _answer_text(message)}, None, metrics)


def _answer_text(message: str) -> str:
    value = official.python_literal(official.strip_fences(message))
    return str(value["answer"])


class TSRBench(RecordingFamily):
    name = "tsrbench"
    dataset = "TSRBench (umd-zhou-lab, 15 temporal reasoning subtasks in 4 dimensions)"
    default_root_dir = "data/tsrbench"

    def score(self, category: str, gold: Any, message: str) -> Scored:
        return score_reply(gold, message)

    def columns(self) -> list[Column]:
        return [
            Column(s, s.replace("_", " ").title()[:14], "acc", dimension.title(), mean_metric=OFFICIAL_METRIC)
            for dimension, group in reader.DIMENSIONS.items()
            for s in group
        ]

    def sft_target(self, category: str, gold: Any) -> str:
        return json.dumps({"answer": gold["answer"]})

    def generate(self, options: dict, out: Path, progress=None) -> tuple[Path, list[dict]]:
        """`options`: path (required), seed (the subsample seed, 42 as TimeClaw), ratio (0.2), split
        (train | test; default both)."""
        refuse_unknown(options, OPTIONS, self.name)
        path = source_path(options, self.name, reader.SOURCE_HINT)
        folder = UserFolder(path, self.name)
        items, skipped = reader.read_items(folder)
        if not items:
            raise UserError(f"no TSRBench item under {path} ({sum(skipped.values())} records unusable)")
        seed, ratio = int(options.get("seed", 42)), float(options.get("ratio", RATIO))
        sample = subsample(items, lambda i: i.group, ratio, seed)
        train, test = split_train_test(sample, lambda i: i.group)
        config = {
            "path": str(path),
            "ratio": ratio,
            "subsample_seed": seed,
            "grouped_by": "subtask file (TimeClaw)",
            "records": len(items) + sum(skipped.values()),
            "skipped_records": skipped,
        }
        # the folder lists every subtask file read
        return write_train_test(
            self, train, test, to_row, out, options=options, folder=folder, config=config, progress=progress
        )
