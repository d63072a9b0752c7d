"""experiments/timemaster/: the paper's GRPO config (Qwen2.5-VL-3B, Table 6) and SFT warm start (Table 5)
load and validate; the CPU smoke config takes a real optimizer step with a non-zero gradient on a fresh
clone (its model is built offline into the cache, its task is drawn offline)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tsbench.core.config import build, read_toml_table
from tsbench.testing import readiness
from tsbench.train.config import GRPOConfig
from tsbench.train.sft_config import SFTConfig

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "experiments/timemaster"


def make_har_split(out: Path) -> Path:
    """A tiny HAR release in the UCI HAR text layout, generated as TimerBed's train split under `out`."""
    from tsbench.tasks import get_taskset

    release = out.parent / "release" / "HAR" / "UCI HAR Dataset"
    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        signals = release / split / "Inertial Signals"
        signals.mkdir(parents=True)
        for axis in "xyz":
            np.savetxt(signals / f"body_acc_{axis}_{split}.txt", rng.standard_normal((6, 128)))
        np.savetxt(release / split / f"y_{split}.txt", np.array([1, 2, 3, 4, 5, 6]), fmt="%d")
    get_taskset("timerbed").generate({"path": str(release.parents[1]), "seed": 0, "split": "train"}, out)
    return out / "seed0"


@pytest.fixture(scope="module")
def timerbed_har(tmp_path_factory) -> Path:
    return make_har_split(tmp_path_factory.mktemp("har") / "data")


def test_the_papers_grpo_config_loads_and_validates(timerbed_har):
    table = read_toml_table(CONFIGS / "grpo_qwen2.5-vl-3b.toml", "grpo")
    cfg = build(GRPOConfig, {**table, "data": [str(timerbed_har)]})
    assert (cfg.group_size, cfg.beta, cfg.epsilon, cfg.learning_rate, cfg.max_seq_len, cfg.loss_type) == (
        5,
        0.001,
        0.2,
        1e-6,
        2048,
        "grpo",
    )
    assert (cfg.rewards.reward, cfg.rewards.format_weight, cfg.rewards.hard_weight, cfg.rewards.soft) == (
        "composite",
        0.1,
        0.9,
        0.0,
    )
    assert (cfg.tasks_per_step, cfg.policy.lora, cfg.harness, cfg.launch.num_processes) == (
        32,
        0,
        "single-pass-image",
        4,
    )
    cfg.validate(cfg.launch.num_processes)


def test_the_warm_start_config_is_the_papers_sft():
    from tsbench.train.sft_config import checked

    cfg = checked(build(SFTConfig, read_toml_table(CONFIGS / "sft_warm_start_qwen2.5-vl-3b.toml", "sft")))
    assert (cfg.format, cfg.policy.lora, cfg.epochs, cfg.lr, cfg.weight_decay, cfg.warmup) == (
        "timemaster-traces",
        0,
        2,
        1e-5,
        0.1,
        0.03,
    )
    assert cfg.policy.model == "Qwen/Qwen2.5-VL-3B-Instruct"


def test_the_cpu_smoke_takes_a_real_step_with_a_gradient(tmp_path):
    env = {**os.environ, "TSBENCH_CACHE": str(tmp_path / "cache")}  # a fresh clone's empty cache
    started = time.perf_counter()
    done = readiness.run(
        [
            sys.executable,
            "-m",
            "tsbench.cli",
            "train-grpo",
            "--config",
            str(CONFIGS / "cpu_smoke.toml"),
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = pd.read_parquet(tmp_path / "run" / "metrics.parquet")
    print(f"cpu smoke: {time.perf_counter() - started:.0f}s, grad_norm {metrics['grad_norm'].tolist()}")
    assert len(metrics) == 1 and metrics["grad_norm"].iloc[0] > 0
    assert (tmp_path / "run" / "final" / "config.json").is_file()
