"""TimeMaster's GRPO learns, end to end on a CPU: a tiny random Qwen2.5-VL plays the toy plot task
`trend` (rising vs falling, drawn offline) under single-pass-image, rewarded by TimeMaster's composite
reward (0.1 format + 0.9 hard: the class in its <class> span). Its word-level vocabulary holds the two
whole answers and two other words, so a CPU learns to answer in well under a minute; the mean reward
must rise well above where it started. Everything else is real: the harness, the image through the
processor, TRL's GRPOTrainer with the pixels in its loss, our rollouts, rewards and masks.

What this does NOT show is that the policy reads the plot: measured on the family's held-out test split
(48 rows, greedy, every 10 steps), the class is right 0.25 / 0.50 / 0.40 of the time after 10 / 20 / 30
steps (and 0.42 / 0.48 / 0.52 / 0.46 at lr 1e-2 with an entropy bonus over 40): it learns to name a class,
not which. At initialisation a rising and a falling plot move this tiny VLM's next-token log-probabilities
by 0.01, so the reward is found through the class prior long before the image.

The second test is the one a blind policy cannot pass: TimeMaster's warm start (`sft-baseline --format
timemaster-traces`) on plots whose prompt is the same text for both classes, then `eval` under
single-pass-image on the held-out test split. Any policy that ignores the image answers every row alike,
so it scores at most the larger class's share (18 of 32); the warm-started VLM must name the right class
of nearly every row. Measured (2 shared cores, load 8-10): held-out 0.00 before, 1.00 after 5 epochs of
256 traces (0.94 after 4, 1.00 after 6), the SFT 27 s, the test 34 s; with 64 traces (12 epochs, 96 steps)
the loss stays on the image-blind plateau (~0.28) and held-out at 0.56, so fresh plots are what it takes.
GRPO learning the image from the reward alone is shown with a conv policy in test_train_grpo_image.py.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pandas as pd
import pytest

from tsbench import results as schema
from tsbench.core.config import build
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness.prompts import SINGLE_PASS_SYSTEM
from tsbench.models.tiny_vlm import make_tiny_random_vlm
from tsbench.tasks.trend.taskset import QUESTION, Trend, draw, make_row
from tsbench.train.config import GRPOConfig
from tsbench.train.grpo import train_grpo
from tsbench.train.sft import run_sft
from tsbench.train.sft_config import SFTConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_mean_reward_rises_on_the_trend_plots(tmp_path):
    words = ("<class>rising</class>", "<class>falling</class>", "a", "b")
    model_dir = make_tiny_random_vlm(tmp_path / "vlm", words=words)
    cfg = build(
        GRPOConfig,
        {
            "model": f"local/{model_dir}",
            "family": "trend",
            "harness": "single-pass-image",
            "lora": 0,
            "steps": 30,
            "group_size": 4,
            "batch_size": 32,
            "micro_batch_size": 32,
            "lr": 5e-3,
            "max_seq_len": 256,
            "max_turns": 1,
            "max_tokens": 1,
            "answer_cut_replies": True,
            "reward": "composite",
            "format_weight": 0.1,
            "hard_weight": 0.9,
            "gradient_checkpointing": False,
            "rollout_workers": 32,
            "save_steps": 1000,
            "log_rollouts": False,
            "out": str(tmp_path / "run"),
        },
    )
    started = time.perf_counter()
    history = pd.read_parquet(train_grpo(cfg) / "metrics.parquet")["mean_reward"].tolist()
    first, last = sum(history[:5]) / 5, sum(history[-8:]) / 8
    print(
        f"mean reward: first 5 steps {first:.3f}, last 8 {last:.3f}; {time.perf_counter() - started:.0f}s; "
        f"curve {[round(h, 2) for h in history]}"
    )
    assert len(history) == cfg.max_steps
    assert last >= first + 0.2, history


def held_out_accuracy(model_dir, data, out) -> float:
    cfg = build(
        EvalConfig,
        {
            "family": "trend",
            "model": f"local/{model_dir}",
            "harness": "single-pass-image",
            "data": [str(data)],
            "concurrency": 1,
            "max_tokens": 6,
            "out": str(out),
        },
    )
    rows = schema.load_samples(run_eval(cfg))
    assert rows["error_type"].isna().all(), rows["error_message"].tolist()
    return float(rows["score"].mean())


def test_the_warm_start_reads_the_plot_where_a_blind_policy_cannot_pass(tmp_path):
    words = ("<think>", "</think>", "up", "down", "<class>rising</class>", "<class>falling</class>")
    model_dir = make_tiny_random_vlm(tmp_path / "vlm", words=words)
    traces = []
    for i in range(256):  # the harness's own prompt: one text for every row, the class only in the plot
        label, values = make_row(f"train-sft-{i}")
        (tmp_path / f"{i}.png").write_bytes(draw(values))
        response = f"<think> {'up' if label == 'rising' else 'down'} </think> <class>{label}</class>"
        traces.append({"system": SINGLE_PASS_SYSTEM, "prompt": QUESTION, "image": f"{i}.png", "response": response})
    (tmp_path / "traces.jsonl").write_text("\n".join(json.dumps(t) for t in traces))
    assert len({(t["system"], t["prompt"]) for t in traces}) == 1
    Trend().generate({"seed": 0, "rows": 32}, tmp_path / "trend")
    test_split = tmp_path / "trend" / "seed0"
    golds = pd.read_parquet(test_split / "test.parquet")["gold"]
    blind = max(Counter(golds).values()) / len(golds)  # the best any image-blind policy can score
    assert blind <= 0.6

    before = held_out_accuracy(model_dir, test_split, tmp_path / "before")
    started = time.perf_counter()
    sft = {
        "model": f"local/{model_dir}",
        "lora": 0,
        "format": "timemaster-traces",
        "data": [str(tmp_path / "traces.jsonl")],
        "family": "trend",
        "epochs": 5,
        "lr": 5e-3,
        "warmup": 0.0,
        "batch_size": 8,
        "out": str(tmp_path / "sft"),
    }
    out = run_sft(build(SFTConfig, sft))
    seconds = time.perf_counter() - started
    after = held_out_accuracy(out, test_split, tmp_path / "after")
    losses = pd.read_parquet(out / "steps.parquet")["loss"].tolist()
    print(
        f"held-out accuracy {before:.2f} -> {after:.2f} (blind bound {blind:.2f}); SFT {seconds:.0f}s; "
        f"loss every 16 steps {[round(x, 3) for x in losses[::16]]}"
    )
    assert before <= blind
    assert after >= 0.9 > blind + 0.25
