"""TSRBench as a TaskFamily (TimeClaw paper §4.2, Tables 2, 7, 8): 15 multiple-choice subtasks in 4
dimensions, scored by accuracy per subtask.

`tsbench generate --family tsrbench --path DIR` reads the published jsonl files (reader.py) and
writes `test.parquet`, the paper's stratified 20 % split (per subtask, seeded), and `train.parquet`,
the rest (the bank is built from it). A row's series are the item's channels (its text input: the
question and options; its image input: the plot the image harnesses draw of the same series, e.g.
`--harness tools-image` or `single-pass-image`). The answer is the option letter.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tsbench.core.answers import extract_choice
from tsbench.core.errors import UserError
from tsbench.tasks.base import Column, Scored
from tsbench.tasks.recordings.family import RecordingFamily, write_train_test
from tsbench.tasks.recordings.rows import Row
from tsbench.tasks.recordings.sources import refuse_unknown
from tsbench.tasks.tsrbench import reader
from tsbench.tasks.user_files import UserFolder

OPTIONS = ("path", "seed", "split")


def question_text(item: reader.Item) -> str:
    listed = "\n".join(f"{reader.LETTERS[i]}) {c}" for i, c in enumerate(item.choices))
    names = ", ".join(item.channel_names)
    return (
        f"{item.question.strip()}\n\nThe series ({names}) are in the workspace.\nOptions:\n{listed}\n"
        'Answer with the JSON object {"answer": "<the option letter>"}.'
    )


def memory_descriptor(item: reader.Item) -> str:
    """Appendix C's c_tau for TSRBench: subtask, domain, task name, channel names and question."""
    fields = [item.subtask, item.domain, item.task, ", ".join(item.channel_names), item.question]
    return "\n".join(f for f in fields if f)


def _seconds(times: list[str]) -> list[float] | None:
    try:
        return [t.value / 1e9 for t in pd.to_datetime(times)]
    except (ValueError, TypeError):
        return None


def to_row(item: reader.Item, split: str, seed: int) -> Row:
    letters = list(reader.LETTERS[: len(item.choices)])
    meta = {"subtask": item.subtask, "dimension": item.dimension, "domain": item.domain}
    meta["memory_descriptor"] = memory_descriptor(item)
    if item.times and len(item.times) == item.values.shape[1]:
        meta["timestamps"] = item.times
        seconds = _seconds(item.times)
        if seconds is not None:
            meta["time_s"] = seconds
    return Row(
        id=item.key,
        split=split,
        category=item.subtask,
        regime=item.dimension,
        channel_names=item.channel_names,
        question=question_text(item),
        options=letters,
        gold={"answer": item.answer, "choices": item.choices},
        seed=seed,
        values=item.values.astype(np.float32),
        meta=meta,
        source={"domain": item.domain, "task": item.task, "dimension": item.dimension},
    )


def chosen_letter(message: str, n_choices: int) -> str | None:
    text = extract_choice(message).strip().upper()
    letter = text[:1]
    if letter and letter in reader.LETTERS[:n_choices] and (len(text) == 1 or not text[1].isalpha()):
        return letter
    return None


class TSRBench(RecordingFamily):
    name = "tsrbench"
    dataset = "TSRBench (umd-zhou-lab, 15 temporal reasoning subtasks in 4 dimensions)"
    default_root_dir = "data/tsrbench"

    def score(self, category: str, gold: Any, message: str) -> Scored:
        letter = chosen_letter(message, len(gold["choices"]))
        if letter is None:
            return Scored(0.0, False, None, "no option letter", {"correct": 0.0})
        correct = float(letter == gold["answer"])
        return Scored(correct, True, {"answer": letter}, None, {"correct": correct})

    def columns(self) -> list[Column]:
        return [
            Column(s, s.replace("_", " ").title()[:14], "acc", dimension.title())
            for dimension, group in reader.DIMENSIONS.items()
            for s in group
        ]

    def sft_target(self, category: str, gold: Any) -> str:
        return json.dumps({"answer": gold["answer"]})

    def generate(self, options: dict, out: Path, progress=None) -> tuple[Path, list[dict]]:
        """`options`: path (required), seed (the split's seed), split (train | test; default both)."""
        refuse_unknown(options, OPTIONS, self.name)
        raw = options.get("path")
        if not raw or not Path(raw).expanduser().exists():
            raise UserError(f"--family tsrbench needs --path DIR (an existing folder): {reader.SOURCE_HINT}")
        path = Path(raw).expanduser()
        folder = UserFolder(path, self.name)
        items = reader.read_items(folder)
        if not items:
            raise UserError(f"no TSRBench item of a known subtask under {path}")
        seed = int(options.get("seed", 42))
        train, test = reader.stratified_split(items, seed=seed)
        return write_train_test(
            self.name,
            self.dataset,
            {"train": train, "test": test},
            to_row,
            out,
            seed=seed,
            wanted=options.get("split"),
            config={"path": str(path), "test_fraction": 0.2, "stratified_by": "subtask"},
            sources=folder.hashes(),
            progress=progress,
        )
