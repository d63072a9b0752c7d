"""A task family that lives in tests/ (tests/families/spike_count.py) runs through `eval`, `score` and
`leaderboard` with no edit to tsbench: the proof that the Taskset seam holds."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tsbench.testing import readiness
from tsbench.testing.fake_openai_server import FakeOpenAIServer

FAMILIES = Path(__file__).parent / "families"
sys.path.insert(0, str(FAMILIES))
from spike_count import FAMILY, write_dataset  # noqa: E402


def tsbench(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(FAMILIES), os.environ.get("PYTHONPATH", "")]))
    return readiness.run([sys.executable, "-m", "tsbench.cli", *args], capture_output=True, text=True, env=env)


def test_a_family_from_outside_the_package_runs_end_to_end(tmp_path):
    data = tmp_path / "spikes"
    write_dataset(data)
    gold = pd.read_parquet(data / "test.parquet")
    answer = '{"count": 2}'
    with FakeOpenAIServer(default=f"ok:I count them. {answer}") as server:
        for harness in ("single-pass-text", "rlm"):
            res = tsbench(
                "eval",
                "--family",
                FAMILY,
                "--model",
                "openai/fake-model",
                "--base-url",
                server.base_url,
                "--harness",
                harness,
                "--data",
                str(data),
                "--max-turns",
                "2",
                "--out",
                str(tmp_path / "runs" / harness),
            )
            assert res.returncode == 0, res.stderr[-2000:]
    for harness in ("single-pass-text", "rlm"):
        samples = pd.read_parquet(tmp_path / "runs" / harness / "samples.parquet")
        assert len(samples) == len(gold) and samples["error_type"].isna().all()
        expected = gold["gold"].map(lambda g: float(json.loads(g)["count"] == 2))
        assert list(samples.sort_values("id")["score"]) == list(expected[gold["id"].argsort()])
        assert (samples["family"] == FAMILY).all() and samples["metrics"].map(lambda m: "abs_err" in dict(m)).all()

    board = tsbench("leaderboard", str(tmp_path / "runs"), "--out", str(tmp_path / "board"))
    assert board.returncode == 0, board.stderr[-2000:]
    md = (tmp_path / "board" / "leaderboard.md").read_text()
    assert "| Model | Harness | Depth | Few (acc) | Many (acc) |" in md  # the family's own columns

    responses = tmp_path / "answers.jsonl"
    responses.write_text("".join(json.dumps({"id": i, "response": g}) + "\n" for i, g in zip(gold["id"], gold["gold"])))
    scored = tsbench(
        "score",
        "--data",
        str(data / "test.parquet"),
        "--responses",
        str(responses),
        "--out",
        str(tmp_path / "scores.parquet"),
    )
    assert scored.returncode == 0, scored.stderr[-2000:]
    assert (pd.read_parquet(tmp_path / "scores.parquet")["score"] == 1.0).all()


def test_describe_and_plot_go_through_the_familys_defaults(tmp_path):
    data = tmp_path / "spikes"
    write_dataset(data)
    described = tsbench("describe", str(data))
    assert described.returncode == 0, described.stderr[-2000:]
    assert "test.parquet: 12" in described.stdout  # the title (rich may wrap it)
    assert re.search(r"few\s*│\s*6\s*│", described.stdout) and re.search(r"many\s*│\s*6\s*│", described.stdout)
    png = tmp_path / "few.png"
    plotted = tsbench("describe", str(data), "--plot", "few-01", "--out", str(png))
    assert plotted.returncode == 0, plotted.stderr[-2000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    missing = tsbench("describe", str(data), "--plot", "no-such-row")
    assert missing.returncode == 2 and "no row with id 'no-such-row'" in missing.stderr


def test_one_cpu_train_grpo_step_on_its_train_split(tmp_path):
    """A LoRA step as experiments/grpo/cpu_smoke.toml takes it, shrunk to one step of 2 rollouts of a tiny
    Llama (SmolLM2's steps are covered in test_train_grpo.py): the tasks are the family's train rows, the
    reward its scorer, both found through the seam."""
    from tsbench.testing.tiny import make_small_vocab_llama

    data = tmp_path / "spikes"
    write_dataset(data, split="train")
    run = tmp_path / "grpo"
    tiny = make_small_vocab_llama(tmp_path / "tiny")
    res = tsbench(
        "train-grpo",
        "--model",
        f"local/{tiny}",
        "--lora",
        "4",
        "--lora-target",
        "q_proj,v_proj",
        "--family",
        FAMILY,
        "--data",
        str(data),
        "--steps",
        "1",
        "--group-size",
        "2",
        "--batch-size",
        "2",
        "--harness",
        "single-pass-text",
        "--max-tokens",
        "8",
        "--max-seq-len",
        "1024",
        "--text-budget-chars",  # the default 200k characters: a 1598-token prompt, refused at load (train/budget.py)
        "400",
        "--rollout-workers",
        "2",
        "--out",
        str(run),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    rollouts = pd.read_json(run / "rollouts" / "samples.jsonl", lines=True)
    train_ids = set(pd.read_parquet(data / "train.parquet")["id"])
    assert len(rollouts) == 2 and rollouts["id"].nunique() == 1 and set(rollouts["id"]) <= train_ids
    assert (rollouts["family"] == "spike_count").all() and (rollouts["split"] == "train").all()
    assert rollouts["metrics"].map(lambda m: "train_score" in m).all()
    metrics = pd.read_parquet(run / "metrics.parquet")
    assert metrics["step"].tolist() == [1] and metrics["epoch"].tolist() == [0.0]
    assert (run / "final" / "adapter_config.json").is_file()

    refused = tsbench(
        "train-grpo",
        "--model",
        "local/smollm2-135m",
        "--family",
        FAMILY,
        "--data",
        str(data),
        "--preset",
        "small",
        "--out",
        str(tmp_path / "refused"),
    )
    assert refused.returncode == 2 and "--preset" in refused.stderr and refused.stderr.strip().count("\n") == 0


def test_its_training_stream_is_shuffled_epochs_of_its_train_split(tmp_path):
    """TaskFamily's default stream: each epoch every train row once, a new seeded order each epoch."""
    from tsbench.core.errors import UserError
    from tsbench.tasks import get_taskset
    from tsbench.tasks.base import TrainingRequest

    data = tmp_path / "spikes"
    write_dataset(data, split="train")
    family = get_taskset(FAMILY)

    def drawn(seed: int, **extra) -> list[str]:
        stream = family.training_stream(
            TrainingRequest(seed=seed, steps=6, tasks_per_step=4, data=(str(data),), **extra)
        )
        return [stream.sample(s, j).ref.id for s in range(1, 7) for j in range(4)]

    first, rows = drawn(0), sorted(pd.read_parquet(data / "train.parquet")["id"])
    assert sorted(first[:12]) == rows and sorted(first[12:]) == rows and first[:12] != first[12:]
    assert drawn(0) == first and drawn(1) != first
    assert set(drawn(0, categories=("many",))) == {r for r in rows if "many" in r}
    with pytest.raises(UserError, match="no training rows of categories"):
        drawn(0, categories=("lots",))
