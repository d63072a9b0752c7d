"""The AnomalyXL generator against spec/anomalyxl.md: bounds, composition, projection, determinism."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.config import preset
from tsbench.tasks.anomalyxl.generate import generate_split, plan_split
from tsbench.tasks.anomalyxl.labels import magnitude_band, start_bin
from tsbench.tasks.anomalyxl.mcq import TEMPLATES_BY_SOURCE, project, select_sources
from tsbench.tasks.anomalyxl.rowplan import materialize
from tsbench.tasks.anomalyxl.rows import iter_rows, read_index
from tsbench.tasks.anomalyxl.scene import build_scene

PAPER = preset("paper")


@pytest.fixture(scope="module")
def big_plans():
    """Plans only (no arrays) for a 4x-paper-size test grid: enough rows for composition statistics."""
    return plan_split(preset("paper", rows_per_cell=200), "test")


def test_paper_grid_has_800_rows_and_248_mcq_rows():
    cfg = preset("paper")
    plans = plan_split(cfg, "test")
    assert len(plans) == 800
    sources = select_sources(plans, "test", cfg.seed)
    per_category = Counter(p.category for p in plans if p.id in sources)
    assert per_category == {lb.LOCALIZE: 40, lb.CLASSIFY: 42, lb.MAGNITUDE: 42, lb.ALL_CHANNELS: 42, lb.LEAD_LAG: 42}
    n_mcq = sum(len(TEMPLATES_BY_SOURCE[p.category]) for p in plans if p.id in sources)
    assert n_mcq == 248


def test_val_and_train_spread_evenly_and_never_share_a_row_seed():
    cfg = preset("paper")
    assert sum(cfg.rows_in_cells("val").values()) == 500
    assert sum(cfg.rows_in_cells("train").values()) == 5000
    assert max(cfg.rows_in_cells("val").values()) - min(cfg.rows_in_cells("val").values()) <= 1
    small = preset("small")
    scenes = {}
    for split in ("test", "val", "train"):
        for p in plan_split(small, split):
            scenes.setdefault(p.plan["scenes"][0]["noise_seed"], set()).add(split)
    assert all(len(s) == 1 for s in scenes.values())


def test_windows_widths_and_magnitudes_within_bounds(big_plans):
    for p in big_plans:
        for inj in p.plan["injections"]:
            width = inj["end"] - inj["start"]
            assert 0 <= inj["start"] < inj["end"] <= p.length
            floor = 8
            if inj["kind"] == lb.VARIANCE:
                floor = 11 if p.category == lb.LEAD_LAG else 64
            assert floor <= width <= 256, (p.id, inj)
            if p.category == lb.MAGNITUDE:
                assert inj["kind"] == lb.LEVEL_SHIFT and 1.0 <= inj["magnitude"] <= 100.0
            else:
                assert 2.0 <= inj["magnitude"] <= 6.0
            if inj["kind"] == lb.SEASONALITY:
                assert 4 <= inj["period"] <= width // 2


def test_composition_close_to_spec(big_plans):
    loc = [p.gold["present"] for p in big_plans if p.category == lb.LOCALIZE]
    assert abs(np.mean(loc) - 0.8) < 0.04
    ks = Counter(len(p.gold["anomalies"]) for p in big_plans if p.category == lb.ALL_CHANNELS)
    assert set(ks) == {0, 1, 2, 3} and all(abs(n / sum(ks.values()) - 0.25) < 0.06 for n in ks.values())
    dirs = Counter(p.gold["direction"] for p in big_plans if p.category == lb.LEAD_LAG)
    assert all(abs(n / sum(dirs.values()) - 1 / 3) < 0.07 for n in dirs.values())
    kinds = Counter(p.gold["kind"] for p in big_plans if p.category == lb.CLASSIFY)
    assert set(kinds) == set(lb.KINDS) and all(abs(n / 800 - 0.2) < 0.05 for n in kinds.values())


def test_multichannel_rules(big_plans):
    for p in big_plans:
        if p.category == lb.ALL_CHANNELS:
            injs = p.plan["injections"]
            assert len({i["channel"] for i in injs}) == len(injs)
            spans = sorted((i["start"], i["end"]) for i in injs)
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "windows overlap in time"
            assert p.gold["anomalies"] == sorted(p.gold["anomalies"], key=lambda e: (e["channel"], e["start"]))
            assert p.gold["channels"] == [f"ch_{i:02d}" for i in range(16)]
        if p.category == lb.LEAD_LAG:
            a, b = p.plan["injections"]
            assert p.channel_names == ["A_ch_00", "B_ch_00"]
            d = p.gold["direction"]
            if d == "independent":
                assert p.gold["lag_samples"] == 0 and abs(a["start"] - b["start"]) > p.length / 4
            else:
                assert (a["kind"], a["end"] - a["start"], a["magnitude"]) == (
                    b["kind"],
                    b["end"] - b["start"],
                    b["magnitude"],
                )
                lag = p.gold["lag_samples"]
                assert 1 <= lag <= min(p.length // 4, p.length - 256)
                assert b["start"] - a["start"] == (lag if d == "lead" else -lag)
        assert p.gold["_L"] == p.length


def test_mcq_gold_is_always_an_option_and_matches_the_source(big_plans):
    for p in big_plans[::3]:
        for template in TEMPLATES_BY_SOURCE[p.category]:
            q = project(p, template, PAPER)
            assert q.gold["answer"] in q.options
            assert len(set(q.options)) == len(q.options)
            assert q.plan["scenes"] == p.plan["scenes"] and q.plan["injections"] == p.plan["injections"]
            if template == lb.START_TIME and p.gold["present"]:
                assert q.gold["answer"] == start_bin(p.gold["start"], p.length)
            if template == lb.CATEGORIZATION:
                assert len(q.options) == 5 and lb.NO_ANOMALY_OPTION in q.options
            if template == lb.IDENTIFICATION:
                gold_channels = sorted({e["channel"] for e in p.gold["anomalies"]})
                assert q.gold["answer"] == (", ".join(gold_channels) or lb.IDENTIFICATION_NONE)
    assert magnitude_band(2.99) == "1-3σ" and magnitude_band(3.0) == "3-10σ" and magnitude_band(100.0) == "30-100σ"
    assert start_bin(0, 1024) == "Before" and start_bin(256, 1024) == "Early" and start_bin(1023, 1024) == "Late"


def test_questions_state_the_facts_the_model_needs(big_plans):
    """Each question carries what the authors' texts tell the model: scale, window widths, kinds and sizes,
    and for lead-lag that coupled offsets never exceed L/4 (the facts a reference policy hard-codes)."""
    seen = set()
    for p in big_plans[::5]:
        L, q = p.length, p.question
        assert f"L = {L} samples" in q and "mean 0 and standard deviation 1" in q, p.id
        assert "one channel ch_00 of L" in q if p.length and len(p.channel_names) == 1 else "each L =" in q
        if p.category in (lb.LOCALIZE, lb.CLASSIFY, lb.ALL_CHANNELS):
            assert "8 to 256 samples (a change in variance at least 64)" in q and "between 2 and 6 σ" in q
        if p.category == lb.CLASSIFY:
            assert all(f'"{kind}"' in q for kind in lb.KINDS) and "the window being the ramp" in q
        if p.category == lb.MAGNITUDE:
            assert "positive number" in q and "between 1 and 100 σ" in q
        if p.category == lb.ALL_CHANNELS:
            assert "Between 0 and 3 of the channels" in q and "index in the list" in q
        if p.category == lb.LEAD_LAG:
            assert f"never more than L/4 = {L // 4}" in q and f"more than L/4 = {L // 4} samples apart" in q
            assert "(a change in variance at least 11)" in q and "0 when independent" in q
        for template in TEMPLATES_BY_SOURCE[p.category]:
            mcq = project(p, template, PAPER).question
            assert "mean 0 and standard deviation 1" in mcq and "Options:" in mcq
            if template == lb.START_TIME:
                assert f"Before: [0, {L // 4})" in mcq and f"Late: [{3 * L // 4}, {L})" in mcq
            if template == lb.INDICATOR:
                assert f"never more than L/4 = {L // 4}" in mcq
            if template == lb.IDENTIFICATION:
                assert "every anomalous channel of the series is among" in mcq
            seen.add(template)
    assert seen == set(lb.MCQ_CATEGORIES)


def test_scene_is_z_normalised_before_injection():
    cfg = preset("small")
    for p in plan_split(cfg, "test")[:10]:
        for scene in p.plan["scenes"]:
            x = build_scene(scene, p.length)
            assert abs(x.mean()) < 1e-9 and abs(x.std() - 1.0) < 1e-9


def test_injected_window_stands_out(small_data):
    """Robust deviation from the un-injected scene is larger inside the gold window than outside."""
    for row in iter_rows(small_data / "test-precise.parquet"):
        for inj in row.plan["injections"]:
            c, s, e = inj["channel"], inj["start"], inj["end"]
            scene = build_scene(row.plan["scenes"][c], row.length).astype(np.float32)
            diff = np.abs(row.values[c] - scene)
            mask = np.zeros(row.length, bool)
            mask[s:e] = True
            if inj["kind"] == lb.TREND:  # the end level carries on: compare the ramp with what came before
                assert diff[:s].max(initial=0) < 1e-5
                assert np.allclose(diff[e:], inj["magnitude"], rtol=1e-4)
            else:
                assert diff[mask].mean() > 10 * diff[~mask].mean() + 0.1, (row.id, inj["kind"])
            x = row.values[c].astype(np.float64)
            med = np.median(x)
            mad = np.median(np.abs(x - med)) * 1.4826
            robust = np.abs(x - med) / mad
            if (
                inj["kind"] in (lb.LEVEL_SHIFT, lb.TRANSIENT_SPIKE)
                and inj["magnitude"] >= 3
                and row.category != lb.LEAD_LAG
            ):
                assert np.median(robust[mask]) > np.median(robust[~mask]) or robust[mask].max() > robust[~mask].max()


def test_stored_rows_rebuild_from_plan_alone(small_data):
    for path in ("test-precise.parquet", "test-coarse.parquet"):
        for row in iter_rows(small_data / path):
            np.testing.assert_array_equal(materialize(row.plan), row.values)
            assert row.values.shape == (len(row.channel_names), row.length)


def test_same_arguments_give_identical_bytes(tmp_path, small_data):
    cfg = preset("small")
    entry = generate_split(cfg, "test", tmp_path)
    manifest = json.loads((small_data / "manifest.json").read_text())
    assert entry["files"] == manifest["splits"]["test"]["files"]
    assert not list((tmp_path / "seed42").glob("*.partial*"))


def test_growing_the_grid_leaves_existing_rows_unchanged(tmp_path, small_data):
    bigger = preset("small", rows_per_cell=6)
    generate_split(bigger, "test", tmp_path)
    old = {r.id: r for r in iter_rows(small_data / "test-precise.parquet")}
    new = {r.id: r for r in iter_rows(tmp_path / "seed42" / "test-precise.parquet")}
    assert len(new) == 48 and set(old) <= set(new)
    for rid, r in old.items():
        assert new[rid].gold == r.gold and new[rid].plan == r.plan
        np.testing.assert_array_equal(new[rid].values, r.values)


def test_parquet_columns_match_the_spec(small_data):
    df = read_index(small_data / "test-coarse.parquet")
    for col in (
        "id",
        "split",
        "regime",
        "category",
        "length",
        "n_channels",
        "channel_names",
        "question",
        "options",
        "gold",
        "plan",
        "seed",
    ):
        assert col in df.columns
    assert set(df["regime"]) == {"coarse"} and set(df["category"]) == set(lb.MCQ_CATEGORIES)
    assert df["id"].is_unique


def test_gold_answer_scores_one_on_every_generated_row(big_plans):
    """The scorer accepts the generator's own gold, written as a model would, on every category."""
    from tsbench.tasks.anomalyxl.metrics import score

    for p in big_plans[::7]:
        answer = {k: v for k, v in p.gold.items() if not k.startswith("_") and k != "channels"}
        assert score(p.category, p.gold, f"Here is my answer:\n```json\n{json.dumps(answer)}\n```") == 1.0, p.id
        for template in TEMPLATES_BY_SOURCE[p.category]:
            q = project(p, template, PAPER)
            assert score(template, q.gold, json.dumps(q.gold)) == 1.0
            assert score(template, q.gold, f"answer: {q.gold['answer']}") == 1.0
