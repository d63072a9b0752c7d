"""TimeClaw's split, answer parsing, sMAPE, fingerprint, memory admission and CiK task tags against the
authors' code's own outputs (tests/golden/timeclaw/: inputs we generated, outputs of
iDEA-iSAIL-Lab-UIUC/TimeClaw; the README there says how). Every vector must match, floats to 1e-9
relative."""

from __future__ import annotations

import json
import lzma
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tsbench.tasks.cik import reader
from tsbench.tasks.cik.answer import forecast_of, read_reply
from tsbench.tasks.cik.metrics import smape
from tsbench.tasks.timeclaw_protocol import split_train_test, subsample
from tsbench.timeclaw.build import admit_timeclaw
from tsbench.timeclaw.fingerprint import FEATURE_NAMES, fingerprint, padded_lengths

GOLDEN = Path(__file__).parent / "golden" / "timeclaw"


def load(name: str) -> dict:
    with lzma.open(GOLDEN / name, "rt") as f:
        golden = json.load(f)
    assert golden["repo"] == "iDEA-iSAIL-Lab-UIUC/TimeClaw" and len(golden["commit"]) == 40
    return golden


def close(ours: float | None, official: float | None) -> bool:
    """Equal to 1e-9 relative; None (NaN in the fixture) only matches NaN."""
    if official is None or ours is None or (isinstance(ours, float) and math.isnan(ours)):
        return (ours is None or math.isnan(ours)) and official is None
    return math.isclose(ours, official, rel_tol=1e-9, abs_tol=1e-12)


def nan_as_none(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, list):
        return [nan_as_none(v) for v in value]
    if isinstance(value, dict):
        return {k: nan_as_none(v) for k, v in value.items()}
    return value


# -- split_train_test / subsample_groups ---------------------------------------------------------------


def test_split_and_subsample_are_the_authors():
    golden = load("split.json.xz")
    mismatches = []
    for index, case in enumerate(golden["split_train_test"]):
        positions = list(range(len(case["groups"])))
        group = case["groups"].__getitem__
        if "raises" in case:
            with pytest.raises(ValueError):
                split_train_test(positions, group, case["train_ratio"], case["seed"])
        elif list(split_train_test(positions, group, case["train_ratio"], case["seed"])) != [
            case["train"],
            case["test"],
        ]:
            mismatches.append(("split", index))
    for index, case in enumerate(golden["subsample_groups"]):
        positions = list(range(len(case["groups"])))
        if subsample(positions, case["groups"].__getitem__, case["ratio"], case["seed"]) != case["kept"]:
            mismatches.append(("subsample", index))
    assert len(golden["split_train_test"]) == 402 and len(golden["subsample_groups"]) == 200
    assert not mismatches, mismatches[:5]
    # CiK's 355 instances in all_tasks.json order, as the CiK family splits them
    cik = golden["cik_published"]
    instances = [SimpleNamespace(name=n, seed=s) for n, s in zip(cik["names"], cik["seeds"])]
    train, test = reader.split_instances(instances)
    assert [instances.index(i) for i in train] == cik["train"] and [instances.index(i) for i in test] == cik["test"]
    assert (len(train), len(test)) == (213, 142)  # half of 5, rounded up, to train


# -- the quantile answer format, parse_forecast and sMAPE ------------------------------------------------


@pytest.fixture(scope="module")
def replies() -> dict:
    return load("parse.json.xz")


def _agrees(reading, why, official, raises) -> bool:
    if raises:
        return reading is None and "raises" in why
    return nan_as_none(reading.as_dict() if reading is not None else None) == official


def test_the_repo_parser_reads_every_reply_as_the_authors_code(replies):
    cases = replies["parse"]
    wrong = [
        i
        for i, c in enumerate(cases)
        if not _agrees(
            *read_reply(c["text"], c["expected_length"], parser="timeclaw-repo"),
            c.get("official"),
            c.get("official_raises"),
        )
    ]
    assert len(cases) == 368 and not wrong, [cases[i]["text"][:120] for i in wrong[:3]]
    kinds = [c["official"]["kind"] for c in cases if c.get("official")]
    assert kinds.count("quantile") > 150 and kinds.count("point") > 100
    horizons = {c["expected_length"] for c in cases if (c.get("official") or {}).get("kind") == "quantile"}
    assert {12, 9} <= horizons  # horizon 12 with 9 levels, and H equal to the number of levels


def test_the_default_parser_reads_by_keys(replies):
    """Where the authors' parser reads a reply by its keys the default agrees; where it falls back to
    the first bare numeric list inside an object (an unfenced quantile answer's "levels" read as a
    point forecast), the default reads that object's keys, as the authors' parser reads it fenced."""
    cases = replies["parse"]
    wrong = [
        i
        for i, c in enumerate(cases)
        if not _agrees(
            *read_reply(c["text"], c["expected_length"]), c.get("official_by_keys"), c.get("official_by_keys_raises")
        )
    ]
    assert not wrong, [cases[i]["text"][:120] for i in wrong[:3]]
    by_shape = [c for c in cases if c["via"] == "raw-array" and c.get("official") != c.get("official_by_keys")]
    assert len(by_shape) > 40  # the replies where the two readings differ are covered
    same_rows = [c for c in cases if c["expected_length"] == 9 and '"levels": [0.1, 0.2' in c["text"]]
    for case in same_rows:  # H == 9 levels: rows stay steps, never trajectories
        reading, _ = read_reply(case["text"], 9)
        if reading is not None and reading.kind == "quantile":
            assert len(reading.values) == 9 and all(len(row) == len(reading.levels) for row in reading.values)


