"""TSAIA read from files the tests write in the published layouts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tsbench.tasks import get_taskset
from tsbench.tasks.base import SampleRef

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
