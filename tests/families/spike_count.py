"""A second task family that lives entirely in this file: count the spikes in a short series.

It proves the seam: eval, score, describe, the leaderboard and train-grpo run it with no edit
anywhere in tsbench. It writes only the six hooks a family must have; every other hook (describe,
--plot, the training stream over its train split, ...) is TaskFamily's default. Its rows are one
small parquet file per split with the same light columns every family's index has.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.core.episode import EpisodeTask
from tsbench.tasks.base import Column, Sample, SampleRef, Scored, TaskFamily

FAMILY = "spike_count:SpikeCount"
CATEGORIES = ("few", "many")
LENGTH = 256


def write_dataset(folder: Path, rows: int = 6, seed: int = 0, split: str = "test") -> Path:
    """`rows` series per category of `split`, each with a known number of unit spikes, plus a manifest."""
    rng = np.random.default_rng(seed if split == "test" else [seed, 1])
    prefix = "" if split == "test" else f"{split}-"
    records = []
    for category, spikes in (("few", (1, 3)), ("many", (4, 6))):
        for index in range(rows):
            count = int(rng.integers(spikes[0], spikes[1] + 1))
            values = rng.normal(0.0, 0.05, LENGTH)
            values[rng.choice(np.arange(8, LENGTH - 8, 12), size=count, replace=False)] += 1.0
            records.append(
                {
                    "id": f"{prefix}{category}-{index:02d}",
                    "category": category,
                    "length": LENGTH,
                    "question": 'How many spikes (values above 0.5) does channel x hold? Answer {"count": <int>}.',
                    "gold": json.dumps({"count": count}),
                    "values": values.astype(np.float32).tolist(),
                }
            )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{split}.parquet"
    pq.write_table(pa.Table.from_pylist(records), path)
    (folder / "manifest.json").write_text(json.dumps({"family": FAMILY, "seed": seed, "split": split}))
    return path


class SpikeCount(TaskFamily):
    name = "spike_count"
    strata = ()

    def resolve(self, data, *, seed, split, root, filters):
        return [Path(d) / f"{split}.parquet" if Path(d).is_dir() else Path(d) for d in data]

    def index(self, files, filters) -> pd.DataFrame:
        frames = [
            pq.read_table(f, columns=["id", "category", "length", "question", "gold"]).to_pandas().assign(path=str(f))
            for f in files
        ]
        return pd.concat(frames, ignore_index=True)

    def load(self, ref: SampleRef) -> Sample:
        table = pq.read_table(ref.path).to_pandas()
        row = table[table["id"] == ref.id].iloc[0]
        values = np.asarray([row["values"]], dtype=np.float32)
        task = EpisodeTask(row["id"], row["category"], "all", row["question"], ["x"], values)
        columns = {"split": Path(ref.path).stem, "regime": "all", "length": LENGTH, "n_channels": 1}
        return Sample(ref, task, json.loads(row["gold"]), columns)

    def score(self, category: str, gold: Any, message: str) -> Scored:
        found = re.findall(r'"count"\s*:\s*(-?\d+)', message or "")
        if not found:
            return Scored(0.0, False, None, "no count", {})
        count = int(found[-1])
        return Scored(
            float(count == gold["count"]), True, {"count": count}, None, {"abs_err": abs(count - gold["count"])}
        )

    def columns(self) -> list[Column]:
        return [Column("few", "Few", "acc", "Spikes"), Column("many", "Many", "acc", "Spikes")]

    def dataset_identity(self, files) -> dict:
        digest = hashlib.sha256(b"".join(Path(f).read_bytes() for f in files)).hexdigest()
        return {"family": FAMILY, "seed": 0, "split": "test", "key": f"spike_count/seed0/test/{digest[:12]}"}
