"""The training-free detector: planted anomalies are found, and every answer is in schema."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tsbench.baselines import detector
from tsbench.core.answers import iou
from tsbench.core.episode import EpisodeTask
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.injections import apply_injection
from tsbench.tasks.anomalyxl.metrics import metrics
from tsbench.tasks.anomalyxl.rows import iter_rows


def white(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(n)
    return (x - x.mean()) / x.std()


def planted(kind: str, n: int, start: int, width: int, magnitude: float, seed: int, **extra) -> np.ndarray:
    x = white(n, seed)
    apply_injection(x, {"kind": kind, "start": start, "end": start + width, "magnitude": magnitude, "sign": 1, **extra})
    return x


def task_for(category: str, series: dict[str, np.ndarray], options=()) -> EpisodeTask:
    names = list(series)
    values = np.stack([np.asarray(series[n], dtype=np.float32) for n in names])
    return EpisodeTask("t", category, lb.regime_of(category), "", names, values, list(options))


@pytest.mark.parametrize("kind", [lb.TRANSIENT_SPIKE, lb.LEVEL_SHIFT])
@pytest.mark.parametrize("n, start, width", [(16384, 5000, 40), (32768, 20000, 150)])
def test_finds_a_planted_five_sigma_anomaly(kind, n, start, width):
    x = planted(kind, n, start, width, 5.0, seed=start)
    model = detector.build("default")
    text = model.answer(task_for(lb.CLASSIFY, {"ch_00": x}))
    answer = json.loads(text)
    assert answer["kind"] == kind
    assert iou((answer["start"], answer["end"]), (start, start + width)) > 0.8
    located = json.loads(model.answer(task_for(lb.LOCALIZE, {"ch_00": x})))
    assert located["present"] is True
    assert iou((located["start"], located["end"]), (start, start + width)) > 0.8


def test_white_noise_is_not_an_anomaly():
    for seed in range(3):
        answer = detector.answer_object(task_for(lb.LOCALIZE, {"ch_00": white(16384, 100 + seed)}))
        assert answer == {"present": False}


@pytest.mark.parametrize(
    "kind, extra",
    [(lb.VARIANCE, {"noise_seed": 3}), (lb.SEASONALITY, {"period": 12, "phase": 0.4}), (lb.TREND, {})],
)
def test_names_the_other_kinds(kind, extra):
    x = planted(kind, 16384, 9000, 200, 5.0, seed=11, **extra)
    answer = detector.answer_object(task_for(lb.CLASSIFY, {"ch_00": x}))
    assert answer["kind"] == kind
    assert iou((answer["start"], answer["end"]), (9000, 9200)) > 0.7


def test_measures_a_level_shift():
    x = planted(lb.LEVEL_SHIFT, 16384, 3000, 120, 7.5, seed=5)
    m = detector.answer_object(task_for(lb.MAGNITUDE, {"ch_00": x}))["magnitude_sigma"]
    assert m == pytest.approx(7.5, rel=0.1)


@pytest.mark.parametrize("direction", ["lead", "lag"])
def test_lead_lag_reads_the_onsets(direction):
    n, lag = 32768, 2500
    first, second = 8000, 8000 + lag
    a_start, b_start = (first, second) if direction == "lead" else (second, first)
    a = planted(lb.LEVEL_SHIFT, n, a_start, 60, 4.0, seed=1)
    b = planted(lb.LEVEL_SHIFT, n, b_start, 60, 4.0, seed=2)
    answer = detector.answer_object(task_for(lb.LEAD_LAG, {"A_ch_00": a, "B_ch_00": b}))
    assert answer["direction"] == direction
    assert abs(answer["lag_samples"] - lag) <= 3


def test_all_channels_flags_only_the_anomalous_ones():
    n = 8192
    series = {f"ch_{i:02d}": white(n, 40 + i) for i in range(6)}
    apply_injection(series["ch_02"], {"kind": lb.LEVEL_SHIFT, "start": 1000, "end": 1100, "magnitude": 5.0, "sign": -1})
    apply_injection(
        series["ch_04"], {"kind": lb.TRANSIENT_SPIKE, "start": 6000, "end": 6050, "magnitude": 6.0, "sign": 1}
    )
    answer = detector.answer_object(task_for(lb.ALL_CHANNELS, series))
    assert [ev["channel"] for ev in answer["anomalies"]] == ["ch_02", "ch_04"]


def test_answers_pass_the_schema_on_the_small_split(small_data):
    model = detector.build("default")
    assert model.name == "detector/default"
    seen = set()
    for regime in ("precise", "coarse"):
        for row in iter_rows(small_data / f"test-{regime}.parquet"):
            if row.category in seen and row.regime == "precise" and row.category == lb.ALL_CHANNELS:
                continue  # one 16-channel row is enough for the schema check
            task = EpisodeTask(
                row.id, row.category, row.regime, row.question, row.channel_names, row.values, row.options
            )
            text = model.answer(task)
            result = metrics(row.category, row.gold, text)
            assert result["valid"], (row.id, text, result["error"])
            if regime == "coarse":
                assert json.loads(text)["answer"] in row.options
            seen.add(row.category)
    assert seen == set(lb.ALL_CATEGORIES)


def test_unknown_detector_name():
    with pytest.raises(LookupError):
        detector.build("nope")


def test_calibration_never_scores_below_the_defaults_on_its_own_rows(small_data):
    """The grid search includes every default value, so the fitted constants must score at least as
    well as the defaults on the rows they were fitted on; on these rows it must move something."""
    rows = [
        detector._analyse_row((r.category, r.length, r.channel_names, r.gold, r.values))
        for r in iter_rows(small_data / "test-precise.parquet")
        if r.category in (lb.LOCALIZE, lb.CLASSIFY, lb.ALL_CHANNELS)
    ]
    fitted = detector.fit_settings(rows)
    assert isinstance(fitted, detector.Settings)
    by_category = {}
    for r in rows:
        by_category.setdefault(r.category, []).append(r)
    for category, subset in by_category.items():
        assert detector._mean_score(subset, fitted) >= detector._mean_score(subset, detector.DEFAULT) - 1e-12, category
