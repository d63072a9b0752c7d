"""Classical heads: train on a `--preset small` train+val split, answer its test split in schema."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tsbench.baselines import classical, classical_policy, feature_cache
from tsbench.core.episode import EpisodeTask
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.metrics import metrics
from tsbench.tasks.anomalyxl.rows import iter_rows


@pytest.fixture(scope="module")
def small_all(classical_small) -> Path:
    """`--preset small` at seed 42, all three splits (shared by the run: read it, never write it)."""
    return classical_small[0] / "data" / "seed42"


@pytest.fixture(scope="module")
def trained(classical_small, tmp_path_factory) -> tuple[Path, dict, list]:
    """The heads fitted on small_all's train and val splits once per test run (conftest's classical_small),
    copied here: tests below refit into it and add rows to its feature cache."""
    folder, built = classical_small
    out = tmp_path_factory.mktemp("classical") / "model"
    shutil.copytree(folder / "model", out)
    return out, built["summary"], [tuple(call) for call in built["progress"]]


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
    model = classical_policy.build(str(out))
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
    examples = list(classical.iter_examples(files, feature_cache.load_cache(out / "features")))
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


def test_a_training_row_limit_spreads_over_categories_and_reuses_the_cache(small_all, trained, tmp_path):
    from tsbench.tasks.anomalyxl.rows import read_index

    out, _, _ = trained
    files = classical.data_files(small_all)
    keep = classical.limited_rows(files, 20)
    precise = read_index(small_all / "train-precise.parquet")
    chosen = precise[precise["id"].isin(keep[small_all / "train-precise.parquet"])]
    assert len(chosen) == 20 and set(chosen["category"].value_counts()) == {4}  # round-robin over 5 categories
    signals = {feature_cache.signal_key(json.loads(p)) for p in chosen["plan"]}
    coarse = read_index(small_all / "train-coarse.parquet")
    kept = coarse[coarse["id"].isin(keep[small_all / "train-coarse.parquet"])]
    assert len(kept) and {feature_cache.signal_key(json.loads(p)) for p in kept["plan"]} <= signals
    assert keep[small_all / "val-precise.parquet"] == set(read_index(small_all / "val-precise.parquet")["id"])
    shutil.copytree(out / "features", tmp_path / "m" / "features")
    calls: list = []
    summary = classical.train_classical(small_all, tmp_path / "m", lambda *a: calls.append(a), workers=1, train_rows=20)
    assert [c for c in calls if c[0] == "features"] == [("features", 0, 0)]  # every feature from the cache
    assert summary["train_rows_limit"] == 20 and summary["rows"] < 360


def test_eval_reads_features_from_the_model_cache(small_all, trained):
    """An MCQ row shares its precise source's series: its features are not computed twice, and a
    second model (a later eval) finds them on disk."""
    from tsbench.tasks.anomalyxl.rows import read_index

    out, _, _ = trained
    precise = read_index(small_all / "test-precise.parquet")
    coarse = read_index(small_all / "test-coarse.parquet")
    by_signal = {feature_cache.signal_key(json.loads(p)): rid for rid, p in zip(precise["id"], precise["plan"])}
    pair = next(
        (by_signal[k], rid)
        for rid, p in zip(coarse["id"], coarse["plan"])
        if (k := feature_cache.signal_key(json.loads(p))) in by_signal
    )
    rows = {r.id: r for regime in ("precise", "coarse") for r in iter_rows(small_all / f"test-{regime}.parquet")}
    model = classical_policy.build(str(out))
    model.answer(_task(rows[pair[0]]))
    computed = model.computed
    assert computed <= 1
    model.answer(_task(rows[pair[1]]))
    assert model.computed == computed  # the MCQ row's features came from the cache
    if model._writer is not None:
        model._writer.flush()
    again = classical_policy.build(str(out))
    again.answer(_task(rows[pair[1]]))
    assert again.computed == 0


def test_training_writes_only_into_a_folder_of_its_own(small_all, trained, tmp_path):
    """--out holding a user's files is refused before anything is written (a stale head file is unlinked
    on a refit); an empty folder, a finished model and a stopped run's feature cache are ours."""
    from tsbench.core.errors import UserError

    user = tmp_path / "work"
    (user / "heads").mkdir(parents=True)
    (user / "meta.json").write_text('{"mine": 1}')
    (user / "heads" / "notes.txt").write_text("keep")
    with pytest.raises(UserError, match="not a classical baseline's folder"):
        classical.train_classical(small_all, user, workers=1)
    assert (user / "meta.json").read_text() == '{"mine": 1}' and sorted(p.name for p in user.rglob("*")) == [
        "heads",
        "meta.json",
        "notes.txt",
    ]
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="not a folder"):
        classical.refuse_foreign_out(tmp_path / "file")
    stopped = tmp_path / "stopped" / "features"
    stopped.mkdir(parents=True)
    (stopped / "part-1-00000.parquet").write_bytes(b"")
    for ours in (tmp_path / "empty", tmp_path / "stopped", trained[0]):
        classical.refuse_foreign_out(ours)


def test_all_channel_windows_widen_the_core_run_to_its_flanks():
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, 4000)
    x[1000:1300] = 3.0  # an event: flanks at 3 sigma
    x[1120:1160] = 8.0  # its peak: the only part past 4 sigma (the window before: 1120-1160)
    start, end = classical.widened_run(x)
    assert 980 <= start <= 1000 and 1300 <= end <= 1320
    assert classical.widened_run(np.zeros(100)) is None  # nothing past 4 sigma: no run
    long = np.zeros(50_000)
    long[20_000:22_000] = 3.0
    long[20_900:21_100] = 9.0
    start, end = classical.widened_run(long + rng.normal(0, 0.5, 50_000))  # decimated: mapped back by the stride
    assert abs(start - 20_000) <= 8 and abs(end - 22_000) <= 8


def test_training_progress_in_a_log_weighs_rows_by_cost():
    from tsbench.cli.train import LogProgress

    lines: list[str] = []
    now = [0.0]
    log = LogProgress(lines.append, step=0.25, every=1e9, clock=lambda: now[0])
    costs = [16 * 131_072] + [131_072] * 4  # one 16-channel row, four single-channel rows
    total, done = sum(costs), 0
    log("features", 0, total)
    for cost in costs:
        now[0] += cost / 1e5  # time goes with the cost
        done += cost
        log("features", done, total)
    assert lines[0].startswith("features:   0.0% done") and "ETA ?" in lines[0]
    assert "80.0% done" in lines[1] and "ETA 0m05s" in lines[1]  # the big row is 80 % of the work
    assert lines[-1].startswith("features: 100.0% done") and len(lines) == 3
