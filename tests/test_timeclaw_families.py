"""TSRBench and TSAIA read from files the tests write in the published layouts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tsbench.core.errors import UserError
from tsbench.tasks import get_taskset
from tsbench.tasks.base import SampleRef
from tsbench.tasks.tsrbench import reader as tsr

FILES = {
    "perception/perception.jsonl": [
        "Pattern Recognition",
        "Noise Understanding",
        "Anomaly Detection",
        "Similarity Analysis",
    ],
    "prediction/event_prediction.jsonl": [None],
    "prediction/time_series_forecasting.jsonl": [None],
    "decision/qualitative_decision.jsonl": [None],
    "decision/quantitative_decision.jsonl": [None],
    "reasoning/abductive_reasoning.jsonl": [None],
    "reasoning/causal_reasoning.jsonl": [None],
    "reasoning/deductive_reasoning.jsonl": [None],
    "reasoning/etiological_reasoning.jsonl": [None],
    "reasoning/inductive_reasoning.jsonl": [None],
    "reasoning/numerical_reasoning.jsonl": [None],
    "reasoning/temporal_relation_reasoning.jsonl": [None],
}


def tsr_record(file: str, task: str | None, index: int) -> dict:
    rng = np.random.default_rng(index)
    record = {
        "question": f"Which pattern does the series show? ({index})",
        "choices": ["rising trend", "falling trend", "no trend"],
        "answer": "B) falling trend" if index % 2 else "A",
        "domain": "Energy",
        "task": task or Path(file).stem,
        "type": "MCQ",
        "name_of_series": ["load", "price"],
        "timeseries": rng.normal(size=(2, 30)).round(3).tolist(),
    }
    if "temporal_relation" in file:
        stamps = [str(t) for t in pd.date_range("2024-01-01", periods=30, freq="D")]
        record["timeseries"] = [stamps, record["timeseries"][0]]
        record["name_of_series"] = ["load"]
    if "abductive" in file:
        nested = {k: record.pop(k) for k in ("question", "choices", "answer")}
        record["multiple_choice_question"] = nested
        record.pop("timeseries")
        record["numerical_time_series"] = {"flow": {"history": [1.0, 2.0, 3.0], "future": [4.0, 5.0]}}
    return record


@pytest.fixture(scope="module")
def tsrbench_release(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tsrbench")
    for file, tasks in FILES.items():
        path = root / file
        path.parent.mkdir(parents=True, exist_ok=True)
        records = [tsr_record(file, task, i) for task in tasks for i in range(5)]
        path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return root


def test_tsrbench_reads_fifteen_subtasks_and_splits_a_stratified_fifth(tsrbench_release, tmp_path):
    items = tsr.read_items(tsrbench_release)
    assert sorted({i.subtask for i in items}) == sorted(tsr.SUBTASKS) and len(tsr.SUBTASKS) == 15
    abductive = next(i for i in items if i.subtask == "abductive_reasoning")
    assert abductive.channel_names == ["flow.history", "flow.future"] and np.isnan(abductive.values[1, 2])
    relation = next(i for i in items if i.subtask == "temporal_relation_reasoning")
    assert relation.channel_names == ["load"] and len(relation.times) == 30
    train, test = tsr.stratified_split(items)
    assert len(test) == 15 and all(sum(i.subtask == s for i in test) == 1 for s in tsr.SUBTASKS)  # 20 % of 5

    family = get_taskset("tsrbench")
    manifest, _ = family.generate({"path": str(tsrbench_release), "seed": 7}, tmp_path)
    files = family.resolve([str(manifest.parent)], seed=7, split="test", root=None, filters={})
    rows = family.index(files, {})
    assert set(rows["category"]) == set(tsr.SUBTASKS)
    row = rows[rows["category"] == "temporal_relation_reasoning"].iloc[0]
    sample = family.load(SampleRef("tsrbench", str(files[0]), str(row["id"])))
    assert "A) rising trend" in sample.task.question and len(sample.task.meta["time_s"]) == 30
    assert sample.task.meta["memory_descriptor"].startswith("temporal_relation_reasoning\nEnergy")
    gold = sample.gold
    right = family.score(row["category"], gold, json.dumps({"answer": gold["answer"]}))
    wrong = family.score(row["category"], gold, '{"answer": "C"}')
    assert right.score == 1.0 and wrong.score == 0.0 and wrong.valid
    assert not family.score(row["category"], gold, '{"answer": "Z"}').valid
    assert [c.group for c in family.columns()].count("Reasoning") == 7


def test_tsrbench_refuses_a_missing_path(tmp_path):
    with pytest.raises(UserError, match="umd-zhou-lab/TSRBench"):
        get_taskset("tsrbench").generate({"path": str(tmp_path / "nope")}, tmp_path)


# ---------------------------------------------------------------------------------------- TSAIA --


@pytest.fixture(scope="module")
def tsaia_release(tmp_path_factory) -> Path:
    import csv

    root = tmp_path_factory.mktemp("tsaia")
    prices = [round(100 + i + (i % 3), 2) for i in range(20)]
    mc = [
        {
            "question_id": str(i),
            "question_type": "MarketAB-beta",
            "prompt": "Is the stock more or less sensitive to the market than the index itself?",
            "data_info": f"Stock close prices: {prices}; index: {[p * 0.5 for p in prices]}",
            "options": json.dumps(["more sensitive", "less sensitive"]),
            "answer": "A",
            "executor_variables": "mc/variables.pkl",  # a pickle: never opened
        }
        for i in range(4)
    ]
    analysis = [
        {
            "question_id": "a1",
            "question_type": "stock_rv_estimation-sharpe",
            "prompt": "Compute the Sharpe ratio of the stock.",
            "data_str": f"prices {prices}",
            "constraint": "A single number.",
            "ground_truth_data": "1.25",
            "executor_variables": "",
        },
        {
            "question_id": "a2",
            "question_type": "stock_rv_estimation-sharpe",
            "prompt": "Compute the Sharpe ratio of the stock.",
            "data_str": f"prices {prices[::-1]}",
            "constraint": "A single number.",
            "ground_truth_data": "truth/a2.json",
            "executor_variables": "",
        },
        {
            "question_id": "a3",
            "question_type": "stock_rv_estimation-sharpe",
            "prompt": "no data here",
            "data_str": "nothing inline",
            "constraint": "",
            "ground_truth_data": "x.pkl",
            "executor_variables": "",
        },
    ]
    (root / "truth").mkdir()
    (root / "truth" / "a2.json").write_text("-0.5")
    for name, rows in (("multiple_choice.csv", mc), ("analysis_questions.csv", analysis)):
        with (root / name).open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return root


def test_tsaia_reads_both_csvs_and_checks_answers(tsaia_release, tmp_path):
    from tsbench.tasks.tsaia import reader as tsaia_reader
    from tsbench.tasks.tsaia.checkers import match

    items, skipped = tsaia_reader.read_items(tsaia_release)
    assert skipped == 1 and len(items) == 6  # the item with no inline data and a pickle truth is skipped
    beta = next(i for i in items if i.kind == "mc")
    assert beta.channel_names == ["series_0", "series_1"] and beta.values.shape == (2, 20)
    assert beta.options == ["more sensitive", "less sensitive"] and beta.answer == "A"
    assert {i.answer for i in items if i.kind == "analysis"} == {1.25, -0.5}

    family = get_taskset("tsaia")
    manifest, _ = family.generate({"path": str(tsaia_release), "seed": 2}, tmp_path)
    [test_file] = family.resolve([str(manifest.parent)], seed=2, split="test", root=None, filters={})
    rows = family.index([test_file], {})
    assert set(rows["category"]) == {"MarketAB-beta", "stock_rv_estimation-sharpe"}
    mc_row = rows[rows["regime"] == "mc"].iloc[0]
    sample = family.load(SampleRef("tsaia", str(test_file), str(mc_row["id"])))
    assert "A) more sensitive" in sample.task.question
    assert sample.task.meta["memory_descriptor"].startswith("MarketAB-beta\nIs the stock")
    assert family.score("MarketAB-beta", sample.gold, '{"answer": "A"}').score == 1.0
    assert family.score("MarketAB-beta", sample.gold, '{"answer": "B"}').score == 0.0
    truth = sample.gold
    assert not family.score("MarketAB-beta", truth, '{"answer": "E"}').valid
    assert match(1.25, 1.3) == (1.0, True) and match(1.25, 1.4) == (0.0, True) and match(1.25, "x") == (0.0, False)
    assert match([1.0, 3.0], [1.0, 1.0])[0] == pytest.approx(1 - 0.5 / 2)
    assert match({"alpha": 0.1, "beta": 1.2}, {"alpha": 0.1, "beta": 2.0}) == (0.5, True)
