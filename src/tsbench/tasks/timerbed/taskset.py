"""TimerBed as a TaskFamily (TimeMaster Table 1 and Appendix E): one row per series, the task's
classes as options, scored 1 for the gold class (accuracy) and reported with macro-F1.

Input under --path DIR: UCR/UEA `.ts` files, `<Task>_TEST.ts` (split test) and `<Task>_TRAIN.ts`
(split train), anywhere below DIR, read with aeon's `load_from_ts_file` (a maintained loader of
the format, equal and unequal lengths, uni- and multivariate). A task is named by its file stem;
the six TimerBed tasks (RCW, TEE, ECG, EMG, CTU, HAR) get their domain description, any other
`.ts` dataset (e.g. aeon's GunPoint) is a category of its own. Optional `labels.json` beside the
files (or in DIR) renames raw class values: {"<Task>": {"<raw>": "<name>"}} or {"<raw>": "<name>"}.
Values are kept raw (TimeMaster plots raw values); trailing padding NaNs are cut, others set to 0.
An answer is the class in `<class>...</class>` (TimeMaster's format) if present, else the MCQ rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tsbench.core.answers import extract_choice, trim_answer
from tsbench.core.errors import UserError
from tsbench.core.text import strip_reasoning
from tsbench.tasks.base import Column, Scored
from tsbench.tasks.recordings.family import RecordingFamily, write_split
from tsbench.tasks.recordings.rows import Row
from tsbench.tasks.recordings.sources import file_hashes, nothing_found, refuse_unknown, require, source_path, stable_id

REGIME = "coarse"
SPLIT_SUFFIX = {"test": "_TEST", "train": "_TRAIN"}
CLASS_TAG = re.compile(r"<class>(.*?)</class>", re.IGNORECASE | re.DOTALL)

# TimeMaster Appendix E: what each task's series is, its channels, its reasoning type.
TASKS = {
    "rcw": (
        "underwater acoustic recording; classify whether a North Atlantic right whale up-call is present",
        ("audio",),
        "Simple Deterministic",
    ),
    "tee": (
        "FORTE satellite power-density recording of a transient electromagnetic event; classify the type of "
        "lightning-related discharge",
        ("power_density",),
        "Simple Deterministic",
    ),
    "ecg": ("single-lead ECG recording; classify the cardiac rhythm", ("ECG",), "Complex Deterministic"),
    "emg": (
        "electromyogram recording; classify the subject as healthy, myopathy or neuropathy",
        ("EMG",),
        "Complex Deterministic",
    ),
    "ctu": (
        "24-hour electricity consumption trace of a computer; classify whether it is a desktop or a laptop",
        ("electricity",),
        "Probabilistic",
    ),
    "har": (
        "tri-axial smartphone accelerometer recording; classify the physical activity",
        ("body_acc_x", "body_acc_y", "body_acc_z"),
        "Probabilistic",
    ),
}
SHORT = {"rcw": "RCW", "tee": "TEE", "ecg": "ECG", "emg": "EMG", "ctu": "CTU", "har": "HAR"}
COLUMNS = tuple(Column(task, SHORT[task], "acc", group, ()) for task, (_, _, group) in TASKS.items())


def chosen_class(message: Any) -> str:
    if not isinstance(message, str):
        return ""
    tags = CLASS_TAG.findall(strip_reasoning(message))
    return trim_answer(tags[-1]) if tags else extract_choice(message)


def _labels(folder: Path, root: Path, task: str) -> dict[str, str]:
    for place in (folder / "labels.json", root / "labels.json"):
        if place.is_file():
            try:
                data = json.loads(place.read_text())
            except json.JSONDecodeError:
                raise UserError(f"{place} is not valid JSON") from None
            mapping = data.get(task, data) if isinstance(data, dict) else {}
            if all(isinstance(v, str) for v in mapping.values()):
                return {str(k): v for k, v in mapping.items()}
    return {}


def _trimmed(series: np.ndarray) -> np.ndarray:
    series = np.asarray(series, dtype=np.float64)
    if series.ndim == 1:
        series = series[None, :]
    finite = np.isfinite(series).any(axis=0)
    last = len(finite) - int(np.argmax(finite[::-1])) if finite.any() else 0
    return np.nan_to_num(series[:, :last], nan=0.0, posinf=0.0, neginf=0.0)


def question_text(task: str, names: list[str], length: int, classes: list[str]) -> str:
    described = TASKS.get(task.lower())
    what = described[0] if described else f"time series from the {task} dataset; classify it"
    listed = "\n".join(f"- {c}" for c in classes)
    return (
        f"This is a {what}. It has {len(names)} channel(s) ({', '.join(names)}) of {length} samples.\n"
        f"Classes:\n{listed}\n"
        f'Answer with the JSON object {{"answer": "<one class, exactly as written>"}}.'
    )


class TimerBed(RecordingFamily):
    name = "timerbed"
    dataset = "TimerBed (six real classification tasks)"
    default_root_dir = "data/timerbed"
    OPTIONS = ("path", "seed", "split", "rows_per_cell", "categories")

    def score(self, category: str, gold: Any, message: str) -> Scored:
        chosen = chosen_class(message)
        on_list = chosen in gold["options"]
        correct = float(chosen == gold["answer"])
        return Scored(
            score=correct,
            valid=on_list,
            parsed={"answer": chosen if on_list else ""},
            error=None if on_list else "the answer is not one of the classes",
            metrics={"correct": correct},
        )

    def columns(self) -> list[Column]:
        return list(COLUMNS)

    def answer_class(self, category: str, gold: Any, text: str) -> str | None:
        chosen = chosen_class(text)
        return chosen if chosen in gold["options"] else None

    def gold_class(self, category: str, gold: Any) -> str:
        return gold["answer"]

    def generate(self, options: dict, out: Path, progress=None) -> tuple[Path, list[dict]]:
        """`options`: path (required), seed, split (test, train or all), rows_per_cell (at most this many
        rows per task, a seeded draw), categories (task names, lower case)."""
        refuse_unknown(options, self.OPTIONS, self.name)
        split = options.get("split") or "test"
        splits = list(SPLIT_SUFFIX) if split == "all" else [split]
        if any(s not in SPLIT_SUFFIX for s in splits):
            raise UserError(f"--split must be test, train or all for --family {self.name} (got {split})")
        limit = options.get("rows_per_cell")
        if limit is not None and int(limit) < 1:
            raise UserError("--rows-per-cell must be at least 1")
        path = source_path(options, self.name)
        seed = int(options.get("seed", 42))
        wanted = {c.lower() for c in options.get("categories") or []}
        manifest, lines = None, []
        for name in splits:
            files = self._ts_files(path, name, wanted)
            config = {"split": name, "rows_per_cell": limit, "tasks": sorted(files), "path": str(path)}
            rows = self._rows(files, path, name, seed, None if limit is None else int(limit))
            manifest, written = write_split(
                self.name,
                self.dataset,
                rows,
                out,
                seed=seed,
                split=name,
                config=config,
                sources=file_hashes(files.values(), path),
                progress=progress,
            )
            lines += written
        return manifest, lines

    def _ts_files(self, path: Path, split: str, wanted: set[str]) -> dict[str, Path]:
        suffix = SPLIT_SUFFIX[split]
        candidates = [path] if path.is_file() else sorted(path.rglob(f"*{suffix}.ts"))
        found = {}
        for file in candidates:
            task = file.stem[: -len(suffix)] if file.stem.upper().endswith(suffix) else file.stem
            if not wanted or task.lower() in wanted:
                found.setdefault(task, file)
        if not found:
            raise nothing_found(path, self.name, f"*{suffix}.ts files" + (f" of {sorted(wanted)}" if wanted else ""))
        return found

    def _rows(self, files: dict[str, Path], root: Path, split: str, seed: int, limit: int | None) -> Iterator[Row]:
        """One task file at a time (a TimerBed test set can hold 40k series)."""
        loaders = require("aeon.datasets", self.name)
        base = root if root.is_dir() else root.parent
        for task, file in sorted(files.items()):
            try:
                X, y, meta = loaders.load_from_ts_file(str(file), return_meta_data=True)
            except Exception as exc:  # aeon raises IOError and others for malformed files
                raise UserError(f"{file} is not a readable .ts file ({type(exc).__name__}: {str(exc)[:120]})") from None
            names_of = _labels(file.parent, base, task)
            raw_classes = [str(c) for c in (meta.get("class_values") or sorted({str(v) for v in y}))]
            classes = [names_of.get(c, c) for c in raw_classes]
            picked = np.arange(len(y))
            if limit is not None and limit < len(y):
                draw = np.random.default_rng([seed, int(stable_id(task), 16)])
                picked = np.sort(draw.choice(len(y), size=limit, replace=False))
            category = task.lower()
            default_names = TASKS.get(category, (None, (), None))[1]
            for i in picked:
                values = _trimmed(X[i])
                names = (
                    list(default_names)
                    if len(default_names) == values.shape[0]
                    else [f"dim_{c}" for c in range(values.shape[0])]
                )
                label = names_of.get(str(y[i]), str(y[i]))
                yield Row(
                    id=f"timerbed-{category}-{split}-{int(i):06d}",
                    split=split,
                    category=category,
                    regime=REGIME,
                    channel_names=names,
                    question=question_text(task, names, values.shape[1], classes),
                    options=list(classes),
                    gold={"answer": label, "options": list(classes)},
                    seed=seed,
                    values=values,
                    meta={},
                    source={
                        "file": str(file.relative_to(base)) if file.is_relative_to(base) else file.name,
                        "index": int(i),
                    },
                )
