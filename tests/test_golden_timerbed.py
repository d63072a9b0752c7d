"""TimerBed's readers against the reference: aeon's `.ts` reader on the files in tests/golden/timerbed/
(`?` inside a series, at its start and at its end, unequal lengths, several channels; aeon's output
beside them, made as the README there says). tsbench keeps every NaN where aeon has one, so a plot shows
a gap, never a drop to 0; WFDB records too short for one window are counted and reported."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

datasets = pytest.importorskip("aeon.datasets")
wfdb = pytest.importorskip("wfdb")

from tsbench.tasks import get_taskset  # noqa: E402
from tsbench.tasks.base import SampleRef  # noqa: E402
from tsbench.tasks.timerbed.plots import render_png  # noqa: E402
from tsbench.tasks.timerbed.readers import find_releases  # noqa: E402

GOLDEN = Path(__file__).parent / "golden" / "timerbed"
VECTORS = json.loads((GOLDEN / "ts_reader.json").read_text())


def aeon_values(case: dict) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in case["values"]], dtype=np.float64)


def test_every_series_is_aeons_with_its_missing_values_as_nan():
    read = {}
    for release in find_releases(GOLDEN / "inputs"):
        for split in release.files:
            for series in release.read(split):
                read[(series.source["file"], series.source["index"])] = series
    mismatches, with_nan = [], 0
    for case in VECTORS["cases"]:
        series = read[(Path(case["file"]).name, case["index"])]
        expected = aeon_values(case).astype(np.float32)  # tsbench stores float32
        with_nan += bool(np.isnan(expected).any())
        if series.label != case["label"] or not np.array_equal(series.values, expected, equal_nan=True):
            mismatches.append((case, series.values))
    print(
        f"aeon .ts reader: {len(VECTORS['cases'])} series compared ({with_nan} with NaN), {len(mismatches)} mismatches"
    )
    assert not mismatches, mismatches[:2]
    assert len(read) == len(VECTORS["cases"]) and with_nan > 100
    trailing = [c for c in VECTORS["cases"] if any(row[-1] is None for row in c["values"])]
    assert trailing and all(math.isnan(read[(Path(c["file"]).name, c["index"])].values[0, -1]) for c in trailing[:1])


def test_generated_rows_keep_the_nans_and_plot_them(tmp_path):
    taskset = get_taskset("timerbed")
    options = {"path": str(GOLDEN / "inputs"), "seed": 2, "categories": ["ctu"], "rows_per_cell": 6}
    taskset.generate(options, tmp_path)  # six rows: each load draws the row's plot
    rows = taskset.index([tmp_path / "seed2" / "test.parquet"], {})
    cases = {c["index"]: c for c in VECTORS["cases"] if c["file"].endswith("Computers_TEST.ts")}
    assert len(rows) == 6
    gaps = 0
    for row in rows.itertuples():
        sample = taskset.load(SampleRef("timerbed", row.path, row.id))
        case = cases[json.loads(row.source)["index"]]
        assert np.array_equal(sample.task.values, aeon_values(case).astype(np.float32), equal_nan=True)
        assert sample.gold["answer"] == {"1": "Desktop", "2": "Laptop"}[case["label"]]
        gaps += int(np.isnan(sample.task.values).sum())
    assert gaps > 0  # the parquet rows hold NaN where the file has '?'
    gappy = next(c for c in cases.values() if any(v is None for v in c["values"][0]))
    assert render_png("ctu", ["electricity"], aeon_values(gappy))[:4] == b"\x89PNG"


def write_record(folder: Path, name: str, n: int, fs: int, rng: np.random.Generator) -> None:
    signal = rng.standard_normal((n, 1)) * 0.1
    signal[10, 0] = np.nan  # written as WFDB's invalid sample, read back as NaN
    wfdb.wrsamp(name, fs=fs, units=["mV"], sig_name=["S"], p_signal=signal, fmt=["16"], write_dir=str(folder))


def test_wfdb_records_under_one_window_are_counted_and_reported_and_invalid_samples_stay_nan(tmp_path, cli):
    rng = np.random.default_rng(3)
    emg = tmp_path / "release" / "emgdb"
    emg.mkdir(parents=True)
    for name, n in (("emg_healthy", 4 * 1500), ("emg_myopathy", 1200), ("emg_neuropathy", 3 * 1500)):
        write_record(emg, name, n, 4000, rng)
    ecg = tmp_path / "release" / "training2017"
    ecg.mkdir()
    labels = {"A00001": "N", "A00002": "A", "A00003": "N", "A00004": "O", "A00005": "A"}
    for k, record in enumerate(labels):
        write_record(ecg, record, 900 if record == "A00003" else 3000 + k, 300, rng)
    (ecg / "REFERENCE.csv").write_text("".join(f"{r},{c}\n" for r, c in labels.items()))
    code, out, err = cli("generate", "--family", "timerbed", "--path", str(tmp_path / "release"), "--split", "all",
                         "--out", str(tmp_path / "out"), "--seed", "4")  # fmt: skip
    assert code == 0, err
    manifest = json.loads((tmp_path / "out" / "seed4" / "manifest.json").read_text())
    short = {split: manifest["splits"][split]["config"]["records_under_1500_samples"] for split in ("test", "train")}
    assert short["test"]["emg"] == short["train"]["emg"] == ["emg_myopathy"]
    assert [short[s].get("ecg") for s in ("test", "train") if short[s].get("ecg")] == [["A00003"]]
    taskset = get_taskset("timerbed")
    rows = taskset.index([tmp_path / "out" / "seed4" / "train.parquet"], {})
    first = rows[rows["source"].map(lambda x: json.loads(x)["window"] == 0)].iloc[0]
    values = taskset.load(SampleRef("timerbed", first.path, first.id)).task.values
    assert np.isnan(values[0, 10]) and np.isfinite(np.delete(values[0], 10)).all()
    printed = " ".join(out.split())
    ecg_split = "test" if short["test"].get("ecg") else "train"
    other = "train" if ecg_split == "test" else "test"
    head = "WFDB records under 1500 samples (one window) gave no row:"
    assert f"{ecg_split}: {head} ECG 1 (A00003); EMG 1 (emg_myopathy)" in printed
    assert f"{other}: {head} EMG 1 (emg_myopathy)" in printed
