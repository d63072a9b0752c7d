"""TimeMaster's GRPO learns, end to end on a CPU: a tiny random Qwen2.5-VL plays the toy plot task
`trend` (rising vs falling, drawn offline) under single-pass-image, rewarded by TimeMaster's composite
reward (0.1 format + 0.9 hard: the class in its <class> span). Its word-level vocabulary holds the two
whole answers and two other words, so a CPU learns to answer in about a minute. What is asserted is the
class on held-out plots (the family's test split, never trained on, played greedily every 10 steps): the
class depends on the image alone (the question is the same for both), so a policy that ignores the plot
and names one class scores the split's share of that class, which the test checks is far below the bar.
Everything else is real: the harness, the image through the processor, TRL's GRPOTrainer with the pixels
in its loss, our rollouts, rewards and masks.
"""

from __future__ import annotations

import time

import pandas as pd
import pytest

from tsbench.core.config import build
from tsbench.testing.tiny_vlm import make_tiny_random_vlm
from tsbench.train.config import GRPOConfig
from tsbench.train.grpo import train_grpo

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_class_of_held_out_plots_is_learned_from_the_image(tmp_path):
    from tsbench.tasks import get_taskset

    words = ("<class>rising</class>", "<class>falling</class>", "a", "b")
    model_dir = make_tiny_random_vlm(tmp_path / "vlm", words=words)
    get_taskset("trend").generate({"seed": 0, "rows": 48}, tmp_path / "trend")
    held_out = pd.read_parquet(tmp_path / "trend" / "seed0" / "test.parquet")["gold"]
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
            "eval_every": 10,
            "eval_split": "test",
            "eval_data": [str(tmp_path / "trend" / "seed0")],
            "eval_limit": 48,
            "out": str(tmp_path / "run"),
        },
    )
    started = time.perf_counter()
    metrics = pd.read_parquet(train_grpo(cfg) / "metrics.parquet")
    evals = metrics.dropna(subset=["eval_mean_score"])
    curve = [(int(s), round(v, 3)) for s, v in zip(evals["step"], evals["eval_mean_score"])]
    print(
        f"{time.perf_counter() - started:.0f}s; train reward {[round(h, 2) for h in metrics['mean_reward']]}; "
        f"held-out class accuracy {curve}; held-out share of the commoner class {held_out.value_counts(normalize=True).max():.2f}"
    )
    assert len(metrics) == cfg.max_steps
    assert held_out.value_counts(normalize=True).max() <= 0.65  # naming one class, blind to the plot, stays below
    assert evals["eval_mean_score"].iloc[-1] >= 0.85, curve
