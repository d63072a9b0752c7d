"""GRPO on two machines, on CPU: two `tsbench train-grpo --num-processes 2 --num-machines 2 --machine-rank
<r> --main-process-ip 127.0.0.1` commands (the two "machines", one process each, gloo) relaunch themselves
under `accelerate launch` and train one real step on one shared run dir, then both resume it for a second.
Each process must get whole groups (G copies of one task key, every copy the same task) and the two
together must cover the step's tasks exactly once: TRL's group advantages and our zero-variance masking
both assume it. The processes write the keys they played to <run>/ranks/rank-<i>.jsonl; the main one writes
the checkpoints, metrics and journal, which the resumed run continues."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tsbench.tasks.anomalyxl.taskset import AnomalyXL
from tsbench.tasks.base import Scored
from tsbench.testing import readiness
from tsbench.testing.tiny import make_small_vocab_llama
from tsbench.train.curriculum import task_keys

GROUP, BATCH = 2, 4  # two tasks per step: one whole group on each process


class SaysG(AnomalyXL):
    """AnomalyXL's tasks scored by the share of "g" among the reply's words (rewards that differ)."""

    name = "says-g"

    def score(self, category, gold, message):
        words = message.split()
        return Scored(score=words.count("g") / 3, valid=bool(words))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def two_machines(run: Path, model: Path, steps: int, *extra: str) -> list[subprocess.CompletedProcess]:
    """The same command on both "machines" at once, each with its own rank."""
    flags = {
        "model": f"local/{model}",
        "num-processes": 2,
        "num-machines": 2,
        "main-process-ip": "127.0.0.1",
        "main-process-port": free_port(),
        "lora": 0,
        "max-steps": steps,
        "group-size": GROUP,
        "batch-size": BATCH,
        "micro-batch-size": 1,
        "learning-rate": 1e-2,
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
        "save-steps": 1,
        "ddp-timeout": 4321,
        "out": str(run),
    }
    base = [sys.executable, "-m", "tsbench.cli", "train-grpo", "--answer-cut-replies", "--no-gradient-checkpointing"]
    base += [part for name, value in flags.items() for part in (f"--{name}", str(value))] + list(extra)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    machines = [
        subprocess.Popen(
            base + ["--machine-rank", str(rank)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for rank in (0, 1)
    ]
    done = []
    for machine in machines:
        out, err = readiness.communicate(machine)
        done.append(subprocess.CompletedProcess(machine.args, machine.returncode, out, err))
    return done


def test_two_machines_train_whole_groups_on_a_shared_run_dir_and_resume(tmp_path):
    model = make_small_vocab_llama(tmp_path / "tiny")
    run = tmp_path / "run"
    for machine in two_machines(run, model, steps=1):
        assert machine.returncode == 0, machine.stderr[-4000:]
        assert "launching 2 process(es)" in machine.stderr and "--num_machines 2" in machine.stderr

    lines = {rank: json.loads((run / "ranks" / f"rank-{rank}.jsonl").read_text()) for rank in (0, 1)}
    for rank, line in lines.items():
        assert line["step"] == 1 and line["rank"] == rank
        assert line["group_timeout_s"] == 4321  # the live group's watchdog timeout is the config's ddp_timeout
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
    assert (run / "checkpoints" / "checkpoint-1" / "trainer_state.json").is_file()

    for machine in two_machines(run, model, 2, "--resume"):  # both machines continue the shared run
        assert machine.returncode == 0, machine.stderr[-4000:]
    assert pd.read_parquet(run / "metrics.parquet")["step"].tolist() == [1, 2]
    assert len(pd.read_json(run / "rollouts" / "samples.jsonl", lines=True)) == 2 * BATCH
    assert json.loads((run / "train.json").read_text())["resumed_from"] == "checkpoint-1"
    assert (run / "final" / "model.safetensors").is_file()
