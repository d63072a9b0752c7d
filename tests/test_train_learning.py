"""GRPO learns, end to end through TRL: a tiny random Llama with a 23-word vocabulary plays real
single-pass-text episodes on generated AnomalyXL tasks; a test family scores each reply by how
many of its words are "g". The mean reward must rise well above where it started.

Everything runs for real (the harness, TRL's GRPOTrainer, our rollout function, rewards and
masks); only the vocabulary is small, so a CPU learns it in about a minute.
"""

from __future__ import annotations

import time

import pandas as pd
import pytest

from tsbench.core.config import build
from tsbench.tasks.anomalyxl.taskset import AnomalyXL
from tsbench.tasks.base import Scored
from tsbench.testing.tiny import make_small_vocab_llama
from tsbench.train.config import GRPOConfig
from tsbench.train.grpo import train_grpo

TARGET, REPLY_TOKENS = "g", 3


class SaysG(AnomalyXL):
    """AnomalyXL's tasks, scored by the share of the reply's words that are "g" (a learnable reward)."""

    name = "says-g"

    def score(self, category, gold, message):
        words = message.split()
        return Scored(score=words.count(TARGET) / REPLY_TOKENS, valid=bool(words))


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_mean_reward_rises(tmp_path):
    model_dir = make_small_vocab_llama(tmp_path / "tiny")
    cfg = build(
        GRPOConfig,
        {
            "model": f"local/{model_dir}",
            "lora": 0,
            "steps": 14,
            "group_size": 8,
            "batch_size": 32,
            "micro_batch_size": 8,
            "lr": 1e-2,
            "max_seq_len": 512,
            "harness": "single-pass-text",
            "max_turns": 1,
            "max_tokens": REPLY_TOKENS,
            "answer_cut_replies": True,
            "text_budget_chars": 40,
            "family": f"{__name__}:SaysG",
            "preset": "small",
            "lengths": [1024],
            "categories": ["localize"],
            "lambda_tok": 0.0,
            "lambda_fail": 0.0,
            "gradient_checkpointing": False,
            "rollout_workers": 32,
            "save_every": 100,
            "log_rollouts": False,
            "out": str(tmp_path / "run"),
        },
    )
    started = time.perf_counter()
    out = train_grpo(cfg)
    history = pd.read_parquet(out / "metrics.parquet")["mean_score"].tolist()
    first, last = sum(history[:3]) / 3, sum(history[-3:]) / 3
    print(
        f"mean score: first 3 steps {first:.3f}, last 3 steps {last:.3f}; {time.perf_counter() - started:.0f}s; "
        f"curve {[round(h, 2) for h in history]}"
    )
    assert len(history) == cfg.steps
    assert last >= first + 0.5, history
