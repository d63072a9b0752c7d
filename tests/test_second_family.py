"""A task family that lives in tests/ (tests/families/spike_count.py) runs through `eval`, `score` and
`leaderboard` with no edit to tsbench: the proof that the Taskset seam holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tsbench.testing.fake_openai_server import FakeOpenAIServer

FAMILIES = Path(__file__).parent / "families"
sys.path.insert(0, str(FAMILIES))
from spike_count import FAMILY, write_dataset  # noqa: E402


def tsbench(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(FAMILIES), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "tsbench.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_a_family_from_outside_the_package_runs_end_to_end(tmp_path):
    data = tmp_path / "spikes"
    write_dataset(data)
    gold = pd.read_parquet(data / "test.parquet")
    answer = '{"count": 2}'
    with FakeOpenAIServer(default=f"ok:I count them. {answer}") as server:
        for harness in ("single-pass-text", "rlm"):
            res = tsbench("eval", "--family", FAMILY, "--model", "openai/fake-model", "--base-url", server.base_url,
                          "--harness", harness, "--data", str(data), "--max-turns", "2", "--out",
                          str(tmp_path / "runs" / harness))
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
    scored = tsbench("score", "--data", str(data / "test.parquet"), "--responses", str(responses), "--out",
                     str(tmp_path / "scores.parquet"))
    assert scored.returncode == 0, scored.stderr[-2000:]
    assert (pd.read_parquet(tmp_path / "scores.parquet")["score"] == 1.0).all()
