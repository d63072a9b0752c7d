"""A task whose answer only the environment knows, and a harness whose tool tells it.

Each row hides one of four values (`v0`..`v3`) in its series; the question never says which. The
`peek` harness (a plugin harness, registered as `harness.peek` by the test that uses it) plays two
turns, as a kernel runs whatever the first reply holds: the first reply goes to the tool, whose
observation ("peek returned v2") comes back as the next user message, and the second reply is the
answer. A policy that ignores what the tool returns scores 1 in 4 on average; one that uses it, 1.
(With a first-turn answer allowed, a tiny policy learns to guess in one turn, where the reward is
easier to find, and never learns the second: measured, 1.03 turns per episode after 40 steps.)
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from spike_count import SpikeCount

from tsbench.core.episode import EpisodeResult, EpisodeTask
from tsbench.models.base import Message
from tsbench.tasks.base import Column, Sample, SampleRef, Scored

VALUES = ("v0", "v1", "v2", "v3")
QUESTION = "Which value is hidden here? Ask the tool first, then answer with the value it names."
ECHO = 8  # the tool says its value this many times: a loud observation a 2-layer model can attend to
SYSTEM = "Answer with one word."
LENGTH = 16


def write_dataset(folder: Path, rows: int, seed: int, split: str) -> Path:
    """`rows` rows of `split`, each hiding a value drawn uniformly (its series holds the value's index)."""
    rng = np.random.default_rng([seed, {"train": 0, "val": 1, "test": 2}[split]])
    records = []
    for index in range(rows):
        value = int(rng.integers(0, len(VALUES)))
        records.append(
            {
                "id": f"{split}-{index:03d}",
                "category": "hidden",
                "length": LENGTH,
                "question": QUESTION,
                "gold": json.dumps({"value": VALUES[value]}),
                "values": [float(value)] * LENGTH,
            }
        )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{split}.parquet"
    pq.write_table(pa.Table.from_pylist(records), path)
    return path


class Peek(SpikeCount):
    """SpikeCount's file layout (one parquet per split, light index columns), scored on the hidden value."""

    name = "peek"

    def load(self, ref: SampleRef) -> Sample:
        sample = super().load(ref)
        return dataclasses.replace(sample, columns={**sample.columns, "length": LENGTH})

    def score(self, category: str, gold: Any, message: str) -> Scored:
        answer = (message or "").strip()
        return Scored(float(answer == gold["value"]), answer in VALUES, {"value": answer}, None, {})

    def columns(self) -> list[Column]:
        return [Column("hidden", "Hidden", "acc", "Peek")]

    def dataset_identity(self, files) -> dict:
        return {"family": "peek", "seed": 0, "split": "test", "key": "peek/test"}


def run_peek(agent: Any, task: EpisodeTask, cfg: Any) -> EpisodeResult:
    """Two replies: the first goes to the tool, the second (seeing what it returned) is the answer."""
    messages = [Message("system", SYSTEM), Message("user", task.question)]
    result = EpisodeResult()
    first = agent.generate(messages, max_tokens=cfg.max_tokens, temperature=cfg.temperature, task=task.info())
    result.add_completion(first)
    transcript = [{"role": "assistant", "content": first.text}]
    answer = first.text
    if cfg.max_turns > 1:
        observed = "peek returned " + " ".join([VALUES[int(task.values[0][0])]] * ECHO)
        messages += [Message("assistant", first.text), Message("user", observed)]
        second = agent.generate(messages, max_tokens=cfg.max_tokens, temperature=cfg.temperature, task=task.info())
        result.add_completion(second)
        transcript += [{"role": "user", "content": observed}, {"role": "assistant", "content": second.text}]
        answer = second.text
    result.final_message = answer.strip()
    result.transcript = transcript
    return result
