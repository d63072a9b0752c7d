"""GRPO through two-turn rlm episodes, end to end through TRL: code run in a jailed kernel, the observation
masked, both penalties on; the first step is checked against TRL's loss inputs. (What it learns is the
penalties' lesson; learning the task itself, from what the environment returns, is
tests/test_train_uses_the_environment.py.)

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

TARGET, REPLY_TOKENS = "g", 3
LAMBDA_TOK, LAMBDA_FAIL = 0.1, 0.25  # the reward's token and forced-final penalties, on in both tests


class SaysG(AnomalyXL):
    """AnomalyXL's tasks, scored by the share of the reply's words that are "g" (a learnable reward)."""

    name = "says-g"

    def score(self, category, gold, message):
        words = message.split()
        return Scored(score=words.count(TARGET) / REPLY_TOKENS, valid=bool(words))


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# -- multi-turn, penalties on ----------------------------------------------------------------------
CODE = "```python\nprint(1)\n```"  # one token of the tiny vocabulary: a whole code cell, so turn 2 follows
GROUP, STEPS = 8, 6


class CountsG(AnomalyXL):
    """AnomalyXL's tasks scored by the share of "g" among the final answer's words."""

    name = "counts-g"

    def score(self, category, gold, message):
        words = message.split()
        return Scored(score=words.count(TARGET) / REPLY_TOKENS, valid=True)


def test_rlm_policy_learns_through_two_turn_episodes_with_the_penalties_on(tmp_path):
    """GRPO learns through the rlm harness. A reply holding the code token runs a cell in a jailed kernel
    (a warm JailPool boots the jails ahead, off the critical path); with max_turns 2 the next reply is the
    forced final answer, so a two-turn episode pays lambda_fail, and every scored answer pays lambda_tok. The
    policy must learn both what to answer ("g") and not to spend a turn on code it does not need: the mean
    reward rises and the forced-final rate falls to (near) zero.

    Step 1 is also checked against what TRL's loss reads: the env mask covers exactly the model's replies
    across turns (the observation and FINAL notice between them are masked out), and the advantages are the
    penalised rewards minus their group mean (Dr. GRPO). The kernels run in the real jail; a learning test
    needs none of its guarantees, it runs there because that is the path training takes (no non-jailed
    runtime plays rlm episodes in training: harness/runtime/unsafe.py is the weaker jail, bare.py a
    benchmark floor).

    The answer does not need the code's output: a copy task (turn 1 prints a per-task word, turn 2 must
    repeat it) did not learn in the few hundred episodes a test can afford (measured: the policy learned to
    answer in one turn and guess)."""
    import torch

    from tsbench.harness.runtime.pool import JailPool, use_pool
    from tsbench.train.grpo import build_trainer

    model_dir = make_small_vocab_llama(tmp_path / "tiny", words=("g", "h", CODE), seed=3)
    cfg = build(
        GRPOConfig,
        {
            "model": f"local/{model_dir}",
            "lora": 0,
            "steps": STEPS,
            "group_size": GROUP,
            "batch_size": GROUP,
            "micro_batch_size": 8,
            "lr": 2e-2,
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
            "rollout_workers": GROUP,
            "save_every": 100,
            "out": str(tmp_path / "run"),
        },
    )
    started = time.perf_counter()
    # one boot per episode plus the context probe's: no jail is booted that no episode takes
    with JailPool(size=GROUP, budget=STEPS * GROUP + 1) as pool, use_pool(pool):
        run = build_trainer(cfg)
        seen: list[dict] = []
        generate = run.trainer._generate_and_score_completions

        def keep(batch):  # what the loss will read, before TRL shuffles it (step 1 only)
            output = generate(batch)
            if not seen:
                seen.append({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in output.items()})
            return output

        run.trainer._generate_and_score_completions = keep
        run.trainer.train()
    seconds = time.perf_counter() - started
    metrics = pd.read_parquet(run.out / "metrics.parquet")
    rows = pd.read_json(run.out / "rollouts" / "samples.jsonl", lines=True).to_dict("records")
    reward, forced = metrics["mean_reward"].tolist(), metrics["forced_final_rate"].tolist()
    print(
        f"{seconds:.0f}s; mean reward {[round(r, 3) for r in reward]}; forced-final rate "
        f"{[round(f, 3) for f in forced]}; score {[round(s, 3) for s in metrics['mean_score']]}"
    )
    assert len(reward) == STEPS and len(rows) == STEPS * GROUP
    check_first_step(seen[0], rows[:GROUP], run.trainer.processing_class)
    first, last = sum(reward[:2]) / 2, sum(reward[-2:]) / 2
    assert last >= first + 0.3, reward  # measured: -0.019 -> 0.544
    assert sum(forced[:2]) / 2 >= 0.125 and sum(forced[-2:]) / 2 <= 0.0625, forced  # two-turn at first, then not


def check_first_step(out: dict, rows: list[dict], tok) -> None:
    """Step 1's batch as TRL's loss reads it, against the journal's rows of the same episodes."""
    assert len(out["completion_ids"]) == len(rows) == GROUP
    # rewards: R = s - lambda_tok * s * T / max T (over the group) - lambda_fail * [forced], advantage R - mean
    most = max(r["output_tokens"] for r in rows)
    rewards = [
        r["score"] - LAMBDA_TOK * r["score"] * r["output_tokens"] / most - LAMBDA_FAIL * r["forced_final"] for r in rows
    ]
    assert max(rewards) - min(rewards) > 1e-12  # the group carries signal: nothing is dropped
    assert out["advantages"].tolist() == pytest.approx([x - sum(rewards) / GROUP for x in rewards], abs=1e-5)
    code_id = tok.convert_tokens_to_ids(CODE)
    two_turn = 0
    for i, row in enumerate(rows):
        ids = out["completion_ids"][i].tolist()
        valid = out["completion_mask"][i].tolist()
        env = out["tool_mask"][i].tolist()
        model_tokens = [t for t, v, m in zip(ids, valid, env) if v and m]
        other = tok.decode([t for t, v, m in zip(ids, valid, env) if v and not m])
        assert len(model_tokens) == row["output_tokens"]  # every reply, all turns, nothing else
        if row["turns"] == 2:
            two_turn += 1
            assert row["forced_final"] and code_id in model_tokens
            assert "user" in other and "```" not in other  # the observation + FINAL notice: masked out
    assert two_turn >= 1, two_turn
