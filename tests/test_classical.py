"""Classical heads: train on a `--preset small` train+val split, answer its test split in schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tsbench.baselines import classical, feature_cache
from tsbench.core.episode import EpisodeTask
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.config import preset
from tsbench.tasks.anomalyxl.generate import generate_split
from tsbench.tasks.anomalyxl.rows import iter_rows
from tsbench.tasks.anomalyxl.scoring import metrics


@pytest.fixture(scope="module")
def small_all(tmp_path_factory) -> Path:
    """`--preset small` at seed 42, all three splits."""
    root = tmp_path_factory.mktemp("anomalyxl_all")
    cfg = preset("small")
    for split in ("test", "val", "train"):
        generate_split(cfg, split, root)
    return root / "seed42"


@pytest.fixture(scope="module")
def trained(small_all, tmp_path_factory) -> tuple[Path, dict, list]:
    out = tmp_path_factory.mktemp("classical")
    calls: list[tuple[str, int, int]] = []
    summary = classical.train_classical(small_all, out, progress=lambda *a: calls.append(a), workers=1)
    return out, summary, calls


def _task(row) -> EpisodeTask:
    return EpisodeTask(row.id, row.category, row.regime, row.question, row.channel_names, row.values, row.options)


def test_training_fits_every_head_on_train_and_val(trained):
    out, summary, calls = trained
    assert summary["files"] == [
        "train-precise.parquet",
        "train-coarse.parquet",
        "val-precise.parquet",
        "val-coarse.parquet",
    ]
    # 160 precise rows + their 200 MCQ projections.
    assert summary["rows"] == 360
    assert summary["heads"] == 16  # 10 precise (presence+span, kind+span, magnitude, channel, direction+lag) + 6 coarse
    meta = json.loads((out / "meta.json").read_text())
    assert len(meta["heads"]) == 16
    assert any(what == "features" for what, _, _ in calls) and any(what == "heads" for what, _, _ in calls)
    assert list((out / "features").glob("part-*.parquet"))


def test_refitting_reuses_the_feature_cache(small_all, trained):
    out, _, _ = trained
    calls: list[tuple[str, int, int]] = []
    classical.train_classical(small_all, out, progress=lambda *a: calls.append(a), workers=1)
    feature_calls = [c for c in calls if c[0] == "features"]
    assert feature_calls == [("features", 0, 0)]  # nothing left to compute


def test_answers_always_pass_the_scorers_schema(small_all, trained):
    out, _, _ = trained
    model = classical.build(str(out))
    assert model.name == f"classical/{out}"
    seen = set()
    for regime in ("precise", "coarse"):
        for row in iter_rows(small_all / f"test-{regime}.parquet"):
            text = model.answer(_task(row))
            result = metrics(row.category, row.gold, text)
            assert result["valid"], (row.id, text, result["error"])
            if regime == "coarse":
                assert json.loads(text)["answer"] in row.options
            seen.add(row.category)
    assert seen == set(lb.ALL_CATEGORIES)


def test_same_seed_same_heads(small_all, trained, tmp_path):
    """Refitting from the cached features with the same seed reproduces every prediction."""
    out, _, _ = trained
    files = classical.data_files(small_all)
    examples = classical.load_examples(files, feature_cache.load_cache(out / "features"))
    heads = classical.fit_heads(examples, seed=42)
    saved, _ = classical.load_heads(out)
    ex = next(e for e in examples if e.category == lb.LOCALIZE)
    q = ex.feats.question()
    for key in (("precise", "localize.present"), ("precise", "localize.start")):
        a, b = heads[key], saved[key]
        if a.kind == "clf":
            assert a.proba(q)[0] == pytest.approx(b.proba(q)[0])
        else:
            assert a.value(q)[0] == pytest.approx(b.value(q)[0], rel=1e-6)


def test_registry_resolves_classical_paths(trained):
    from tsbench.baselines import build_policy

    out, _, _ = trained
    policy = build_policy(f"classical/{out}")
    assert policy.name == f"classical/{out}" and policy.harnesses() == ("direct",) and policy.reference()
    with pytest.raises(ValueError):
        build_policy("classical/does/not/exist")