def test_smape_of_each_reply_is_the_cik_scorers(replies):
    """_score_one's sMAPE (percent; the level nearest 0.5 of a quantile answer): ours on the same reading."""
    compared = differs = 0
    for case in replies["parse"]:
        for mode, key in (("timeclaw-repo", "official"), ("timeclaw", "official_by_keys")):
            reading, _ = read_reply(case["text"], case["expected_length"], parser=mode)
            if reading is None or f"{key}_smape" not in case:
                continue
            forecast, _ = forecast_of(reading, case["expected_length"])
            if forecast is None:  # NaN values or no levels: unusable here, a NaN TimeClaw's mean drops
                differs += 1
                continue
            compared += 1
            assert close(smape(case["target"], forecast.point), case[f"{key}_smape"]), case["text"][:120]
    assert compared > 550 and differs < 40


def test_smape_pairs(replies):
    pairs = replies["smape"]
    wrong = [p for p in pairs if not close(smape(p["y_true"], p["y_pred"]), p["official"])]
    assert len(pairs) == 302 and not wrong, wrong[:3]


# -- compute_fingerprint ---------------------------------------------------------------------------------


def _decode(values: list) -> np.ndarray:
    return np.array([float(v) for v in values], dtype=np.float64)


def _timestamps(ts: dict | None, as_seconds: bool = False):
    if ts is None:
        return None
    seconds = ts["start"] + np.concatenate([[0], np.cumsum(ts["steps"], dtype=np.int64)]).astype(np.int64)
    if as_seconds:
        return seconds.astype(np.float64)
    if ts["format"] == "iso":
        return [pd.Timestamp(int(v), unit="s").isoformat() for v in seconds]
    return [str(int(v) * 1000) for v in seconds]


def _padded(channels: list[np.ndarray]) -> np.ndarray:
    block = np.full((len(channels), max(len(x) for x in channels)), np.nan)
    for row, x in zip(block, channels):
        row[: len(x)] = x
    return block


@pytest.fixture(scope="module")
def series() -> list[dict]:
    golden = load("fingerprint.json.xz")
    assert tuple(golden["feature_names"][:3]) == ("log_length", "n_channels_log", "missing_rate")
    return golden["cases"]


def test_fingerprint_is_compute_fingerprint(series):
    mismatches = []
    checked = 0
    for index, case in enumerate(series):
        channels = [_decode(x) for x in case["channels"]]
        official = case["official"]
        inputs = [(channels, _timestamps(case["timestamps"]), None)]  # ragged channels, strings as given
        if index % 3 == 0 and channels and max(len(x) for x in channels):  # a third also as rows store them
            lengths = [len(x) for x in channels]
            inputs.append((_padded(channels), _timestamps(case["timestamps"]), lengths))  # padded + lengths
            if not case["trailing_nonfinite"]:  # the padding read off the NaNs
                inputs.append((_padded(channels), _timestamps(case["timestamps"]), padded_lengths(_padded(channels))))
            if case["timestamps"] and case["timestamps"]["format"] == "iso":  # seconds, as rows' time_s carry them
                inputs.append((channels, _timestamps(case["timestamps"], as_seconds=True), None))
        for values, stamps, lengths in inputs:
            checked += 1
            got = fingerprint(values, stamps, lengths=lengths)
            for name, ours, theirs in zip(FEATURE_NAMES, got, official):
                if not close(float(ours), theirs):
                    mismatches.append((index, name, float(ours), theirs))
    assert len(series) == 1000 and checked > 1500 and not mismatches, mismatches[:5]


def test_the_vectors_reach_the_differences_from_the_paper(series):
    """The series cover what the paper's literal reading gets wrong against the authors' code."""
    differs = {name: 0 for name in FEATURE_NAMES}
    for case in series[:400]:
        channels = [_decode(x) for x in case["channels"]]
        if not channels or not max(len(x) for x in channels):
            continue
        paper = fingerprint(_padded(channels), variant="paper")
        for name, a, b in zip(FEATURE_NAMES, paper, case["official"]):
            differs[name] += not math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)
    assert differs["cp_rate"] > 80 and differs["miss"] > 20 and differs["acf_quarter"] > 5, differs


# -- memory admission ------------------------------------------------------------------------------------


def test_memory_admission_is_the_train_modes():
    golden = load("admission.json.xz")
    wrong = []
    for index, case in enumerate(golden["cases"]):
        episodes = pd.DataFrame(
            [{"id": e["id"], "error_type": e["error"], "score": e["score"]} for e in case["episodes"]],
            columns=["id", "error_type", "score"],
        )
        if list(admit_timeclaw(episodes)["id"]) != case["official_admitted"]:
            wrong.append(index)
    assert len(golden["cases"]) == 300 and not wrong, wrong[:5]


# -- CiK's domains and context types as TimeClaw assigns them ---------------------------------------------


def test_cik_domains_and_context_types_are_timeclaws():
    golden = load("cik_tasks.json.xz")
    names = {"history": "historical", "covariates": "covariate"}
    wrong = []
    for task in golden["tasks"]:
        instance = SimpleNamespace(name=task["name"], context_sources=task["context_sources"])
        ours = reader.Instance.timeclaw_context_types.fget(
            SimpleNamespace(name=instance.name, context_types=reader.Instance.context_types.fget(instance))
        )
        theirs = sorted(names.get(c, c) for c in task["official_contexts"])
        domain = {"Traffic": "Transportation"}.get(task["official_domain"], task["official_domain"])
        if sorted(ours) != theirs or reader.domain_of(task["name"]) != domain:
            wrong.append(task["name"])
    assert len(golden["tasks"]) == 71 and not wrong, wrong
