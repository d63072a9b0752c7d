"""The generalization sets' generator core, shared by LTAF and Sleep-PSG: plan windows over the
recordings a reader found, read each window, z-normalize it per channel, write the rows.

A reader gives `Source`s: the sampler's view of a recording (events, regions) plus a function that
reads samples [start, end) of its channels as a (channels, L) array.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder
from tsbench.tasks.base import Column, Scored
from tsbench.tasks.recordings import classify
from tsbench.tasks.recordings.family import RecordingFamily, write_split
from tsbench.tasks.recordings.rows import Row
from tsbench.tasks.recordings.sampling import Recording, Window, WindowRules, plan_windows
from tsbench.tasks.recordings.sources import refuse_unknown, source_path, stable_id


@dataclass
class Source:
    recording: Recording
    channel_names: list[str]
    read: Callable[[int, int], np.ndarray]  # (start, end) -> (channels, end - start) float


@dataclass(frozen=True)
class Prompt:
    recording: str  # "ECG recording"
    what: str  # "premature beat"
    kinds: dict[str, str]  # label -> clinical definition, in option order


def znorm(block: np.ndarray) -> np.ndarray:
    """Per channel: zero mean, unit standard deviation (a flat channel stays at 0); NaN -> 0."""
    block = np.asarray(block, dtype=np.float64)
    mean = np.nanmean(block, axis=1, keepdims=True) if block.size else block
    std = np.nanstd(block, axis=1, keepdims=True)
    std[~np.isfinite(std) | (std == 0)] = 1.0
    return np.nan_to_num((block - np.nan_to_num(mean)) / std, nan=0.0, posinf=0.0, neginf=0.0).astype(np.float32)


def window_rows(
    family: str, sources: dict[str, Source], windows: list[Window], prompt: Prompt, seed: int
) -> Iterator[Row]:
    for w in windows:
        src = sources[w.key]
        fs = src.recording.fs
        values = znorm(src.read(w.start, w.end))
        yield Row(
            id=f"{family}-{stable_id(family, w.key, w.start, w.end)}",
            split="test",
            category=classify.CATEGORY,
            regime=classify.REGIME,
            channel_names=list(src.channel_names),
            question=classify.question(
                recording=prompt.recording,
                what=prompt.what,
                channels=src.channel_names,
                fs=fs,
                length=w.length,
                kinds=prompt.kinds,
            ),
            options=classify.options(list(prompt.kinds)),
            gold=classify.gold(w.kind, w.gold),
            seed=seed,
            values=values,
            meta={"fs": fs},
            source={"record": w.key, "start": w.start, "end": w.end, "fs": fs},
        )


class ClinicalFamily(RecordingFamily):
    """A classify-with-evidence set sampled from annotated recordings (LTAF, Sleep-PSG).

    A subclass sets `rules`, `prompt`, `short`, `group` and `read_sources(folder)`, which checks
    every file it will read (a window is read later, from files already checked)."""

    rules: WindowRules
    prompt: Prompt
    short = ""
    group = ""
    OPTIONS = ("path", "seed", "split", "windows")

    def read_sources(self, folder: UserFolder) -> list[Source]:  # pragma: no cover - abstract
        raise NotImplementedError

    def score(self, category: str, gold, message: str) -> Scored:
        if category != classify.CATEGORY:
            raise ValueError(f"unknown {self.name} category {category!r}")
        return classify.score(gold, message)

    def columns(self) -> list[Column]:
        # Paper Table 3: macro-F1 over the kinds and IoU over the anomalous windows (the row score,
        # kind match x IoU, is what training and `score` use).
        return [
            Column(
                classify.CATEGORY,
                self.short,
                "IoU",
                self.group,
                tuple(classify.options(list(self.prompt.kinds))),
                mean_metric="iou",
            )
        ]

    def answer_class(self, category: str, gold, text: str) -> str | None:
        answer, _ = classify.parse(text)
        return None if answer is None else answer["answer"]

    def gold_class(self, category: str, gold) -> str:
        return gold["answer"]

    def generate(self, options: dict, out: Path, progress=None) -> tuple[Path, list[dict]]:
        """`options`: path (required), seed, split (test only), windows (paper: 250)."""
        refuse_unknown(options, self.OPTIONS, self.name)
        if (options.get("split") or "test") != "test":
            raise UserError(f"--family {self.name} has one split: test (got --split {options['split']})")
        path = source_path(options, self.name)
        seed = int(options.get("seed", 42))
        windows = int(options.get("windows") or self.rules.n_windows)
        if windows < 1:
            raise UserError("windows must be at least 1")
        rules = replace(self.rules, n_windows=windows)
        folder = UserFolder(path, self.name)
        sources = self.read_sources(folder)
        by_key = {s.recording.key: s for s in sources}
        planned = plan_windows([s.recording for s in sources], list(self.prompt.kinds), rules, seed)
        if not planned:
            raise UserError(
                f"no window could be drawn from {path}: recordings shorter than {rules.min_s:g} s "
                "or no usable annotations"
            )
        config = {"rules": asdict(rules), "kinds": list(self.prompt.kinds), "path": str(path)}
        rows = window_rows(self.name, by_key, planned, self.prompt, seed)
        return write_split(
            self.name,
            self.dataset,
            rows,
            out,
            seed=seed,
            split="test",
            config=config,
            sources=folder.hashes,
            progress=progress,
            total=len(planned),
        )
