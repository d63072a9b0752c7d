"""Multi-process GRPO on CPU: `tsbench train-grpo --num-processes 2` relaunches itself under
`accelerate launch` (torchrun's two processes, gloo), and one real step runs. Each process must get
whole groups (G copies of one task key, every copy the same task) and the two processes together
must cover the step's tasks exactly once: TRL's group advantages and our zero-variance masking
both assume it. The processes write the keys they played to <run>/ranks/rank-<i>.jsonl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tsbench.tasks.anomalyxl.taskset import AnomalyXL
from tsbench.tasks.base import Scored
from tsbench.testing.tiny import make_small_vocab_llama
from tsbench.train.curriculum import task_keys

GROUP, BATCH = 2, 4  # two tasks per step: one whole group on each process


class SaysG(AnomalyXL):
    """AnomalyXL's tasks scored by the share of "g" among the reply's words (rewards that differ)."""

    name = "says-g"

    def score(self, category, gold, message):
        words = message.split()
        return Scored(score=words.count("g") / 3, valid=bool(words))


def test_two_cpu_processes_train_one_step_on_whole_groups(tmp_path):
    model = make_small_vocab_llama(tmp_path / "tiny")
    run = tmp_path / "run"
    flags = {
        "model": f"local/{model}",
        "num-processes": 2,
        "lora": 0,
        "steps": 1,
        "group-size": GROUP,
        "batch-size": BATCH,
        "micro-batch-size": 1,
        "lr": 1e-2,
        "max-seq-len": 512,
        "harness": "single-pass-text",
        "max-turns": 1,
        "max-tokens": 3,
        "text-budget-chars": 40,
        "family": "test_train_multiprocess:SaysG",
        "preset": "small",
        "lengths": 1024,
        "categories": "localize",
        "rollout-workers": 2,
        "save-every": 100,
        "out": str(run),
    }
    command = [sys.executable, "-m", "tsbench.cli", "train-grpo", "--answer-cut-replies", "--no-gradient-checkpointing"]
    command += [part for name, value in flags.items() for part in (f"--{name}", str(value))]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "launching 2 process(es)" in done.stderr

    lines = {rank: json.loads((run / "ranks" / f"rank-{rank}.jsonl").read_text()) for rank in (0, 1)}
    for rank, line in lines.items():
        assert line["step"] == 1 and line["rank"] == rank
        keys, samples = line["keys"], line["samples"]
        assert len(keys) == BATCH // 2 == len(samples)
        for start in range(0, len(keys), GROUP):  # whole groups: G copies of one key, one task
            assert len(set(keys[start : start + GROUP])) == 1, keys
            assert len(set(samples[start : start + GROUP])) == 1, samples
    played = lines[0]["keys"] + lines[1]["keys"]
    assert sorted(set(played)) == sorted(task_keys(1, BATCH // GROUP))  # each task on one process only
    assert not set(lines[0]["keys"]) & set(lines[1]["keys"])

    metrics = pd.read_parquet(run / "metrics.parquet")
    assert metrics["step"].tolist() == [1] and metrics["loss"].notna().all()
    assert metrics["groups"].iloc[0] == BATCH // GROUP  # rank 0's summary counts both processes' groups
    rollouts = pd.read_json(run / "rollouts" / "samples.jsonl", lines=True)
    assert len(rollouts) == BATCH  # the journal gathers every process's episodes
    assert (run / "final" / "model.safetensors").is_file()
