"""The recording families' pure parts: the window sampler's rules, the shared answer helpers and
the classify-with-evidence scorer. No optional reader needed."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from tsbench.core.answers import extract_choice, iou, last_json_object
from tsbench.tasks import FAMILIES, get_taskset
from tsbench.tasks.base import TaskFamily
from tsbench.tasks.recordings import classify
from tsbench.tasks.recordings.sampling import Event, Recording, WindowRules, free_gaps, plan_windows

KINDS = ["A", "B"]
RULES = WindowRules(min_s=60, max_s=600, cap=131_072, n_windows=40, negative_share=0.2, edge_fraction=0.05)


def recording(key: str, seed: int, minutes: int = 120, fs: float = 10.0) -> Recording:
    """Events every 2-6 minutes, a third of them non-targets; sinus-like regions with one hole."""
    rng = np.random.default_rng(seed)
    length = int(minutes * 60 * fs)
    events, at = [], int(90 * fs)
    while at < length - 200:
        span = int(rng.integers(5, 60))
        kind = [None, "A", "B"][int(rng.integers(3))]
        events.append(Event(at, at + span, kind))
        at += int(rng.integers(120, 360) * fs)
    regions = [(0, length // 2), (length // 2 + int(600 * fs), length)]
    return Recording(key, length, fs, events, regions)


@pytest.fixture(scope="module")
def recs() -> list[Recording]:
    return [recording(f"r{i}", i) for i in range(4)]


def inside(event: Event, start: int, end: int) -> bool:
    return event.start < end and event.end > start


def test_windows_follow_the_paper_rules(recs):
    windows = plan_windows(recs, KINDS, RULES, seed=42)
    by_key = {r.key: r for r in recs}
    assert len(windows) == 40
    negatives = [w for w in windows if w.kind is None]
    assert len(negatives) == 8  # 20 % anomaly-free
    positives = [w for w in windows if w.kind is not None]
    assert {k: sum(w.kind == k for w in positives) for k in KINDS} == {"A": 16, "B": 16}  # equal quotas
    for w in windows:
        rec = by_key[w.key]
        assert rec.fs * RULES.min_s <= w.length <= rec.fs * RULES.max_s
        hits = [e for e in rec.events if inside(e, w.start, w.end)]
        region = next(r for r in rec.regions if r[0] <= w.start and w.end <= r[1]) if w.kind is None else None
        if w.kind is None:
            assert hits == [] and region is not None and w.gold is None  # clean, non-wake/sinus gap
            continue
        assert len(hits) == 1 and hits[0].kind == w.kind  # exactly one annotated event, the target
        start, end = w.gold
        assert (start + w.start, end + w.start) == (hits[0].start, hits[0].end)
        margin = RULES.edge_fraction * w.length
        assert start >= margin and w.length - end >= margin  # none near the edges
        assert any(r[0] <= w.start and w.end <= r[1] for r in rec.regions)  # positive_in_regions


def test_same_seed_same_windows_and_another_seed_differs(recs):
    assert plan_windows(recs, KINDS, RULES, seed=7) == plan_windows(recs, KINDS, RULES, seed=7)
    assert plan_windows(recs, KINDS, RULES, seed=7) != plan_windows(recs, KINDS, RULES, seed=8)


def test_a_short_kind_leaves_its_quota_to_the_others_and_negatives_keep_the_share():
    rec = Recording(
        "x",
        200_000,
        10.0,
        [Event(5_000 + i * 3_000, 5_050 + i * 3_000, "A") for i in range(60)] + [Event(190_000, 190_050, "B")],
    )
    windows = plan_windows([rec], ["A", "B"], WindowRules(min_s=60, max_s=200, n_windows=20), seed=1)
    kinds = [w.kind for w in windows]
    assert kinds.count("B") == 1 and kinds.count("A") == 15 and kinds.count(None) == 4


def test_an_event_overlapping_another_is_never_a_target():
    rec = Recording("x", 50_000, 10.0, [Event(10_000, 10_100, "A"), Event(10_050, 10_060, None)])
    assert [
        w for w in plan_windows([rec], ["A"], WindowRules(min_s=60, max_s=100, n_windows=5), seed=0) if w.kind
    ] == []


def test_free_gaps_avoid_events_and_stay_in_regions():
    rec = Recording("x", 1000, 1.0, [Event(100, 110), Event(105, 200), Event(600, 601)], [(0, 500), (550, 1000)])
    assert free_gaps(rec) == [(0, 100), (200, 500), (550, 600), (601, 1000)]


def test_iou_and_choice_rules():
    assert iou((0, 10), (5, 15)) == pytest.approx(5 / 15)
    assert iou((0, 10), (10, 20)) == 0.0 and iou((5, 5), (0, 10)) == 0.0
    assert extract_choice('<think>{"answer": "no"}</think> Answer: "Yes"') == "Yes"
    assert extract_choice('{"answer": "B"} then {"x": 1}') == "B"
    assert extract_choice("Answer:\n\n  C  ") == "C"
    assert last_json_object('{"a": 1} {"b": NaN}') == (None, "invalid JSON")


GOLD = classify.gold("K1", (100, 200))
NEGATIVE = classify.gold(None, None)


@pytest.mark.parametrize(
    "message, score, valid",
    [
        ('{"kind": "K1", "start": 100, "end": 200}', 1.0, True),
        ('reasoning... {"kind": "K1", "start": 150, "end": 250}', 1 / 3, True),
        ('{"kind": "K2", "start": 100, "end": 200}', 0.0, True),
        ('{"kind": "No anomaly"}', 0.0, True),
        ('{"kind": "K1", "start": "100", "end": 200}', 0.0, False),
        ("no json here", 0.0, False),
    ],
)
def test_kind_times_iou(message, score, valid):
    scored = classify.score(GOLD, message)
    assert scored.score == pytest.approx(score) and scored.valid is valid


def test_negative_rows():
    assert classify.score(NEGATIVE, '{"kind": "No anomaly"}').score == 1.0
    assert classify.score(NEGATIVE, '{"kind": "K1", "start": 1, "end": 2}').score == 0.0
    assert classify.score(NEGATIVE, '{"kind": "No anomaly"}').metrics["iou"] is None


def test_the_four_families_are_registered_tasksets():
    for name in ("ltaf", "sleep-psg", "arfbench", "timerbed"):
        assert name in FAMILIES.names()
        taskset = get_taskset(name)
        assert isinstance(taskset, TaskFamily) and taskset.name == name and taskset.columns()
    columns = get_taskset("arfbench").columns()
    assert [c.short for c in columns[:5]] == ["Iden.", "Start", "End", "Magn.", "Categ."]  # paper Table 2
    assert [c.short for c in get_taskset("timerbed").columns()] == ["RCW", "TEE", "ECG", "EMG", "CTU", "HAR"]
    (ltaf,) = get_taskset("ltaf").columns()
    assert ltaf.options[-1] == classify.NO_ANOMALY and json.dumps(ltaf.options)


@pytest.mark.parametrize("family, module", [("ltaf", "wfdb"), ("timerbed", "aeon.datasets")])
def test_a_missing_reader_names_the_extra(family, module, tmp_path, monkeypatch):
    from tsbench.core.errors import UserError

    monkeypatch.setitem(sys.modules, module, None)  # import of it now fails, as without the extra
    (tmp_path / "x_TEST.ts").write_text("")
    (tmp_path / "r.hea").write_text("")
    (tmp_path / "r.atr").write_text("")
    with pytest.raises(UserError, match=r"pip install 'tsbench\[recordings\]'"):
        get_taskset(family).generate({"path": str(tmp_path)}, tmp_path / "out")


def test_generated_files_are_refused_by_another_family(tmp_path):
    from tsbench.core.errors import UserError

    (tmp_path / "seed1").mkdir()
    (tmp_path / "seed1" / "test.parquet").write_bytes(b"")
    (tmp_path / "seed1" / "manifest.json").write_text(json.dumps({"family": "ltaf", "seed": 1}))
    with pytest.raises(UserError, match="belongs to family ltaf"):
        get_taskset("sleep-psg").resolve([], seed=1, split="test", root=str(tmp_path), filters={})
    with pytest.raises(UserError, match="--lengths does not apply"):
        get_taskset("ltaf").resolve([], seed=1, split="test", root=str(tmp_path), filters={"lengths": [1024]})
