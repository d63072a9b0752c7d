"""ARFBench from a release-layout folder this test writes (arfbench-qa.csv + arfbench-data/*.parquet):
Tier 2 selection, series alignment, answer classes, the MCQ rule and gold scoring 1."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tsbench.core.stats import macro_f1
from tsbench.tasks import get_taskset
from tsbench.tasks.arfbench import classes
from tsbench.tasks.base import SampleRef

T0 = pd.Timestamp("2025-03-01 00:00:00", tz="UTC")
STAMPS = [str(T0 + pd.Timedelta(minutes=m))[:19] for m in (10, 20, 30)]


def write_release(folder: Path) -> None:
    data = folder / "arfbench-data"
    data.mkdir(parents=True)
    for group, shift in (("1001_0", 0), ("1001_1", 5), ("1002_0", 0)):
        for interval, n in ((10, 2000), (60, 400)):
            stamps = T0 + pd.to_timedelta((np.arange(n) * interval) + shift, unit="s")
            pd.DataFrame({"timestamp": stamps, "p50": np.arange(n, dtype=float), "p99": np.ones(n)}).to_parquet(
                data / f"{group}_{interval}.parquet"
            )
    rows = [
        (
            "When does the anomaly start?",
            "Anomaly Start",
            ["Before the earliest timestamp", *STAMPS, "No anomaly"],
            STAMPS[1],
            "1001_0",
        ),
        ("When does it end?", "Anomaly End", [*STAMPS, "Not resolved", "No anomaly"], "Not resolved", "1001_0"),
        (
            "How large is it?",
            "Anomaly Magnitude",
            [{"value": v} for v in ("2x", "5x", "10x", "40x", "No anomaly")],
            "5x",
            "1002_0",
        ),
        (
            "What kind?",
            "Anomaly Categorization",
            ["Level Shift", "Transient Spike", "Change in Variance", "No Anomaly"],
            "Change in Variance",
            "1002_0",
        ),
        (
            "Which channels?",
            "Anomaly Identification",
            ["pod:1", "pod:2", "pod:1 and pod:2", "No anomaly"],
            "pod:1 and pod:2",
            "1001_0,1001_1",
        ),
        ("Is there an anomaly?", "Anomaly Presence", ["Yes", "No"], "Yes", "1001_1"),
        ("Series not released", "Anomaly Start", ["a", "b"], "a", "9999_0"),
    ]
    pd.DataFrame(
        [
            {
                "question": q,
                "task_category": c,
                "options_str": json.dumps(o),
                "correct_answer": a,
                "query_group": g,
                "difficulty": "medium",
            }
            for q, c, o, a, g in rows
        ]
    ).to_csv(folder / "arfbench-qa.csv", index=False)


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("arfbench")
    write_release(folder)
    return folder


def generate(release: Path, out: Path, **options) -> pd.DataFrame:
    taskset = get_taskset("arfbench")
    taskset.generate({"path": str(release), "seed": 5, **options}, out)
    return taskset.index(taskset.resolve([str(out / "seed5")], seed=5, split="test", root=None, filters={}), {})


def test_tier2_rows_classes_and_gold_scoring(release, tmp_path):
    taskset = get_taskset("arfbench")
    index = generate(release, tmp_path)
    assert sorted(index["category"]) == sorted(
        ["anomaly_start", "anomaly_end", "anomaly_magnitude", "anomaly_categorization", "anomaly_identification"]
    )
    golds = {r.category: json.loads(r.gold)["answer"] for r in index.itertuples()}
    assert golds == {
        "anomaly_start": "medium",
        "anomaly_end": "latest",
        "anomaly_magnitude": "small",
        "anomaly_categorization": "Change in Seasonality/Variance",
        "anomaly_identification": "two_channel",
    }
    manifest = json.loads((tmp_path / "seed5" / "manifest.json").read_text())["splits"]["test"]
    assert manifest["config"]["skipped_questions"] == 1 and "arfbench-qa.csv" in manifest["sources"]
    for rec in index.itertuples():
        sample = taskset.load(SampleRef("arfbench", rec.path, rec.id))
        gold = sample.gold
        assert sorted(sample.task.options) == sorted(gold["options"]) and gold["option"] in sample.task.question
        assert taskset.score(rec.category, gold, json.dumps({"answer": gold["option"]})).score == 1.0
        wrong = next(o for o in gold["options"] if o != gold["option"])
        assert taskset.score(rec.category, gold, f"answer: {wrong}").score == 0.0
        off = taskset.score(rec.category, gold, "something else")
        assert off.score == 0.0 and not off.valid and off.parsed["answer"] == ""
    pair = index[index["category"] == "anomaly_identification"].iloc[0]
    sample = taskset.load(SampleRef("arfbench", pair.path, pair.id))
    assert sample.task.channel_names == ["1001_0/p50", "1001_0/p99", "1001_1/p50", "1001_1/p99"]
    assert sample.task.length == 4000  # two 10 s grids 5 s apart, aligned on their union
    assert sample.task.meta == {"interval_s": 10, "start": T0.isoformat()}


def test_categories_all_and_seeded_option_order(release, tmp_path):
    index = generate(release, tmp_path / "a", categories=["all"])
    assert "anomaly_presence" in set(index["category"])
    again = generate(release, tmp_path / "b", categories=["all"])
    assert (tmp_path / "a/seed5/test.parquet").read_bytes() == (tmp_path / "b/seed5/test.parquet").read_bytes()
    assert list(index["options"].map(list)) == list(again["options"].map(list))
    with pytest.raises(Exception, match="unknown categories"):
        generate(release, tmp_path / "c", categories=["forecast"])


def test_answer_classes_follow_arfbench():
    start = ["Before the earliest timestamp", *STAMPS, "No anomaly"]
    assert [classes.answer_class("anomaly_start", o, start) for o in start] == [
        "earliest",
        "early",
        "medium",
        "late",
        "no_anomaly",
    ]
    plain = [*STAMPS, "2025-03-01 00:40:00"]
    assert [classes.answer_class("anomaly_start", o, plain) for o in plain] == ["earliest", "early", "medium", "late"]
    assert [classes.answer_class("anomaly_end", o, plain) for o in plain] == ["early", "medium", "late", "latest"]
    sizes = ["1", "3", "10", "30", "100", "No anomaly"]
    assert [classes.answer_class("anomaly_magnitude", o, sizes) for o in sizes] == [
        "smallest",
        "small",
        "medium",
        "medium",
        "large",
        "no_anomaly",
    ]
    ident = ["b:1", "a:1", "a:1, b:1", "a:1 and b:1 and c:1", "No anomaly"]
    assert [classes.answer_class("anomaly_identification", o, ident) for o in ident] == [
        "one_channel_large",
        "one_channel_small",
        "two_channel",
        "three_channel",
        "no_anomaly",
    ]
    # macro-F1 over the classes, as the leaderboard takes it from gold["answer"] and parsed["answer"]
    column = next(c for c in get_taskset("arfbench").columns() if c.category == "anomaly_magnitude")
    assert macro_f1(["small", "large"], ["small", "small"], column.options) == pytest.approx((2 / 3 + 0) / 2)
