"""TSAIA as a TaskFamily (TimeClaw paper §4.3, Fig. 4, Table 9): financial time-series analysis,
multiple-choice items (accuracy) and analysis items (checkers.py).

`tsbench generate --family tsaia --path DIR` reads the published CSVs (reader.py) and writes
`train.parquet` and `test.parquet`, half of each question type to train (at least one; split seed
2026, the paper's Table 11 defaults shared with CiK). A row's category is its question type, its
series the item's arrays; an MC row's options are its option texts and the answer is the letter.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tsbench.core.errors import UserError
from tsbench.tasks.base import Column, Scored
from tsbench.tasks.recordings.family import RecordingFamily, write_train_test
from tsbench.tasks.recordings.rows import Row
from tsbench.tasks.recordings.sources import refuse_unknown
from tsbench.tasks.tsaia import reader
from tsbench.tasks.tsaia.checkers import check_analysis, check_choice
from tsbench.tasks.user_files import UserFolder

OPTIONS = ("path", "seed", "split")
MC_TYPES = ("VaR-confidence_level", "SharpeRatio", "MarketAB-alpha", "MarketAB-beta")  # Table 9


def question_text(item: reader.Item) -> str:
    names = ", ".join(item.channel_names)
    head = f"{item.prompt}\n\n{item.data_text.strip()}\n\nThe series ({names}) are in the workspace."
    if item.kind == "mc":
        listed = "\n".join(f"{reader.LETTERS[i]}) {o}" for i, o in enumerate(item.options))
        return f'{head}\nOptions:\n{listed}\nAnswer with the JSON object {{"answer": "<the option letter>"}}.'
    constraint = f"\nConstraint: {item.constraint}" if item.constraint else ""
    return f'{head}{constraint}\nAnswer with the JSON object {{"answer": <your result>}}.'


def memory_descriptor(item: reader.Item) -> str:
    """Appendix C's c_tau for TSAIA: question type, prompt, the data description, then the output
    constraint (analysis) or the option list (MC)."""
    last = " ".join(item.options) if item.kind == "mc" else item.constraint
    return "\n".join(f for f in (item.question_type, item.prompt, item.data_text.strip(), last) if f)


def to_row(item: reader.Item, split: str, seed: int) -> Row:
    gold = (
        {"answer": item.answer, "kind": "mc", "n_options": len(item.options)}
        if item.kind == "mc"
        else {"answer": "analysis", "kind": "analysis", "truth": item.answer}
    )
    return Row(
        id=item.key,
        split=split,
        category=item.question_type,
        regime=item.kind,
        channel_names=item.channel_names,
        question=question_text(item),
        options=list(reader.LETTERS[: len(item.options)]),
        gold=gold,
        seed=seed,
        values=item.values.astype(np.float32),  # NaN pads channels shorter than the longest
        meta={"question_type": item.question_type, "memory_descriptor": memory_descriptor(item)},
        source={"kind": item.kind},
    )


def split_items(items: list[reader.Item], ratio: float = 0.5, seed: int = 2026):
    train, test = [], []
    for question_type in sorted({i.question_type for i in items}):
        group = sorted((i for i in items if i.question_type == question_type), key=lambda i: i.key)
        order = np.random.default_rng([seed, *question_type.encode()]).permutation(len(group))
        n_train = min(max(1, int(round(ratio * len(group)))), max(1, len(group) - 1))
        chosen = set(order[:n_train].tolist()) if len(group) > 1 else set()
        for position, item in enumerate(group):
            (train if position in chosen else test).append(item)
    return train, test


class TSAIA(RecordingFamily):
    name = "tsaia"
    dataset = "TSAIA (Melady, financial time-series analysis)"
    default_root_dir = "data/tsaia"

    def score(self, category: str, gold: Any, message: str) -> Scored:
        if gold["kind"] == "mc":
            return check_choice(gold["answer"], int(gold["n_options"]), message)
        return check_analysis(gold["truth"], message)

    def columns(self) -> list[Column]:
        return [Column(t, t, "acc", "TSAIA MC") for t in MC_TYPES]

    def sft_target(self, category: str, gold: Any) -> str:
        return json.dumps({"answer": gold["answer"] if gold["kind"] == "mc" else gold["truth"]})

    def generate(self, options: dict, out: Path, progress=None) -> tuple[Path, list[dict]]:
        """`options`: path (required), seed, split (train | test; default both)."""
        refuse_unknown(options, OPTIONS, self.name)
        raw = options.get("path")
        if not raw or not Path(raw).expanduser().exists():
            raise UserError(f"--family tsaia needs --path DIR (an existing folder): {reader.SOURCE_HINT}")
        path = Path(raw).expanduser()
        folder = UserFolder(path, self.name)
        items, skipped = reader.read_items(folder)
        if not items:
            raise UserError(f"no TSAIA item with a readable series under {path} ({skipped} skipped)")
        seed = int(options.get("seed", 42))
        train, test = split_items(items)
        return write_train_test(
            self.name,
            self.dataset,
            {"train": train, "test": test},
            to_row,
            out,
            seed=seed,
            wanted=options.get("split"),
            config={"path": str(path), "train_ratio": 0.5, "split_seed": 2026, "skipped_items": skipped},
            sources=folder.hashes(),  # the CSVs and every sidecar file an item named
            progress=progress,
        )
