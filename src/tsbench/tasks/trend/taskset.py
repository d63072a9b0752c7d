"""`trend`: is the plotted series rising or falling? A toy two-class task for vision-language training.

Every row is a pure function of its id ("<split>-<seed>-<n>"): the series (a noisy line of slope +-1),
its class and its picture (a bold line on a small white canvas, drawn with PIL, so a tiny VLM reads the
direction from a few image patches). The training stream draws fresh rows per (seed, step, j) and
needs no files; `tsbench generate --family trend` writes the ids of a fixed test split for eval.
The answer is TimeMaster's `<class>...</class>` span when present, else the first class word named.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tsbench.core.class_tags import tag_spans
from tsbench.core.episode import EpisodeTask
from tsbench.core.errors import UserError
from tsbench.tasks.base import (
    Column,
    Sample,
    SampleRef,
    Scored,
    TaskFamily,
    TrainingRequest,
    TrainingStream,
    file_summary,
)

CLASSES = ("rising", "falling")
CATEGORY = "trend"
LENGTH = 64
IMAGE_SIZE = (112, 56)  # width, height: 4 x 2 patches of 28 pixels
QUESTION = (
    "The image plots a time series. Is it rising or falling? Reason inside <think>...</think>, then give "
    "ONE class inside <class>...</class>: rising or falling."
)


def _rng(*parts: object) -> np.random.Generator:
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def make_row(row_id: str) -> tuple[str, np.ndarray]:
    """The class and series of a row id (any string: the id is the seed)."""
    rng = _rng("trend", row_id)
    label = CLASSES[int(rng.integers(0, 2))]
    slope = 1.0 if label == "rising" else -1.0
    t = np.linspace(0.0, 1.0, LENGTH)
    values = slope * t + rng.normal(0.0, 0.08, LENGTH)
    return label, values.astype(np.float32)[None, :]


def draw(values: np.ndarray) -> bytes:
    """A bold black line on white, the series scaled to the canvas."""
    from PIL import Image, ImageDraw

    width, height = IMAGE_SIZE
    x = values[0].astype(np.float64)
    lo, hi = float(x.min()), float(x.max())
    ys = (1 - (x - lo) / (hi - lo or 1.0)) * (height - 8) + 4
    xs = np.linspace(4, width - 4, len(x))
    image = Image.new("RGB", IMAGE_SIZE, "white")
    ImageDraw.Draw(image).line(list(zip(xs.tolist(), ys.tolist())), fill="black", width=6)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def named_class(message: str) -> str | None:
    """The class an answer names: its <class> span (case-insensitive), else the first class word in it."""
    span = next(tag_spans(message or ""), None)  # the first <class>...</class>, found in one pass
    text = (span if span is not None else message or "").lower()
    hits = [(text.find(c), c) for c in CLASSES if c in text]
    return min(hits)[1] if hits else None


class Trend(TaskFamily):
    name = "trend"
    default_harness = "single-pass-image"

    def resolve(self, data, *, seed, split, root, filters) -> list[Path]:
        if data:
            return [Path(d) / f"{split}.parquet" if Path(d).is_dir() else Path(d) for d in data]
        return [Path(root or self.default_root()) / f"seed{seed}" / f"{split}.parquet"]

    def index(self, files, filters) -> pd.DataFrame:
        missing = [str(f) for f in files if not Path(f).is_file()]
        if missing:
            raise UserError(f"no trend data at {missing[0]}: run tsbench generate --family trend")
        return pd.concat([pd.read_parquet(f).assign(path=str(f)) for f in files], ignore_index=True)

    def load(self, ref: SampleRef) -> Sample:
        label, values = make_row(ref.id)
        task = EpisodeTask(ref.id, CATEGORY, "all", QUESTION, ["x"], values, options=list(CLASSES), image=draw(values))
        split = ref.id.split("-", 1)[0]
        return Sample(ref, task, label, {"split": split, "regime": "all", "length": LENGTH, "n_channels": 1})

    def score(self, category: str, gold: Any, message: str) -> Scored:
        found = named_class(message)
        if found is None:
            return Scored(0.0, False, None, "names neither rising nor falling")
        return Scored(float(found == gold), True, found)

    def columns(self) -> list[Column]:
        return [Column(CATEGORY, "Trend", "acc", "Toy", options=CLASSES)]

    def dataset_identity(self, files) -> dict[str, Any]:
        digest = hashlib.sha256(b"".join(Path(f).read_bytes() for f in files)).hexdigest()
        return {"family": self.name, "seed": 0, "split": "test", "key": f"trend/{digest[:12]}"}

    def generate(self, options: dict[str, Any], out: Path, progress=None) -> tuple[Path, list[dict]]:
        seed, rows = int(options.get("seed") or 0), int(options.get("rows") or 64)
        folder = Path(out) / f"seed{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        ids = [f"test-{seed}-{n}" for n in range(rows)]
        frame = pd.DataFrame({"id": ids, "category": CATEGORY, "gold": [make_row(i)[0] for i in ids]})
        path = folder / "test.parquet"
        frame.to_parquet(path, index=False)
        manifest = folder / "manifest.json"
        manifest.write_text(json.dumps({"family": self.name, "seed": seed, "rows": rows}))
        return manifest, [file_summary(path, rows)]

    def answer_class(self, category: str, gold: Any, text: str) -> str | None:
        return named_class(text)

    def gold_class(self, category: str, gold: Any) -> str:
        return str(gold)

    def sft_target(self, category: str, gold: Any) -> str:
        return f"<think>the line goes {'up' if gold == 'rising' else 'down'}</think><class>{gold}</class>"

    def training_stream(self, request: TrainingRequest) -> TrainingStream:
        return GeneratedStream(self, request)


class GeneratedStream(TrainingStream):
    """Fresh rows per (seed, step, j): nothing to read, nothing to download."""

    def __init__(self, family: Trend, request: TrainingRequest):
        self.family, self.request = family, request

    def sample(self, step: int, j: int) -> Sample:
        return self.family.load(SampleRef(self.family.name, "", f"train-{self.request.seed}-{step}-{j}"))
