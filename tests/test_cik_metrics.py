"""CiK's RCRPS and sMAPE against values worked out by hand, and the family reading published files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tsbench.core.errors import UserError
from tsbench.tasks.base import SampleRef
from tsbench.tasks.cik import reader
from tsbench.tasks.cik.metrics import Constraints, crps_per_step, rcrps, smape, smape_eq65
from tsbench.tasks.cik.taskset import CiK, score_forecast


def test_crps_of_three_samples_by_hand():
    # E|X - 0| = 1; distinct ordered pairs of {0, 1, 2}: sum 8 over 6 pairs, half of it 2/3
    assert crps_per_step(np.array([0.0]), np.array([[0.0], [1.0], [2.0]]))[0] == pytest.approx(1 / 3)
    # a single sample: the absolute error
    assert crps_per_step(np.array([1.0, 1.0]), np.array([[4.0, -1.0]])).tolist() == [3.0, 2.0]


def test_crps_matches_the_pairwise_definition():
    rng = np.random.default_rng(0)
    samples, target = rng.normal(size=(7, 5)), rng.normal(size=5)
    brute = [
        np.abs(samples[:, h] - target[h]).mean()
        - 0.5 * np.abs(samples[:, h][:, None] - samples[:, h][None, :]).sum() / (7 * 6)
        for h in range(5)
    ]
    assert crps_per_step(target, samples) == pytest.approx(brute)


def test_region_of_interest_gets_half_the_weight():
    target, samples = [0.0, 0.0, 0.0], [[1.0, 1.0, 4.0]]
    plain = rcrps(target, samples, scaling=0.5)
    assert plain.rcrps == pytest.approx(0.5 * 2.0)  # mean |error| 2
    roi = rcrps(target, samples, scaling=0.5, region_of_interest=[2])
    assert roi.rcrps == pytest.approx(0.5 * (0.5 * 4.0 + 0.5 * 1.0))  # 1.25
    assert (roi.roi_crps, roi.non_roi_crps, roi.n_roi) == (pytest.approx(2.0), pytest.approx(0.5), 1)
    # an ROI over every step is no ROI
    assert rcrps(target, samples, scaling=0.5, region_of_interest=[0, 1, 2]).rcrps == pytest.approx(1.0)


SAMPLES = [[1.0, 3.0], [1.0, 1.0], [1.0, 3.0]]


def test_max_constraint_violation_by_hand():
    # forecast CRPS: step 0 exact (0), step 1 samples {3, 1, 3} vs 1: 4/3 - 2/3 = 2/3; mean 1/3, scaled 1/6
    # violations (scaled 0.5): 0.25, 0, 0.25; times beta 10: {2.5, 0, 2.5} vs 0: 5/3 - 5/6 = 5/6
    result = rcrps([1.0, 1.0], SAMPLES, scaling=0.5, constraints=Constraints(maximum=2.0))
    assert result.crps == pytest.approx(1 / 6)
    assert result.violation_crps == pytest.approx(5 / 6)
    assert result.rcrps == pytest.approx(1.0)
    assert result.violation_mean == pytest.approx(1 / 6)


def test_min_and_per_step_max_constraints_by_hand():
    below = rcrps([1.0, 1.0], [[1.0, -1.0], [1.0, 1.0], [1.0, -1.0]], scaling=0.5, constraints=Constraints(minimum=0.0))
    assert below.violation_crps == pytest.approx(5 / 6)  # the mirror image of the max case
    per_step = rcrps(
        [1.0, 1.0],
        SAMPLES,
        scaling=0.5,
        constraints=Constraints(variable_max_index=(1,), variable_max_values=(2.0,)),
    )
    # one listed step: scaled excess 0.5 -> {5, 0, 5}: 10/3 - 5/3
    assert per_step.violation_crps == pytest.approx(5 / 3)
    assert per_step.rcrps == pytest.approx(1 / 6 + 5 / 3)
    both = rcrps([1.0, 1.0], SAMPLES, scaling=0.5, constraints=Constraints(minimum=0.0, maximum=2.0))
    assert both.rcrps == pytest.approx(1.0)  # no sample breaks the minimum: the kinds add up


def test_roi_and_constraint_together():
    result = rcrps([1.0, 1.0], SAMPLES, scaling=0.5, region_of_interest=[1], constraints=Constraints(maximum=2.0))
    assert result.rcrps == pytest.approx(0.5 * (0.5 * 2 / 3 + 0.5 * 0.0) + 5 / 6)


def test_smape_by_hand():
    # percent, as TimeClaw prints it (its code: + 1e-8 in the denominator); Eq. 65's floor is 1e-2
    assert smape([1.0, 0.0], [3.0, 0.0]) == pytest.approx(50.0)
    assert smape([0.0], [0.001]) == pytest.approx(200.0 * 0.001 / (0.001 + 1e-8))
    assert smape_eq65([0.0], [0.001]) == pytest.approx(20.0)
    assert math.isnan(smape([1.0], [1.0, 2.0])) and math.isnan(smape([], []))  # TimeClaw: NaN, never raises


# --------------------------------------------------------------------- the published files --


def _frame_json(columns: dict[str, list[float]], start: str, freq: str) -> str:
    index = pd.date_range(start, periods=len(next(iter(columns.values()))), freq=freq)
    return pd.DataFrame(columns, index=index).to_json()  # pandas' default: {column: {epoch ms: value}}


def _record(name: str, seed: int, level: float) -> dict:
    history = (level + np.sin(np.arange(24) / 3)).round(3).tolist()
    future = [level + 5.0] * 6
    return {
        "name": name,
        "seed": seed,
        "weight": "1/3",
        "context_sources": ["c_f", "c_i"],
        "skills": ["forecasting"],
        "background": f"{name}: hourly load of a building.",
        "scenario": "A heat wave starts at the second forecast hour and lifts the load by 5.",
        "constraints": "The load never exceeds 100.",
        "seasonal_period": 24,
        "past_time": _frame_json({"load": history}, "2024-01-01", "h"),
        "future_time": _frame_json({"load": future}, "2024-01-02", "h"),
        "metric_scaling": 0.2,
        "region_of_interest": [1, 2, 3],
        "constraint_min": None,
        "constraint_max": 100.0,
        "constraint_variable_max_index": [],
        "constraint_variable_max_values": [],
    }


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cik_src")
    lines = [_record("ElectricityIncreaseInPredictionTask", s, 10.0) for s in range(3)]
    (root / "all_tasks.json").write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    hf = [_record("ATMBuildingClosedTask", s, 50.0) for s in range(2)]
    (root / "data").mkdir()
    pd.DataFrame(hf).to_parquet(root / "data" / "test-00000-of-00001.parquet")
    return root


def test_reader_parses_both_published_layouts(published):
    instances = reader.read_instances(published)
    assert len(instances) == 5
    first = next(i for i in instances if i.name.startswith("Electricity"))
    assert first.history.shape == (1, 24) and first.target.tolist() == [15.0] * 6
    assert first.times[0] == pd.Timestamp("2024-01-01") and len(first.future_times) == 6
    assert first.constraints.maximum == 100.0 and first.constraints.minimum is None
    assert first.region_of_interest == [1, 2, 3] and first.weight == pytest.approx(1 / 3)
    assert first.context_types == ["future", "intemporal"] and first.domain == "Energy"
    train, test = reader.split_instances(instances)
    assert {i.name for i in train} == {i.name for i in test}  # every task on both sides
    assert len(train) + len(test) == 5


def test_family_generates_loads_and_scores(published, tmp_path):
    family = CiK()
    manifest, lines = family.generate({"path": str(published), "seed": 1}, tmp_path)
    assert sorted(line["file"] for line in lines) == ["test.parquet", "train.parquet"]
    files = family.resolve([str(manifest.parent)], seed=1, split="test", root=None, filters={})
    rows = family.index(files, {})
    assert set(rows["category"]) <= set(reader.DOMAINS) and (rows["split"] == "test").all()
    sample = family.load(SampleRef("cik", str(files[0]), str(rows["id"].iloc[0])))
    assert "<context>" in sample.task.question and "heat wave" in sample.task.question
    assert sample.task.meta["memory_descriptor"].startswith(sample.task.meta["task_name"])
    assert len(sample.task.meta["time_s"]) == sample.task.length
    target = sample.gold["target"]
    assert sample.gold["answer_format"] == "quantiles" and '"levels": [0.1, 0.2' in sample.task.question
    levels = [0.1 * q for q in range(1, 10)]
    rows_of = lambda rows: "```json\n" + json.dumps({"levels": levels, "samples": rows}) + "\n```"  # noqa: E731
    perfect = family.score(sample.task.category, sample.gold, rows_of([[v] * 9 for v in target]))
    assert perfect.valid and perfect.score == pytest.approx(1.0) and perfect.metrics["rcrps"] == 0.0
    assert perfect.metrics["smape"] == 0.0 and perfect.parsed["kind"] == "quantile"
    over = [[200.0] * 9] * len(target)  # every level breaks the maximum of 100
    broken = score_forecast(sample.gold, rows_of(over))
    assert broken.metrics["violation_crps"] > 0 and broken.score < 0.1
    short = score_forecast(sample.gold, rows_of([[v] * 9 for v in target[:-1]]))  # TimeClaw pads the last row
    assert short.valid and "padded" in short.parsed["note"]
    ambiguous = family.score(sample.task.category, sample.gold, json.dumps({"samples": [target] * 5}))
    assert not ambiguous.valid and '"samples" without "levels"' in ambiguous.error
    # data generated for trajectories reads them (and refuses a wrong length)
    manifest, _ = family.generate({"path": str(published), "seed": 1, "answer_format": "samples"}, tmp_path / "s")
    files = family.resolve([str(manifest.parent)], seed=1, split="test", root=None, filters={})
    gold = family.load(SampleRef("cik", str(files[0]), str(rows["id"].iloc[0]))).gold
    trajectories = score_forecast(gold, json.dumps({"samples": [target] * 5}))
    assert trajectories.valid and trajectories.metrics["rcrps"] == 0.0 and trajectories.parsed["kind"] == "samples"
    wrong_length = score_forecast(gold, '{"samples": [[1, 2]]}')
    assert not wrong_length.valid and "horizon" in wrong_length.error


def test_missing_path_is_one_clear_line(tmp_path):
    with pytest.raises(UserError, match="ServiceNow/context-is-key"):
        CiK().generate({"seed": 1}, tmp_path)
    with pytest.raises(UserError, match="no .parquet"):
        CiK().generate({"path": str(tmp_path)}, tmp_path / "out")
