"""The classical baseline's policy face: `classical/<path>`, played under the `direct` harness with the
heads `classical.train_classical` saved under <path> (training and decoding live in classical.py)."""

from __future__ import annotations

import atexit
import os
import threading
from pathlib import Path

import numpy as np

from tsbench.baselines import decode
from tsbench.baselines import features as F
from tsbench.baselines.classical import CLASSICAL_PACKAGES, ClassicalPredictor, load_heads
from tsbench.baselines.direct_policy import DirectPolicy
from tsbench.baselines.feature_cache import CacheWriter, RowFeatures, compute_row, load_cache, values_key
from tsbench.core.episode import EpisodeTask
from tsbench.core.errors import UserError
from tsbench.core.extras import check


class ClassicalModel(DirectPolicy):
    """A reference policy that answers from the full-resolution series with the fitted heads."""

    knows = "trained on the generator's train split"

    def __init__(self, path: str):
        self.path = Path(path)
        self.name = f"classical/{path}"
        heads, self.meta = load_heads(self.path)
        self.predictor = ClassicalPredictor(heads)
        self._warm = False
        self._cache: dict[str, RowFeatures] | None = None  # the model's feature cache, read on first use
        self._writer: CacheWriter | None = None
        self._lock = threading.Lock()
        self.computed = 0  # rows whose features this model computed (the rest came from the cache)

    def features(self, task: EpisodeTask) -> RowFeatures:
        """The row's features from the model's cache (an MCQ row shares its precise source's series, a
        second eval finds the first's), computed and added to it otherwise."""
        if task.values is None:
            raise ValueError("the classical baseline needs the task's series")
        key = values_key(task.values, list(task.channel_names))
        with self._lock:
            if self._cache is None:
                self._cache = load_cache(self.path / "features")
            found = self._cache.get(key)
        if found is not None:
            return found
        if not self._warm:
            F.warm_up()
            self._warm = True
        values = [np.asarray(v, dtype=np.float64) for v in task.values]
        feats, seconds = compute_row(values, list(task.channel_names))
        with self._lock:
            self._cache[key] = feats
            self.computed += 1
            if self._writer is None and os.access(self.path, os.W_OK):
                self._writer = CacheWriter(self.path / "features")
                atexit.register(_flush_quietly, self._writer)  # the last part, when the eval's process ends
            if self._writer is not None:
                try:
                    self._writer.add(key, task.length, feats, seconds)
                except OSError:  # the cache is a saving, never a reason for an episode to fail
                    self._writer = None
        return feats

    def answer(self, task: EpisodeTask) -> str:
        values = [np.asarray(v, dtype=np.float64) for v in task.values] if task.values is not None else None
        answer = self.predictor.answer(
            task.category, task.length, list(task.channel_names), list(task.options), self.features(task), values
        )
        return decode.answer_text(answer)


def _flush_quietly(writer: CacheWriter) -> None:
    try:
        writer.flush()
    except OSError:  # the model folder went away before the process ended: nothing to keep
        pass


def build(path: str) -> ClassicalModel:
    """`classical/<path>`: the heads saved under <path> by `train_classical`."""
    if not (Path(path) / "meta.json").exists():  # the README's order: sft-baseline writes it first
        where = "" if Path(path) == Path("models/classical") else f" --out {path}"
        raise UserError(
            f"no trained classical model in {path} (no meta.json): train it first with "
            f"`tsbench sft-baseline --model classical{where}` (features + XGBoost heads on the train split)"
        )
    check(*CLASSICAL_PACKAGES, extra="classical")
    return ClassicalModel(path)
