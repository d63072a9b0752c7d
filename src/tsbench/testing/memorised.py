"""`memorised/<seed dir>`: a reference policy that has memorised one generated split's answers.

It reads the split once (gold included, which no real policy can), keys every row's gold answer by
its category and a hash of its series values, and answers a task by looking its series up: a row of that split
gets its gold answer, any other row an empty answer. It is what the contamination probe must flag
(tsbench contamination), and is registered only by the tests that use it, never by tsbench.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from tsbench.baselines.direct_policy import DirectPolicy
from tsbench.core.episode import EpisodeTask

UNKNOWN = "{}"  # no usable answer: scores 0 on every category


def series_hash(values) -> str:
    """sha256 over the series' float64 bytes, channel by channel."""
    digest = hashlib.sha256()
    for channel in np.atleast_2d(np.asarray(values, dtype=np.float64)):
        digest.update(np.ascontiguousarray(channel).tobytes())
    return digest.hexdigest()


def _public(gold) -> str:
    """The gold as an answer: without the scorer's private keys."""
    if isinstance(gold, dict):
        return json.dumps({k: v for k, v in gold.items() if not k.startswith("_") and k not in ("channels", "options")})
    return json.dumps(gold)


class MemorisedPolicy(DirectPolicy):
    knows = "the gold answers of one split, looked up by series hash (a contamination test double)"

    def __init__(self, seed_dir: str):
        from tsbench.tasks import get_taskset

        folder = Path(seed_dir)
        family = json.loads((folder / "manifest.json").read_text()).get("family", "anomalyxl")
        taskset = get_taskset(family)
        index = taskset.index(sorted(folder.glob("*.parquet")), {})
        self.name = f"memorised/{seed_dir}"
        self.answers: dict[tuple[str, str], str] = {}  # (category, series hash): an MCQ row shares its source's series
        for row in index.itertuples(index=False):
            from tsbench.tasks.base import SampleRef

            sample = taskset.load(SampleRef(family, str(row.path), str(row.id)))
            self.answers[(sample.task.category, series_hash(sample.task.values))] = _public(sample.gold)

    def answer(self, task: EpisodeTask) -> str:
        return self.answers.get((task.category, series_hash(task.values)), UNKNOWN)


def build(seed_dir: str) -> MemorisedPolicy:
    return MemorisedPolicy(seed_dir)
