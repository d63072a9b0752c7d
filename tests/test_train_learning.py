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


# -- multi-turn, penalties on ----------------------------------------------------------------------
# Learning through the rlm harness does not fit in ~90 s on 2 cores (every episode starts a jailed
# kernel), so this test checks what one real step hands TRL's loss: the env mask covers exactly the
# model's replies across turns, and the advantages carry the penalised reward.
CODE = "```python\nprint(1)\n```"  # one token of the tiny vocabulary: a whole code cell, so turn 2 follows
LAMBDA_TOK, LAMBDA_FAIL, GROUP = 0.1, 0.25, 4


class CountsG(AnomalyXL):
    """AnomalyXL's tasks scored by the share of "g" among the final answer's words."""

    name = "counts-g"

    def score(self, category, gold, message):
        words = message.split()
        return Scored(score=words.count(TARGET) / REPLY_TOKENS, valid=True)


def test_rlm_two_turn_step_masks_observations_and_applies_penalties(tmp_path):
    import torch

    from tsbench.train.grpo import build_trainer

    model_dir = make_small_vocab_llama(tmp_path / "tiny", words=("g", "h", CODE), seed=3)
    cfg = build(
        GRPOConfig,
        {
            "model": f"local/{model_dir}",
            "lora": 0,
            "steps": 1,
            "group_size": GROUP,
            "batch_size": 2 * GROUP,
            "micro_batch_size": 8,
            "lr": 1e-3,
            "max_seq_len": 2048,
            "harness": "rlm",
            "max_turns": 2,
            "max_tokens": REPLY_TOKENS,
            "answer_cut_replies": True,
            "family": f"{__name__}:CountsG",
            "preset": "small",
            "lengths": [256],
            "categories": ["localize"],
            "lambda_tok": LAMBDA_TOK,
            "lambda_fail": LAMBDA_FAIL,
            "gradient_checkpointing": False,
            "rollout_workers": 8,
            "save_every": 100,
            "out": str(tmp_path / "run"),
        },
    )
    run = build_trainer(cfg)
    tok = run.trainer.processing_class
    seen: list[dict] = []
    generate = run.trainer._generate_and_score_completions

    def keep(batch):  # what the loss will read, before TRL shuffles it
        output = generate(batch)
        seen.append({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in output.items()})
        return output

    run.trainer._generate_and_score_completions = keep
    run.trainer.train()
    out = seen[0]
    rows = pd.read_json(run.out / "rollouts" / "samples.jsonl", lines=True).to_dict("records")
    assert len(rows) == 2 * GROUP and len(out["completion_ids"]) == 2 * GROUP
    code_id = tok.convert_tokens_to_ids(CODE)

    # rewards: R = s - lambda_tok * s * T / max T (over the group) - lambda_fail * [forced], advantage R - mean
    expected = []
    for start in range(0, len(rows), GROUP):
        group = rows[start : start + GROUP]
        most = max(r["output_tokens"] for r in group)
        rewards = [
            r["score"] - LAMBDA_TOK * r["score"] * r["output_tokens"] / most - LAMBDA_FAIL * r["forced_final"]
            for r in group
        ]
        flat = max(rewards) - min(rewards) < 1e-12
        expected += [0.0 if flat else x - sum(rewards) / GROUP for x in rewards]
    assert out["advantages"].tolist() == pytest.approx(expected, abs=1e-5)

    two_turn = kept = 0
    for i, row in enumerate(rows):
        ids = out["completion_ids"][i].tolist()
        valid = out["completion_mask"][i].tolist()
        env = out["tool_mask"][i].tolist()
        model_tokens = [t for t, v, m in zip(ids, valid, env) if v and m]
        other = tok.decode([t for t, v, m in zip(ids, valid, env) if v and not m])
        dropped = row["metrics"].get("dropped", 0.0) == 1.0
        if dropped:
            assert not any(env[: sum(valid)])  # a zero-variance group leaves the loss
            continue
        kept += 1
        assert len(model_tokens) == row["output_tokens"]  # every reply, all turns, nothing else
        if row["turns"] == 2:
            two_turn += 1
            assert row["forced_final"] and code_id in model_tokens
            assert "user" in other and "```" not in other  # the observation + FINAL notice: masked out
    print(f"advantages {[round(a, 3) for a in expected]}; trained on {kept} episodes, {two_turn} of two turns")
    assert kept >= GROUP and two_turn >= 1, (kept, two_turn)
