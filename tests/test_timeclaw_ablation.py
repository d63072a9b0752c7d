"""The ablation board on a tiny offline CiK set: a scripted forecaster under tools only, + memory
(k = 0, 1, 3, 5), + evolution, full and w/o tools (memory without the tool harness); memory lowers
RCRPS only because the bank's rationale (written by a scripted model shown the correct answer) tells
the forecaster how the context moves the series."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from tsbench.core.config import build
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.leaderboard.ablation import ablation_board, render_board, setting_of
from tsbench.models.base import Completion
from tsbench.tasks.cik.taskset import CiK
from tsbench.timeclaw import build_memory

TASKS = {  # name: (context tag, history level, target level)
    "ElectricityIncreaseInPredictionTask": ("c_f", 10.0, 15.0),
    "SensorMaintenanceInPredictionTask": ("c_i", 20.0, 17.0),
}
FORECAST_TOOL = '''def forecast_last_value() -> dict:
    """Samples that repeat the target channel's last value over the horizon.
    """
    x = series[TASK["meta"]["target_channel"]]
    return {"samples": [[float(x[-1])] * int(TASK["meta"]["horizon"])] * 3}
'''


@pytest.fixture(scope="module", autouse=True)
def _no_background_stumpy_compile():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TSBENCH_STUMPY_WARMUP", "0")
        yield


def record(name: str, seed: int) -> dict:
    tag, level, target = TASKS[name]
    index = pd.date_range("2024-03-01", periods=24, freq="h")
    future = pd.date_range("2024-03-02", periods=4, freq="h")
    history = level + np.random.default_rng([seed, len(name)]).normal(0, 0.05, 24).round(3)
    return {
        "name": name,
        "seed": seed,
        "weight": "1/4",
        "context_sources": [tag],
        "background": f"{name}: an hourly sensor.",
        "scenario": "Something happens at the first forecast hour.",
        "constraints": "",
        "past_time": pd.DataFrame({"y": history}, index=index).to_json(),
        "future_time": pd.DataFrame({"y": [target] * 4}, index=future).to_json(),
        "metric_scaling": 1 / 5,
        "region_of_interest": [0, 1],
        "constraint_min": 0.0,
        "constraint_max": None,
    }


class RationaleWriter:
    """A scripted bank-building model: shown the correct answer, it states the shift from the last value."""

    name = "scripted/rationale-writer"

    def generate(self, messages, *, max_tokens=None, temperature=None, task=None):
        prompt = messages[-1].content
        answer = json.loads(prompt.split("Correct answer:", 1)[1])["forecast"]
        last = float(re.findall(r"\(([^)]*)\)", prompt.split("</history>")[0])[-1].split(",")[-1])
        return Completion(f"<context_to_action>The context implies: lift the forecast by {answer[0] - last:.0f}.")

    def close(self):
        pass


def run(data, out, name, harness="tools", **extra):
    cfg = build(
        EvalConfig,
        {
            "family": "cik",
            "model": "scripted-cik/persistence",
            "harness": harness,
            "data": [str(data)],
            "split": extra.pop("split", "test"),
            "out": str(out / name),
            "concurrency": 2,
            **extra,
        },
    )
    return run_eval(cfg)


@pytest.mark.slow
def test_ablation_board_on_a_tiny_cik_set(tmp_path):
    source = tmp_path / "published"
    source.mkdir()
    lines = [json.dumps(record(name, seed)) for name in TASKS for seed in range(4)]
    (source / "all_tasks.json").write_text("\n".join(lines) + "\n")
    CiK().generate({"path": str(source), "seed": 5}, tmp_path / "cik")
    data = tmp_path / "cik" / "seed5"
    train = run(data, tmp_path, "train", harness="single-pass-text", split="train")
    bank = build_memory(train, out=tmp_path / "bank.parquet", embedder="none", rationale_model=RationaleWriter())
    tools = tmp_path / "evolved" / "forecast_last_value"
    tools.mkdir(parents=True)
    (tools / "tool.py").write_text(FORECAST_TOOL)
    runs = [run(data, tmp_path, "tools-only")]
    runs += [
        run(data, tmp_path, f"memory-k{k}", memory_bank=str(bank), top_k=k, memory_family_filter=True)
        for k in (0, 1, 3, 5)
    ]
    runs += [run(data, tmp_path, "evolution", tools_dir=str(tools.parent))]
    runs += [
        run(
            data,
            tmp_path,
            "wo-tools",
            harness="single-pass-text",
            memory_bank=str(bank),
            top_k=3,
            memory_family_filter=True,
        )
    ]
    runs += [
        run(
            data,
            tmp_path,
            "full",
            tools_dir=str(tools.parent),
            memory_bank=str(bank),
            top_k=3,
            memory_family_filter=True,
        )
    ]
    board = ablation_board(runs)
    print("\n" + render_board(board))
    by = {s: r for s, r in zip(board["setting"], board.to_dict("records"))}
    assert list(board["setting"]) == [
        "w/o tools",
        "tools only",
        "+ memory (k=1)",
        "+ memory (k=3)",
        "+ memory (k=5)",
        "+ evolution",
        "full",
    ]
    assert list(board["paper"]) == [
        "w/o tools (k = 3)",
        "k = 0",
        "k = 1",
        "k = 3; w/o evolution",
        "k = 5",
        "w/o memory",
        "TimeClaw",
    ]
    assert by["tools only"]["rows"] == 8  # tools only and k = 0 are one setting
    assert by["w/o tools"]["rcrps"] < 0.05  # memory without the tool harness: never labelled "+ memory"
    # CiK's aggregate: the instances' weights (1/4 each here) and the cap; sMAPE in percent
    assert by["tools only"]["smape"] > 5 and by["tools only"]["unusable"] == 0
    assert by["+ memory (k=1)"]["rcrps"] < 0.05 < by["tools only"]["rcrps"]  # memory carries the rule
    assert by["+ evolution"]["rcrps"] == pytest.approx(by["tools only"]["rcrps"], rel=0.05)  # a persistence tool
    assert by["full"]["rcrps"] < 0.05
    assert {"rcrps_future", "rcrps_intemporal"} <= set(board.columns)
    assert by["+ memory (k=3)"]["tokens_per_row"] > by["tools only"]["tokens_per_row"]  # precedents cost tokens


def test_setting_of_reads_the_run_config():
    """The run's harness capabilities (run.json) say whether it played with tools; its config the rest."""
    assert setting_of({"harness": "single-pass-text"}, tools=False) == ("no tools", 0)
    memory = {"memory_bank": "b", "top_k": 3}
    assert setting_of({"harness": "single-pass-text", "memory": memory}, tools=False) == ("w/o tools", 3)
    without = {"harness": "single-pass-image", "memory": memory, "tools": {"tools_dir": "t"}}
    assert setting_of(without, tools=False) == ("w/o tools", 3)
    assert setting_of({"harness": "tools", "memory": {"memory_bank": "b", "top_k": 0}}, tools=True) == ("tools only", 0)
    assert setting_of({"harness": "tools", "memory": {"memory_bank": "b", "top_k": 5}}, tools=True) == ("+ memory", 5)
    full = {"harness": "tools", "tools": {"tools_dir": "t"}, "memory": {"memory_bank": "b", "top_k": 3}}
    assert setting_of(full, tools=True) == ("full", 3)
    assert setting_of({"harness": "my-tool-loop", "tools_dir": "t"}, tools=True) == ("+ evolution", 0)
