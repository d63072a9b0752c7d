"""TimerBed-style classification from .ts files: real UCR/UEA data that aeon ships in its wheel
(GunPoint, BasicMotions: no network) and a TimerBed-named task this test writes with aeon."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

datasets = pytest.importorskip("aeon.datasets")

from tsbench.leaderboard.stats import mcq_macro_f1  # noqa: E402
from tsbench.tasks import get_taskset  # noqa: E402
from tsbench.tasks.base import SampleRef  # noqa: E402

SHIPPED = Path(datasets.__file__).parent / "data"


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("timerbed")
    for name in ("GunPoint", "BasicMotions"):
        (folder / name).mkdir()
        for split in ("TRAIN", "TEST"):
            shutil.copy(SHIPPED / name / f"{name}_{split}.ts", folder / name / f"{name}_{split}.ts")
    rng = np.random.default_rng(0)
    emg = [rng.standard_normal((1, int(n))) for n in rng.integers(80, 120, size=9)]  # unequal lengths
    datasets.save_to_ts_file(
        emg,
        np.array(["0", "1", "2"] * 3),
        label_type="classification",
        path=str(folder / "EMG"),
        problem_name="EMG",
        file_suffix="_TEST",
    )
    (folder / "EMG" / "labels.json").write_text(json.dumps({"0": "Healthy", "1": "Myopathy", "2": "Neuropathy"}))
    return folder


@pytest.fixture(scope="module")
def generated(release, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("timerbed-out")
    get_taskset("timerbed").generate({"path": str(release), "seed": 1, "split": "all", "rows_per_cell": 30}, out)
    return out / "seed1"


def test_rows_from_shipped_and_written_ts_files(generated, release):
    taskset = get_taskset("timerbed")
    index = taskset.index(taskset.resolve([str(generated)], seed=1, split="test", root=None, filters={}), {})
    assert index.groupby("category").size().to_dict() == {"basicmotions": 30, "emg": 9, "gunpoint": 30}
    X, y = datasets.load_gunpoint(split="test")
    gunpoint = index[index["category"] == "gunpoint"]
    for rec in gunpoint.itertuples():
        sample = taskset.load(SampleRef("timerbed", rec.path, rec.id))
        at = json.loads(rec.source)["index"]
        assert np.allclose(sample.task.values[0], X[at, 0], atol=1e-5) and sample.gold["answer"] == str(y[at])
    emg = taskset.load(SampleRef("timerbed", index.path[0], index[index["category"] == "emg"].id.iloc[0]))
    assert emg.task.options == ["Healthy", "Myopathy", "Neuropathy"] and emg.task.channel_names == ["EMG"]
    assert "electromyography" in emg.task.question and 80 <= emg.task.length < 120
    basic = index[index["category"] == "basicmotions"].iloc[0]
    assert basic.n_channels == 6 and basic.length == 100
    assert (generated / "train.parquet").is_file()


def test_accuracy_and_macro_f1_on_gunpoint(generated):
    taskset = get_taskset("timerbed")
    index = taskset.index([generated / "test.parquet"], {})
    rows = index[index["category"] == "gunpoint"]
    golds = [json.loads(g) for g in rows["gold"]]
    perfect = [taskset.score("gunpoint", g, f"<class>{g['answer']}</class>") for g in golds]
    assert all(s.score == 1.0 for s in perfect)
    tagged = taskset.score(
        "gunpoint", golds[0], f"<think>maybe 9</think><class>{golds[0]['answer']}</class><extension>x</extension>"
    )
    assert tagged.score == 1.0  # TimeMaster's output format
    # A <class> span is read as TimeMaster's public reward reads it (issue 36); an `Answer:` line is not
    # (it scored before), a JSON "answer" only in a reply with no <class> span.
    untagged = taskset.score("gunpoint", golds[0], f"Answer: {golds[0]['answer']}")
    assert (untagged.score, untagged.valid) == (0.0, False)
    assert taskset.score("gunpoint", golds[0], json.dumps({"answer": golds[0]["answer"]})).score == 1.0
    constant = [taskset.score("gunpoint", g, "<class> 1 </class>") for g in golds]
    labels = [g["answer"] for g in golds]
    accuracy = np.mean([s.score for s in constant])
    assert accuracy == pytest.approx(labels.count("1") / len(labels))
    classes = sorted(set(labels))  # a dataset outside the six: its classes as they occur
    f1 = mcq_macro_f1(classes, labels, [s.parsed["answer"] for s in constant])  # as the leaderboard does
    share = labels.count("1") / len(labels)
    assert f1 == pytest.approx((2 * share / (1 + share)) / 2)  # class 1 F1, class 2 F1 = 0


def test_same_seed_same_bytes_and_bad_split(release, generated, tmp_path):
    get_taskset("timerbed").generate({"path": str(release), "seed": 1, "split": "all", "rows_per_cell": 30}, tmp_path)
    assert (tmp_path / "seed1" / "test.parquet").read_bytes() == (generated / "test.parquet").read_bytes()
    with pytest.raises(Exception, match="--split must be test, train or all"):
        get_taskset("timerbed").generate({"path": str(release), "split": "val"}, tmp_path)
