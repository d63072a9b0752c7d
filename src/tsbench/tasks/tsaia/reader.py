"""Reads TSAIA as `tsbench convert-tsaia` wrote it (nothing is downloaded, no pickle is opened here).

The release (Hugging Face `Melady/TSAIA`, github.com/USC-Melady/TSAIA) has `multiple_choice.csv` (150
finance items: question_id, question_type, prompt, data_info, options, answer, answer_info,
executor_variables) and `analysis_questions.csv` (question_id, question_type, prompt, data_str,
executor_variables, ground_truth_data, context, constraint, ...), whose file columns name pickles.
The converter loads those in the jail and writes the same tables as parquet, the file columns as
tagged JSON (encode.py); this reader decodes them (tagged.py). An item's series are its executor
variables' frames and arrays (a frame's columns, an array's columns), its other variables (weights,
a budget) are facts in the row's meta. An item whose files could not be converted is skipped and
counted.
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder, user_folder
from tsbench.tasks.tsaia.tagged import TagError, decode

SOURCE_HINT = "the Melady/TSAIA release converted by `tsbench convert-tsaia --path RELEASE --out DIR`"
CONVERTED = "tsaia-tagged-json-1"
TABLES = ("multiple_choice", "analysis_questions")
FILE_COLUMNS = {
    "multiple_choice": ("answer_info", "executor_variables"),
    "analysis_questions": ("executor_variables", "ground_truth_data", "context", "constraint"),
}
LETTERS = "ABCDEFGH"
MAX_CHANNELS = 512
MIN_SERIES = 8  # samples a numeric variable needs to be a series


@dataclass
class Item:
    key: str
    kind: str  # "mc" | "analysis"
    question_type: str
    prompt: str
    data_text: str
    channel_names: list[str]
    values: np.ndarray  # (channels, L), NaN-padded
    variables: dict[str, Any] = field(default_factory=dict)  # executor variables that are not series
    options: list[str] = field(default_factory=list)
    answer: str | None = None  # the letter (mc)
    truth: Any = None  # tagged JSON of the ground truth (analysis)
    context: Any = None  # tagged JSON
    constraint: Any = None  # tagged JSON
    output_requirement: str = ""


def read_tables(path: Path | UserFolder) -> dict[str, pd.DataFrame]:
    """The converted tables at `path` (the converter's folder). The one place this reader opens files:
    each through the --path folder's checks (user_files), each table once its footer and expanded
    text fit the input budget (a tagged-JSON cell can stand for a large array)."""
    files = user_folder(path, "tsaia")
    folder = files.root
    manifest = folder / "conversion.json"
    if not files.is_file(manifest):
        raw = any(files.is_file(folder / f"{name}.csv") for name in TABLES)
        hint = f"convert the release first: tsbench convert-tsaia --path {folder} --out DIR" if raw else SOURCE_HINT
        raise UserError(f"no converted TSAIA tables under {folder}; --family tsaia reads {hint}")
    try:
        made_by = files.read_json(manifest)
    except UserError:
        made_by = None
    if not isinstance(made_by, dict) or made_by.get("converted") != CONVERTED:
        raise UserError(f"{manifest} is not from this version's tsbench convert-tsaia: convert again")
    tables = {}
    for name in TABLES:
        table = folder / f"{name}.parquet"
        if files.is_file(table):
            try:
                tables[name] = files.parquet(table).to_pandas()
            except (OSError, ValueError) as exc:  # pyarrow's errors are OSError / ArrowInvalid (a ValueError)
                raise UserError(f"{folder}: the converted TSAIA tables cannot be read ({str(exc)[:120]})") from None
    if not tables:
        raise UserError(f"no converted TSAIA table in {folder}")
    return tables


def _cell(row: dict, column: str) -> str:
    value = row.get(column)
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _tagged(row: dict, column: str) -> Any:
    text = _cell(row, column)
    if not text:
        return None
    try:
        value = json.loads(text)
        decode(value)
        return value
    except (ValueError, TagError, RecursionError) as exc:
        raise UserError(f"question {_cell(row, 'question_id')}: its {column} is not tagged JSON ({exc})") from None


def options_of(cell: str) -> list[str]:
    """The option list as the CSV writes it (a Python or JSON list), else the text split at 'Option X:'."""
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(cell)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, list):
            return [str(v) for v in value]
    return [p.strip() for p in cell.split("Option ")[1:] if p.strip()] if "Option " in cell else []


def _series(name: str, value: Any) -> list[tuple[str, np.ndarray]] | None:
    """A variable's channels, or None when it is not a series (a weight vector, a number)."""
    if isinstance(value, pd.DataFrame):
        return [(f"{name}.{c}", pd.to_numeric(value[c], errors="coerce").to_numpy(float)) for c in value.columns]
    if isinstance(value, pd.Series):
        return [(name, pd.to_numeric(value, errors="coerce").to_numpy(float))]
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf" or not 1 <= value.ndim <= 3:
        return None
    array = value.astype(float)
    if array.shape[1 if array.ndim == 3 else 0] <= MIN_SERIES:
        return None  # a handful of numbers (portfolio weights): a fact, not a series
    if array.ndim == 1:
        return [(name, array)]
    if array.ndim == 2:  # (time, variables)
        return [(f"{name}.{j}", array[:, j]) for j in range(array.shape[1])]
    return [(f"{name}.{i}.{j}", array[i, :, j]) for i in range(array.shape[0]) for j in range(array.shape[2])]


def _fact(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist() if value.dtype.kind in "biufU" else None
    if isinstance(value, (pd.Timestamp,)):
        return value.isoformat()
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value if not (isinstance(value, float) and not math.isfinite(value)) else None
    if isinstance(value, (list, tuple)):
        return [_fact(v) for v in value]
    return None


def _variables(tagged: Any) -> tuple[list[str], np.ndarray, dict[str, Any]]:
    decoded = decode(tagged) if tagged is not None else {}
    channels: list[tuple[str, np.ndarray]] = []
    facts: dict[str, Any] = {}
    for name, value in decoded.items() if isinstance(decoded, dict) else []:
        found = _series(str(name), value)
        if found is None:
            facts[str(name)] = _fact(value)
        else:
            channels += found
    channels = channels[:MAX_CHANNELS]
    length = max((len(v) for _, v in channels), default=0)
    values = np.full((len(channels), length), np.nan)
    for index, (_, v) in enumerate(channels):
        values[index, : len(v)] = v
    return [n for n, _ in channels], values, facts


def read_items(path: Path | UserFolder) -> tuple[list[Item], dict[str, int]]:
    """(items in file order, {why: count} of the items that are skipped)."""
    items, skipped = [], {}
    for name, table in read_tables(path).items():
        kind = "mc" if name == "multiple_choice" else "analysis"
        for number, row in enumerate(table.to_dict("records")):
            item, why = _item(kind, number, row)
            if item is None:
                skipped[f"{name}: {why}"] = skipped.get(f"{name}: {why}", 0) + 1
            else:
                items.append(item)
    return items, skipped


def _item(kind: str, number: int, row: dict) -> tuple[Item | None, str | None]:
    if _cell(row, "conversion_error"):
        return None, "a file could not be converted"
    names, values, facts = _variables(_tagged(row, "executor_variables"))
    qid = _cell(row, "question_id").strip() or f"{number:05d}"
    common = {
        "key": f"{kind}-{qid}",
        "kind": kind,
        "question_type": _cell(row, "question_type").strip() or "unknown",
        "prompt": _cell(row, "prompt").strip(),
        "data_text": _cell(row, "data_info" if kind == "mc" else "data_str"),
        "channel_names": names,
        "values": values,
        "variables": facts,
        "output_requirement": _cell(row, "output_requirement"),
    }
    if not names:
        return None, "no series among its executor variables"
    if kind == "mc":
        options, letter = options_of(_cell(row, "options")), _cell(row, "answer").strip()
        if not options or letter not in LETTERS[: len(options)] or not letter:
            return None, "no options or no answer letter"
        return Item(**common, options=options, answer=letter), None
    truth = _tagged(row, "ground_truth_data")
    if truth is None:
        return None, "no ground truth"
    return Item(**common, truth=truth, context=_tagged(row, "context"), constraint=_tagged(row, "constraint")), None
