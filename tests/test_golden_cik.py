"""CiK's scorer and aggregate against the official evaluator's own outputs (tests/golden/cik/: inputs we
generated, outputs of ServiceNow/context-is-key-forecasting's roi_crps and compute_all_rcprs; the
README there says how). Every vector must match to 1e-9 relative."""

from __future__ import annotations

import json
import lzma
import math
from pathlib import Path

import pytest

from tsbench.tasks.cik.metrics import Constraints, rcrps
from tsbench.tasks.cik.reader import task_weight
from tsbench.tasks.cik.taskset import RCRPS_AGGREGATE

GOLDEN = Path(__file__).parent / "golden" / "cik"
PARTS = {  # official key -> our RCRPSResult field
    "metric": "rcrps",
    "crps": "crps",
    "roi_crps": "roi_crps",
    "non_roi_crps": "non_roi_crps",
    "violation_mean": "violation_mean",
    "violation_crps": "violation_crps",
}


def load(name: str) -> dict:
    with lzma.open(GOLDEN / name, "rt") as f:
        return json.load(f)


def close(ours: float, official: float) -> bool:
    return math.isclose(ours, official, rel_tol=1e-9, abs_tol=1e-12)


def ours(case: dict):
    return rcrps(
        case["target"],
        case["samples"],
        scaling=case["scaling"],
        region_of_interest=case["roi"] or None,
        constraints=Constraints(
            case["minimum"], case["maximum"], tuple(case["variable_max_index"]), tuple(case["variable_max_values"])
        ),
    )


@pytest.fixture(scope="module")
def cases() -> list[dict]:
    golden = load("rcrps.json.xz")
    assert golden["repo"] == "ServiceNow/context-is-key-forecasting" and len(golden["commit"]) == 40
    return golden["cases"]


def test_rcrps_and_its_parts_match_roi_crps(cases):
    mismatches = []
    for index, case in enumerate(cases):
        result = ours(case)
        for official_key, field in PARTS.items():
            if not close(getattr(result, field), case["official"][official_key]):
                mismatches.append((index, official_key, getattr(result, field), case["official"][official_key]))
        if result.n_roi != case["official"]["num_roi_timesteps"]:
            mismatches.append((index, "num_roi_timesteps", result.n_roi, case["official"]["num_roi_timesteps"]))
    assert len(cases) == 500 and not mismatches, mismatches[:5]
    # the vectors reach every branch: ROI or not, each constraint kind, the cap, ties, many sizes
    assert sum(bool(c["roi"]) for c in cases) > 100 and sum(not c["roi"] for c in cases) > 100
    assert sum(c["minimum"] is not None for c in cases) > 50 and sum(c["maximum"] is not None for c in cases) > 50
    assert sum(bool(c["variable_max_index"]) for c in cases) > 20
    assert (
        sum(c["official"]["metric"] >= 5 for c in cases) > 20
        and sum(c["official"]["violation_crps"] > 0 for c in cases) > 50
    )


def test_the_aggregate_is_compute_all_rcprs(cases):
    golden = load("aggregate.json.xz")
    per_instance = [ours(c).rcrps for c in cases]
    mismatches = []
    for index, agg in enumerate(golden["aggregates"]):
        values = [per_instance[m] for m in agg["instances"]]
        weights = [task_weight(w) for w in agg["weights"]]
        got = RCRPS_AGGREGATE.value(values, weights)
        if not close(got, agg["official_mean"]):
            mismatches.append((index, got, agg["official_mean"]))
    assert len(golden["aggregates"]) == 200 and not mismatches, mismatches[:5]
    # CiK's 355 published instances: their task weights and the official per-instance metric
    published = golden["published_instances"]
    metrics = [i["metric"] for i in published["instances"]]
    weights = [task_weight(i["weight"]) for i in published["instances"]]
    assert len(metrics) == 355 and close(RCRPS_AGGREGATE.value(metrics, weights), published["official_mean"])
    assert not close(sum(metrics) / len(metrics), published["official_mean"])  # the unweighted mean is not it


def test_an_unusable_answer_counts_at_the_cap():
    # CiK counts a missing forecast at 5 (results_complete.README); TimeClaw's scorer does the same
    assert RCRPS_AGGREGATE.value([0.5, None], [1.0, 1.0]) == pytest.approx(2.75)
    weights = [task_weight("1/3"), task_weight("1")]
    assert RCRPS_AGGREGATE.value([7.0, 1.0], weights) == pytest.approx((5 / 3 + 1) / (4 / 3))
    assert RCRPS_AGGREGATE.value([], []) is None


def _number(value) -> float:
    return float(value)  # "NaN", "Infinity" and numbers alike


def _same(ours: float, official: float) -> bool:
    return (math.isnan(ours) and math.isnan(official)) or ours == official or close(ours, official)


def test_zero_scaling_and_nan_metrics_are_cik_s_and_make_the_aggregate_nan():
    """metric_scaling 0 (NaN with an absent constraint, 0 with finite ones), inf samples, and aggregates
    holding a NaN metric (NaN, never capped); one sample is the documented difference."""
    golden = load("nan_and_zero_scaling.json.xz")
    cases, metrics, mismatches = golden["cases"], [], []
    for index, case in enumerate(cases):
        case = {**case, "samples": [[_number(v) for v in row] for row in case["samples"]]}
        got = ours(case).rcrps
        metrics.append(got)
        official = _number(case["official"]["metric"])
        if case["kind"] == "one_sample":  # CiK's estimator divides by n (n - 1): NaN; here |x - y|
            assert math.isnan(official) and math.isfinite(got)
            metrics[-1] = official  # the aggregates below hold the official value for these
        elif not _same(got, official):
            mismatches.append((index, case["kind"], got, official))
    assert not mismatches, mismatches[:5]
    kinds = {c["kind"] for c in cases if math.isnan(_number(c["official"]["metric"]))}
    assert kinds == {"scaling_zero", "inf_sample", "one_sample"}
    for agg in golden["aggregates"]:
        values = [metrics[m] for m in agg["instances"]]
        weights = [task_weight(w) for w in agg["weights"]]
        assert _same(RCRPS_AGGREGATE.value(values, weights), _number(agg["official_mean"])), agg
    assert sum(math.isnan(_number(a["official_mean"])) for a in golden["aggregates"]) == 90


def test_a_zero_scaled_forecast_is_scored_and_its_nan_reaches_the_table():
    from tsbench.tasks.cik.taskset import score_forecast

    gold = {"target": [1.0, 2.0, 3.0], "scaling": 0.0, "constraints": {}, "weight": 1.0, "answer_format": "quantiles"}
    scored = score_forecast(gold, '```json\n{"forecast": [1, 2, 3]}\n```')
    assert scored.valid and math.isnan(scored.metrics["rcrps"]) and "NaN" in scored.parsed["note"]
    assert math.isnan(RCRPS_AGGREGATE.value([scored.metrics["rcrps"], 0.5], [1.0, 1.0]))
    assert RCRPS_AGGREGATE.value([None, 0.5], [1.0, 1.0]) == pytest.approx(2.75)  # unusable: still 5
