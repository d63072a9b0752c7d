"""Periodic eval during GRPO (issue 25): every `eval_every` steps the current policy plays the held-out
split through the rollout path, and the family scorer's mean reaches metrics.parquet and tensorboard."""

from __future__ import annotations

import pandas as pd
import pytest

from tsbench.core.config import build
from tsbench.core.errors import UserError
from tsbench.tasks.anomalyxl.taskset import AnomalyXL
from tsbench.tasks.base import Scored
from tsbench.testing.tiny import make_small_vocab_llama
from tsbench.train.config import GRPOConfig
from tsbench.train.grpo import build_trainer, train_grpo

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class WordCount(AnomalyXL):
    """AnomalyXL rows scored 1 / (1 + words in the reply): a score every finished episode earns."""

    name = "word-count"

    def score(self, category, gold, message):
        return Scored(score=1.0 / (1 + len(message.split())), valid=True)


def settings(model: str, out, small_data, **extra) -> dict:
    return {
        "model": model,
        "lora": 4,
        "lora_target": "q_proj,v_proj",
        "steps": 2,
        "group_size": 2,
        "batch_size": 2,
        "lr": 1e-3,
        "max_seq_len": 1024,
        "harness": "single-pass-text",
        "max_tokens": 4,
        "answer_cut_replies": True,
        "text_budget_chars": 120,
        "family": f"{__name__}:WordCount",
        "preset": "small",
        "lengths": [1024],
        "categories": ["localize"],
        "save_every": 2,
        "rollout_workers": 2,
        "eval_every": 1,
        "eval_split": "test",
        "eval_data": [str(small_data)],
        "eval_limit": 2,
        "out": str(out),
        **extra,
    }


def test_eval_every_step_logs_the_held_out_mean_score(tmp_path, small_data):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model = f"local/{make_small_vocab_llama(tmp_path / 'small')}"
    run = tmp_path / "run"
    train_grpo(build(GRPOConfig, settings(model, run, small_data, report_to=["tensorboard"])))
    metrics = pd.read_parquet(run / "metrics.parquet")
    assert metrics["step"].tolist() == [1, 2]
    assert metrics["eval_episodes"].tolist() == [2.0, 2.0]  # both held-out rows, every step
    assert metrics["eval_mean_score"].between(0.0, 1.0, inclusive="right").all()  # WordCount: > 0 when answered
    events = EventAccumulator(str(run / "tensorboard")).Reload()
    assert [e.step for e in events.Scalars("eval/mean_score")] == [1, 2]
    assert [e.value for e in events.Scalars("eval/mean_score")] == pytest.approx(metrics["eval_mean_score"].tolist())
    rollouts = pd.read_json(run / "rollouts" / "samples.jsonl", lines=True)
    assert len(rollouts) == 4  # eval episodes are not training rollouts


def test_a_missing_held_out_split_is_one_line_before_the_policy_loads(tmp_path, small_data):
    with pytest.raises(UserError, match="no 'val' split"):
        build_trainer(
            build(GRPOConfig, settings("local/does-not-exist", tmp_path / "run", small_data, eval_split="val"))
        )
