"""`tsbench eval` end to end: real kernels, real parquet, a real loopback HTTP server (test double)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tsbench import results as schema
from tsbench.core.config import build
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness.prompts import FINAL_TURN_NOTICE
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.testing.fake_openai_server import FakeOpenAIServer

ATTEMPTS = 3


def config(**settings) -> EvalConfig:
    """Flat settings, harness ones included, as a TOML [eval] table would give them."""
    return build(EvalConfig, settings)


def fake(server: FakeOpenAIServer, timeout_s: float = 10.0, **settings) -> EvalConfig:
    return config(model="openai/fake-model", base_url=server.base_url, client_timeout_s=timeout_s,
                  max_attempts=ATTEMPTS, retry_delay_s=0.005, **settings)


@pytest.mark.parametrize("harness", ["single-pass-text", "single-pass-image", "rlm", "rlm-image"])
def test_every_harness_and_regime_with_the_scripted_policy(small_data, tmp_path, harness):
    if harness == "single-pass-image":  # the scripted policy reads text; an image harness refuses it up front
        with pytest.raises(Exception, match="plays"):
            run_eval(config(model="scripted/zscore", harness=harness, data=[str(small_data)], out=str(tmp_path / "x")))
        return
    cfg = config(model="scripted/zscore", harness=harness, data=[str(small_data)], limit=1, concurrency=2, out=str(tmp_path / "run"))
    run_dir = run_eval(cfg)
    samples = pd.read_parquet(run_dir / schema.SAMPLES)
    assert set(samples["category"]) == set(lb.ALL_CATEGORIES)
    assert samples["error_type"].isna().all(), samples["error"].dropna().tolist()
    assert samples["valid"].all() and samples["score"].between(0, 1).all()
    rlm = harness.startswith("rlm")
    assert (samples["turns"] == (2 if rlm else 1)).all()
    assert (samples["code_cells"] == (1 if rlm else 0)).all()
    transcript = json.loads(samples.iloc[0]["transcript"])
    if rlm:
        tool = [e for e in transcript if e["role"] == "tool"][0]
        assert "ZSCORE_SUMMARY" in tool["observation"]
    info = json.loads((run_dir / schema.RUN_JSON).read_text())
    assert info["complete"] and info["expected_samples"] == 11 and info["dataset"]["key"].startswith("anomalyxl/seed42/test/")
    assert "git_commit" in info and info["versions"]["tsbench"]


def test_resume_after_kill_runs_every_id_exactly_once(small_data, tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "tsbench.cli", "eval", "--model", "scripted/zscore", "--harness", "rlm",
           "--data", str(small_data), "--regime", "precise", "--limit", "3", "--concurrency", "1", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    journal = out / schema.JOURNAL
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if journal.exists() and len(journal.read_text().splitlines()) >= 3:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = len(schema.read_journal(out))
    assert 3 <= partial < 15, "the run should have been killed mid-way"
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    samples = pd.read_parquet(out / schema.SAMPLES)
    assert len(samples) == 15 and samples["id"].is_unique
    assert samples["error_type"].isna().all()
    assert json.loads((out / schema.RUN_JSON).read_text())["complete"]
    again = subprocess.run(cmd[:-2] + ["--max-turns", "2", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "different settings" in again.stderr


def test_api_failures_become_error_rows_and_are_rerun_on_resume(small_data, tmp_path):
    with FakeOpenAIServer(default="500") as server:
        cfg = fake(server, harness="single-pass-text", data=[str(small_data)], regime="coarse",
                   categories=[lb.PRESENCE], concurrency=1, out=str(tmp_path / "run"))
        run_dir = run_eval(cfg)
        first = pd.read_parquet(run_dir / schema.SAMPLES)
        assert len(first) == 2 and (first["error_type"] == "server").all() and first["score"].isna().all()
        assert (first["attempts"] == ATTEMPTS).all()
        assert server.request_count == 2 * ATTEMPTS
        assert not json.loads((run_dir / schema.RUN_JSON).read_text())["complete"]
        server.default = 'ok:{"answer": "Yes"}'
        server.push("429")  # one rate limit, retried, then answered
        run_eval(cfg)
    second = pd.read_parquet(run_dir / schema.SAMPLES)
    assert len(second) == 2 and second["error_type"].isna().all()
    gold = second["gold"].map(lambda g: json.loads(g)["answer"])
    assert (second["score"] == (gold == "Yes").astype(float)).all()


def test_timeouts_are_retried_with_a_bound(small_data, tmp_path):
    with FakeOpenAIServer(["sleep:3"], default='ok:{"answer": "No"}') as server:
        cfg = fake(server, timeout_s=0.5, harness="single-pass-text", data=[str(small_data)], regime="coarse",
                   categories=[lb.PRESENCE], limit=1, concurrency=1, out=str(tmp_path / "run"))
        run_dir = run_eval(cfg)
        assert server.request_count == 2
    samples = pd.read_parquet(run_dir / schema.SAMPLES)
    assert samples["error_type"].isna().all()


def test_forced_final_and_observation_truncation(small_data, tmp_path):
    code = 'ok:Looking.\n```python\nprint("x" * 20000)\n```'
    with FakeOpenAIServer(default=code) as server:
        cfg = fake(server, harness="rlm", data=[str(small_data)], regime="precise", categories=[lb.LOCALIZE],
                   limit=1, max_turns=3, concurrency=1, out=str(tmp_path / "run"))
        run_dir = run_eval(cfg)
        last_request = server.bodies[-1]["messages"][-1]["content"]
    row = pd.read_parquet(run_dir / schema.SAMPLES).iloc[0]
    assert row["forced_final"] and row["turns"] == 3 and row["code_cells"] == 2
    assert FINAL_TURN_NOTICE in json.dumps(last_request)
    assert row["score"] == 0.0 and not row["valid"]  # the reply holds no JSON: scored 0, recorded
    tool = [e for e in json.loads(row["transcript"]) if e["role"] == "tool"][0]
    assert len(tool["observation"]) <= 8192 and "truncated" in tool["observation"]


def test_sub_rlm_recursion_counts_sub_calls(small_data, tmp_path):
    script = [
        'ok:```python\nanswer = sub_rlm("Where is the anomaly?")\nprint("SUB:", answer)\n```',
        'ok:The nested agent says {"present": false}',
        'ok:{"present": false}',
    ]
    with FakeOpenAIServer(script) as server:
        cfg = fake(server, harness="rlm", data=[str(small_data)], regime="precise", categories=[lb.LOCALIZE],
                   limit=1, depth=1, concurrency=1, out=str(tmp_path / "run"))
        run_dir = run_eval(cfg)
    row = pd.read_parquet(run_dir / schema.SAMPLES).iloc[0]
    assert pd.isna(row["error_type"]), row["error"]
    assert row["sub_calls"] == 1 and row["sub_call_tokens"] > 0 and row["turns"] == 2
    tool = [e for e in json.loads(row["transcript"]) if e["role"] == "tool"][0]
    assert 'SUB: The nested agent says' in tool["observation"]


@pytest.mark.slow
def test_local_smollm2_under_rlm(small_data, tmp_path):
    cfg = config(model="local/smollm2-135m", harness="rlm", data=[str(small_data)], regime="precise",
                 categories=[lb.LOCALIZE], limit=1, max_turns=2, max_tokens=48, concurrency=1, out=str(tmp_path / "run"))
    run_dir = run_eval(cfg)
    row = pd.read_parquet(run_dir / schema.SAMPLES).iloc[0]
    assert pd.isna(row["error_type"]), row["error"]
    assert row["output_tokens"] > 0 and row["input_tokens"] > 0 and 1 <= row["turns"] <= 2
    assert 0.0 <= row["score"] <= 1.0 and row["final_message"]


def test_ctrl_c_keeps_finished_rows_and_exits_130(small_data, tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "tsbench.cli", "eval", "--model", "scripted/zscore", "--harness", "rlm",
           "--data", str(small_data), "--limit", "2", "--concurrency", "2", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    journal = out / schema.JOURNAL
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (journal.exists() and journal.read_text().count("\n") >= 2):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "resume" in err
    rows = schema.read_journal(out)
    assert 2 <= len(rows) < 22 and all(r["error_type"] is None for r in rows)
