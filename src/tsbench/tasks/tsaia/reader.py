"""Reads TSAIA's published files (nothing is downloaded).

Where the public data lives: the Hugging Face dataset `Melady/TSAIA` (github.com/USC-Melady/TSAIA):
`multiple_choice.csv` (150 finance items: question_type, prompt, data_info, options, answer,
executor_variables) and `analysis_questions.csv` (question_id, question_type, prompt, data_str,
constraint, ground_truth_data, executor_variables). The release keeps each item's arrays in pickle
files beside the CSVs; a pickle can run code when loaded, so this reader never opens one: an item's
series are the numeric arrays written inline in its data_info / data_str (as TimeClaw's own reader
falls back to), or a JSON / .npy file its executor_variables or ground_truth_data names. An item with
no usable series (or, for analysis items, no readable ground truth) is skipped and counted.
"""

from __future__ import annotations

import ast
import csv
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tsbench.core.errors import UserError
from tsbench.tasks.user_files import UserFolder, user_folder

SOURCE_HINT = "TSAIA's multiple_choice.csv and analysis_questions.csv from the Hugging Face dataset Melady/TSAIA"
ARRAY = re.compile(r"\[([-+0-9eE.,\s]+)\]")
LETTERS = "ABCDEFGH"
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


@dataclass
class Item:
    key: str
    kind: str  # "mc" | "analysis"
    question_type: str
    prompt: str
    data_text: str
    channel_names: list[str]
    values: np.ndarray  # (channels, L), NaN-padded
    options: list[str] = field(default_factory=list)
    answer: Any = None  # a letter (mc) or the ground truth (analysis)
    constraint: str = ""


def parse_value(text: Any) -> Any:
    """A CSV cell as JSON or a Python literal, else the stripped text."""
    if not isinstance(text, str):
        return text
    stripped = text.strip()
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(stripped)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return stripped


def inline_arrays(text: str, minimum: int = 3) -> list[list[float]]:
    arrays = []
    for match in ARRAY.finditer(text or ""):
        try:
            values = [float(t) for t in match.group(1).split(",") if t.strip()]
        except ValueError:
            continue
        if len(values) >= minimum:
            arrays.append(values)
    return arrays


def _sidecar(folder: UserFolder, name: Any) -> Any:
    """A JSON or .npy file named by a cell (never a pickle); None when there is none. The name must
    be a plain path under --path: one that climbs out is refused, as is a symlink that leads out."""
    if not isinstance(name, str) or not name.strip().endswith((".json", ".npy")):
        return None
    path = folder.named(folder.root, name, "a TSAIA CSV cell")
    if not folder.is_file(path):
        return None
    if path.suffix == ".json":
        return folder.read_json(path)
    return folder.npy(path)


def _channels(folder: UserFolder, row: dict[str, str], text: str) -> tuple[list[str], np.ndarray] | None:
    side = _sidecar(folder, row.get("executor_variables"))
    if isinstance(side, dict):
        pairs = [(str(k), np.asarray(v, dtype=np.float64).ravel()) for k, v in side.items()]
        pairs = [(k, v) for k, v in pairs if v.size]
    elif side is not None:
        matrix = np.atleast_2d(np.asarray(side, dtype=np.float64))
        pairs = [(f"series_{i}", row_values) for i, row_values in enumerate(matrix)]
    else:
        pairs = [(f"series_{i}", np.asarray(v)) for i, v in enumerate(inline_arrays(text))]
    if not pairs:
        return None
    length = max(len(v) for _, v in pairs)
    values = np.full((len(pairs), length), np.nan)
    for index, (_, v) in enumerate(pairs):
        values[index, : len(v)] = v
    return [k for k, _ in pairs], values


def _options(cell: Any) -> list[str]:
    value = parse_value(cell)
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, dict):
        return [f"{k}) {v}" for k, v in value.items()]
    parts = re.split(r"\s*(?=\b[A-H][).:]\s)", str(value or ""))
    return [p.strip() for p in parts if p.strip()]


def letter_of(answer: Any) -> str | None:
    text = str(answer or "").strip().upper()
    return text[0] if text and text[0] in LETTERS else None


def read_items(path: Path | UserFolder) -> tuple[list[Item], int]:
    """(items, skipped) of the TSAIA CSVs at `path` (a folder, or one of the CSV files)."""
    folder = user_folder(path, "tsaia")
    root = folder.root
    files = [f for f in (root / "multiple_choice.csv", root / "analysis_questions.csv") if folder.is_file(f)]
    if not folder.given.is_dir():
        files = [folder.given]
    if not files:
        raise UserError(
            f"no multiple_choice.csv or analysis_questions.csv under {path}; --family tsaia reads {SOURCE_HINT}"
        )
    items, skipped = [], 0
    for file in files:
        kind = "mc" if "multiple" in file.name else "analysis"
        with folder.open_text(file, newline="") as handle:
            for number, row in enumerate(csv.DictReader(handle)):
                item = _item(folder, kind, number, row)
                if item is None:
                    skipped += 1
                else:
                    items.append(item)
    return items, skipped


def _item(folder: UserFolder, kind: str, number: int, row: dict[str, str]) -> Item | None:
    text = row.get("data_info" if kind == "mc" else "data_str") or ""
    found = _channels(folder, row, text)
    if found is None:
        return None
    names, values = found
    qid = (row.get("question_id") or "").strip() or f"{number:05d}"
    common = {
        "key": f"{kind}-{qid}",
        "kind": kind,
        "question_type": (row.get("question_type") or "unknown").strip(),
        "prompt": (row.get("prompt") or "").strip(),
        "data_text": text,
        "channel_names": names,
        "values": values,
    }
    if kind == "mc":
        options, letter = _options(row.get("options")), letter_of(row.get("answer"))
        if not options or letter is None:
            return None
        return Item(**common, options=options, answer=letter)
    truth = _sidecar(folder, row.get("ground_truth_data"))
    truth = parse_value(row.get("ground_truth_data")) if truth is None else truth
    if isinstance(truth, np.ndarray):
        truth = truth.tolist()
    if truth is None or (isinstance(truth, str) and truth.endswith(".pkl")):
        return None
    return Item(**common, answer=truth, constraint=(row.get("constraint") or "").strip())
