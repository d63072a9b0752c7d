"""GRPO learns the task, not a format: a tiny random policy learns to use what a tool returns.

The family tests/families/peek.py hides one of four values in each row; only its harness's tool tells
which (`peek returned v2`), and the question never does. So no policy can beat 1 in 4 without reading
the tool's observation, and the score is the task's alone (no format term, no token or forced-final
penalty: both lambdas are 0). A 2-layer Llama with a word-level vocabulary trains through TRL with our
rollouts and plays the harness as a plugin (a `harness.peek` entry point, as an outside package adds
one). Held-out rows (the val split, values drawn apart from training's) are played greedily every 10
steps (periodic eval): that curve is what is asserted."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tsbench.core.config import build
from tsbench.core.registry import plugin_targets
from tsbench.harness import HARNESSES, get_harness
from tsbench.testing.tiny import make_small_vocab_llama
from tsbench.train.config import GRPOConfig
from tsbench.train.grpo import train_grpo

FAMILIES = Path(__file__).parent / "families"
STEPS, EVAL_EVERY = 40, 10

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def peek_plugin(tmp_path, monkeypatch):
    """The peek family and harness importable, the harness registered through a `tsbench.plugins` entry point."""
    site = tmp_path / "site"
    info = site / "tsb_peek-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tsb-peek\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text('[tsbench.plugins]\nharness.peek = "peek:run_peek"\n'.replace('"', ""))
    monkeypatch.syspath_prepend(str(FAMILIES))
    monkeypatch.syspath_prepend(str(site))
    plugin_targets.cache_clear()
    HARNESSES._found = None
    get_harness.cache_clear()
    yield sys.modules.get("peek") or __import__("peek")
    plugin_targets.cache_clear()
    HARNESSES._found = None
    get_harness.cache_clear()


def test_a_tiny_policy_learns_to_answer_with_what_the_tool_returned(tmp_path, peek_plugin):
    data = tmp_path / "peek"
    peek_plugin.write_dataset(data, rows=256, seed=0, split="train")
    peek_plugin.write_dataset(data, rows=48, seed=0, split="val")
    model_dir = make_small_vocab_llama(tmp_path / "tiny", words=(*peek_plugin.VALUES, "peek", "returned"), seed=1)
    cfg = build(
        GRPOConfig,
        {
            "model": f"local/{model_dir}",
            "lora": 0,
            "max_steps": STEPS,
            "group_size": 8,
            "batch_size": 64,
            "micro_batch_size": 64,
            "learning_rate": 1e-2,
            "max_seq_len": 256,
            "family": "peek:Peek",
            "data": [str(data)],
            "harness": "peek",
            "max_turns": 2,
            "max_tokens": 1,
            "answer_cut_replies": True,
            "lambda_tok": 0.0,  # the task's score alone: no penalty to learn instead
            "lambda_fail": 0.0,
            "scale_rewards": "group",
            "entropy_coef": 0.05,  # a TRL option, from the [grpo] table: without it a seed may collapse on one value
            "gradient_checkpointing": False,
            "rollout_workers": 64,
            "eval_every": EVAL_EVERY,
            "eval_limit": 48,
            "save_steps": 1000,
            "log_rollouts": False,
            "out": str(tmp_path / "run"),
        },
    )
    started = time.perf_counter()
    metrics = pd.read_parquet(train_grpo(cfg) / "metrics.parquet")
    train_curve = [round(v, 2) for v in metrics["mean_score"]]
    held_out = metrics.dropna(subset=["eval_mean_score"])[["step", "eval_mean_score", "eval_forced_final_rate"]]
    print(
        f"{time.perf_counter() - started:.0f}s; train score per step {train_curve}; held-out (48 val rows, greedy) "
        f"{[(int(s), round(v, 3)) for s, v in zip(held_out['step'], held_out['eval_mean_score'])]}"
    )
    gold = pd.read_parquet(data / "val.parquet")["gold"].value_counts(normalize=True)
    assert gold.max() <= 0.4  # no answer that ignores the tool (one value for every row) passes the bar below
    assert list(held_out["step"]) == list(range(EVAL_EVERY, STEPS + 1, EVAL_EVERY))
    assert held_out["eval_mean_score"].iloc[-1] >= 0.8  # ignoring the tool caps a policy at 1 in 4 (by design)
    assert sum(train_curve[-5:]) / 5 >= sum(train_curve[:5]) / 5 + 0.4
