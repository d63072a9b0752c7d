"""TimerBed's six releases, each written here in the format it is published in with the library that
format belongs to (aeon's .ts writer; a UCR .arff and .tsv as the archive lays them out; wfdb.wrsamp
for PhysioNet records; numpy.savetxt for the UCI HAR text files), then read by `tsbench generate`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

datasets = pytest.importorskip("aeon.datasets")
wfdb = pytest.importorskip("wfdb")

from PIL import Image  # noqa: E402

from tsbench.core.errors import UserError  # noqa: E402
from tsbench.tasks import get_taskset  # noqa: E402
from tsbench.tasks.base import SampleRef  # noqa: E402
from tsbench.tasks.timerbed.labels import TASKS  # noqa: E402
from tsbench.tasks.timerbed.readers import fixed_split  # noqa: E402

RNG = np.random.default_rng(7)
ECG_LABELS = {"A00001": "N", "A00002": "A", "A00003": "O", "A00004": "~", "A00005": "N"}
EMG_LENGTHS = {"emg_healthy": 3 * 1500 + 10, "emg_myopathy": 4 * 1500, "emg_neuropathy": 5 * 1500 + 1499}


def write_arff(path: Path, X: np.ndarray, y: list[str], classes: list[str]) -> None:
    """A UCR .arff as the archive publishes it: one numeric attribute per time point, then the class."""
    lines = [f"@relation {path.stem}"]
    lines += [f"@attribute att{t} numeric" for t in range(X.shape[1])]
    lines += ["@attribute target {" + ",".join(classes) + "}", "@data"]
    lines += [",".join(f"{v:.6f}" for v in row) + f",{label}" for row, label in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("timerbed-release")
    # RCW: UEA RightWhaleCalls, .ts written by aeon (class names as the archive stores them).
    for suffix, n in (("_TRAIN", 6), ("_TEST", 4)):
        datasets.save_to_ts_file(
            RNG.standard_normal((n, 1, 40)),
            np.array(["RightWhale", "NoWhale"] * (n // 2)),
            label_type="classification",
            path=str(root / "RightWhaleCalls"),
            problem_name="RightWhaleCalls",
            file_suffix=suffix,
        )
    # TEE: UCR Lightning7 as .arff (classes 0..6).
    (root / "Lightning7").mkdir()
    for suffix, n in (("_TRAIN", 7), ("_TEST", 7)):
        write_arff(
            root / "Lightning7" / f"Lightning7{suffix}.arff",
            RNG.standard_normal((n, 31)),
            [str(i % 7) for i in range(n)],
            [str(c) for c in range(7)],
        )
    # CTU: UCR Computers as the 2018 archive's .tsv (class first, tab separated).
    (root / "Computers").mkdir()
    for suffix in ("_TRAIN", "_TEST"):
        rows = np.column_stack([np.array([1, 2, 1, 2]), RNG.random((4, 72))])
        np.savetxt(root / "Computers" / f"Computers{suffix}.tsv", rows, delimiter="\t", fmt="%.6g")
    # ECG: PhysioNet/CinC 2017, WFDB records at 300 Hz and REFERENCE.csv.
    ecg = root / "training2017"
    ecg.mkdir()
    for k, record in enumerate(ECG_LABELS):
        signal = RNG.standard_normal((1500 * (2 + k % 2) + 700, 1))
        wfdb.wrsamp(record, fs=300, units=["mV"], sig_name=["ECG"], p_signal=signal, fmt=["16"], write_dir=str(ecg))
    (ecg / "REFERENCE.csv").write_text("".join(f"{r},{c}\n" for r, c in ECG_LABELS.items()))
    # EMG: PhysioNet emgdb, three WFDB records at 4 kHz.
    emg = root / "emgdb"
    emg.mkdir()
    for record, n in EMG_LENGTHS.items():
        signal = RNG.standard_normal((n, 1)) * 0.1
        wfdb.wrsamp(record, fs=4000, units=["mV"], sig_name=["EMG"], p_signal=signal, fmt=["16"], write_dir=str(emg))
    # HAR: the UCI HAR Dataset's raw signals and activity ids.
    har = root / "UCI HAR Dataset"
    for split, n in (("train", 12), ("test", 6)):
        signals = har / split / "Inertial Signals"
        signals.mkdir(parents=True)
        np.savetxt(har / split / f"y_{split}.txt", np.arange(n) % 6 + 1, fmt="%d")
        for axis in ("x", "y", "z"):
            np.savetxt(signals / f"body_acc_{axis}_{split}.txt", RNG.standard_normal((n, 128)) * 0.3, fmt="%.7e")
            np.savetxt(signals / f"total_acc_{axis}_{split}.txt", RNG.standard_normal((n, 128)), fmt="%.7e")
    return root


@pytest.fixture(scope="module")
def generated(release, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("timerbed-out")
    get_taskset("timerbed").generate({"path": str(release), "seed": 3, "split": "all"}, out)
    return out / "seed3"


def rows_of(folder: Path, split: str):
    taskset = get_taskset("timerbed")
    return taskset.index(taskset.resolve([str(folder)], seed=3, split=split, root=None, filters={}), {})


def test_every_release_is_read_in_its_published_format(generated):
    test, train = rows_of(generated, "test"), rows_of(generated, "train")
    assert set(test["category"]) == set(TASKS) == set(train["category"])
    counts = test.groupby("category").size().to_dict()
    assert counts["rcw"] == 4 and counts["tee"] == 7 and counts["ctu"] == 4 and counts["har"] == 6
    # EMG: 3 + 4 + 5 non-overlapping 1500-sample windows (remainders dropped), ceil(20%) in test.
    emg = {"train": train[train.category == "emg"], "test": test[test.category == "emg"]}
    assert len(emg["train"]) + len(emg["test"]) == 12 and len(emg["test"]) == 3  # one per class
    assert set(emg["test"].length) == {1500}
    # ECG: records split whole (one of the two N records in test), each cut into 1500-sample windows.
    ecg_sources = {
        s: {json.loads(x)["record"] for x in f[f.category == "ecg"].source}
        for s, f in (("test", test), ("train", train))
    }
    assert not ecg_sources["test"] & ecg_sources["train"] and ecg_sources["test"] | ecg_sources["train"] == set(
        ECG_LABELS
    )
    assert set(test[test.category == "ecg"].length) | set(train[train.category == "ecg"].length) == {1500}


def test_rows_carry_the_papers_class_names_prompts_and_values(generated, release):
    taskset = get_taskset("timerbed")
    test = rows_of(generated, "test")
    golds = {c: {json.loads(g)["answer"] for g in f.gold} for c, f in test.groupby("category")}
    assert golds["rcw"] == {"RightWhale", "NoWhale"} and golds["ctu"] == {"Desktop", "Laptop"}
    assert golds["tee"] == set(TASKS["tee"].classes) and golds["har"] == set(TASKS["har"].classes)
    for category, frame in test.groupby("category"):
        sample = taskset.load(SampleRef("timerbed", frame.path.iloc[0], frame.id.iloc[0]))
        assert sample.task.options == list(TASKS[category].classes)
        assert "<class> </class>" in sample.task.question and "<think> </think>" in sample.task.question
    har = test[test.category == "har"].iloc[0]
    sample = taskset.load(SampleRef("timerbed", har.path, har.id))
    expected = np.loadtxt(release / "UCI HAR Dataset" / "test" / "Inertial Signals" / "body_acc_y_test.txt")[0]
    assert sample.task.channel_names == ["body_acc_x", "body_acc_y", "body_acc_z"]
    assert np.allclose(sample.task.values[1], expected, atol=1e-6) and sample.gold["answer"] == "walking"
    assert "value ranges (minimum and maximum) of the x, y, and z channels" in sample.task.question
    assert Image.open(io.BytesIO(sample.task.image)).size == (389, 233)  # the paper's HAR plot size
    ctu = test[test.category == "ctu"].iloc[1]
    sample = taskset.load(SampleRef("timerbed", ctu.path, ctu.id))
    assert sample.gold["answer"] == "Laptop" and "Powering the Nation" in sample.task.question
    assert Image.open(io.BytesIO(sample.task.image)).size == (562, 230)


def test_describe_plot_writes_the_papers_figure(generated, tmp_path):
    taskset = get_taskset("timerbed")
    ecg = rows_of(generated, "test").query("category == 'ecg'").iloc[0]
    out = taskset.plot([generated / "test.parquet"], ecg.id, tmp_path / "ecg.png")
    pixels = np.asarray(Image.open(out).convert("RGB")).reshape(-1, 3).astype(int)
    assert Image.open(out).size == (980, 230)
    blue = (pixels[:, 2] - pixels[:, 0] > 80).sum()  # matplotlib's first colour (C0), not the old grey lines
    assert blue > 1000
    har = rows_of(generated, "test").query("category == 'har'").iloc[0]
    drawn = np.asarray(
        Image.open(taskset.plot([generated / "test.parquet"], har.id, tmp_path / "har.png")).convert("RGB")
    )
    orange = ((drawn[..., 0] > 200) & (drawn[..., 1] > 100) & (drawn[..., 1] < 160) & (drawn[..., 2] < 80)).sum()
    green = ((drawn[..., 1] - drawn[..., 0] > 60) & (drawn[..., 1] - drawn[..., 2] > 60)).sum()
    assert orange > 50 and green > 50  # three channels overlaid on one axis, one colour each (C0, C1, C2)
    assert taskset.plot([generated / "test.parquet"], "no-such-row", tmp_path / "x.png") is None


def test_the_fixed_split_depends_only_on_the_unit_names():
    units = {f"r{i}": "AB"[i % 2] for i in range(50)}
    split = fixed_split(units)
    assert split == fixed_split(dict(reversed(list(units.items()))))
    assert sum(v == "test" for v in split.values()) == 10
    emg = fixed_split(
        {f"{c}/{k}": c for c, n in (("healthy", 33), ("myopathy", 74), ("neuropathy", 98)) for k in range(n)}
    )
    assert sum(v == "test" for v in emg.values()) == 41  # the paper's EMG test size (205 windows)


def test_missing_or_odd_files_are_one_line_naming_the_public_release(release, tmp_path):
    taskset = get_taskset("timerbed")
    with pytest.raises(UserError, match="no TimerBed release files under .*physionet.org/content/emgdb"):
        taskset.generate({"path": str(tmp_path)}, tmp_path / "out")
    bad = tmp_path / "bad"
    (bad / "emgdb").mkdir(parents=True)
    (bad / "emgdb" / "emg_healthy.hea").write_text("emg_healthy 1 4000 10\n")
    with pytest.raises(UserError, match=r"EMG: records \['emg_myopathy', 'emg_neuropathy'\] are missing"):
        taskset.generate({"path": str(bad)}, tmp_path / "out")
    odd = tmp_path / "odd" / "Computers"
    odd.mkdir(parents=True)
    (odd / "Computers_TEST.ts").write_text("this is not a ts file\n")
    with pytest.raises(UserError, match="is not a readable UCR/UEA .ts file.*UCR archive Computers"):
        taskset.generate({"path": str(odd.parent)}, tmp_path / "out")
    har = tmp_path / "har" / "UCI HAR Dataset" / "test"
    har.mkdir(parents=True)
    np.savetxt(har / "y_test.txt", [1, 2], fmt="%d")
    np.savetxt(har / "X_test.txt", np.zeros((2, 561)))
    with pytest.raises(UserError, match="HAR: .*body_acc_x_test.txt.*561 features"):
        taskset.generate({"path": str(tmp_path / "har")}, tmp_path / "out")
    reference = tmp_path / "cinc" / "training2017"
    reference.mkdir(parents=True)
    (reference / "REFERENCE.csv").write_text("A09999,N\n")
    with pytest.raises(UserError, match="A09999 is not a CinC 2017 WFDB record"):
        taskset.generate({"path": str(tmp_path / "cinc"), "categories": ["ecg"]}, tmp_path / "out")


def test_training_stream_is_the_fixed_train_split_without_a_curriculum(generated):
    from tsbench.tasks.base import EpochStream, TrainingRequest

    taskset = get_taskset("timerbed")
    train = rows_of(generated, "train")
    request = TrainingRequest(seed=1, steps=50, tasks_per_step=4, data=(str(generated),), warm_steps=40)
    stream = taskset.training_stream(request)
    assert isinstance(stream, EpochStream) and stream.step_metrics(40) == {"epoch": float(39 * 4 // len(train))}
    first_epoch = {stream.sample(1 + n // 4, n % 4).ref.id for n in range(len(train))}
    assert first_epoch == set(train["id"])  # every train row once per epoch, warm steps or not
    with pytest.raises(UserError, match="fixed train split: --preset"):
        taskset.training_stream(TrainingRequest(seed=1, steps=1, tasks_per_step=1, options={"preset": "small"}))
