"""LTAF from WFDB records this test writes with wfdb itself: window rules on the generated rows,
determinism, gold scoring 1, and the seam through the real `tsbench` command (generate, eval),
run in-process through its entry point (`tsbench.cli.main`) to keep the test fast."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

wfdb = pytest.importorskip("wfdb")

from tsbench.tasks import get_taskset  # noqa: E402
from tsbench.tasks.base import SampleRef  # noqa: E402
from tsbench.tasks.ltaf import reader  # noqa: E402

FS = 128


def write_record(folder: Path, name: str, seed: int, minutes: int = 40) -> None:
    """Beats every 100 samples, an ectopic beat (V or A) every ~3 min, an AF bout at 30-33 min,
    a noise annotation at 12 min; two channels."""
    rng = np.random.default_rng(seed)
    n = minutes * 60 * FS
    beats = np.arange(50, n - 50, 100)
    signal = 0.05 * rng.standard_normal((n, 2))
    for b in beats:
        signal[b - 3 : b + 3, 0] += 1.0
    signal[:, 1] -= signal[:, 0]
    symbols = ["N"] * len(beats)
    for k in range(20, len(beats) - 20, 230):
        symbols[k] = "V" if (k // 230) % 2 == 0 else "A"
    notes = [""] * len(beats)
    extra = [(0, "+", "(N"), (30 * 60 * FS, "+", "(AFIB"), (33 * 60 * FS, "+", "(N"), (12 * 60 * FS + 7, "~", "")]
    merged = sorted([*zip(beats.tolist(), symbols, notes), *extra], key=lambda a: (a[0], a[1] != "+"))
    wfdb.wrsamp(
        name,
        fs=FS,
        units=["mV", "mV"],
        sig_name=["ECG1", "ECG2"],
        p_signal=signal,
        fmt=["16", "16"],
        write_dir=str(folder),
    )
    wfdb.wrann(
        name,
        "atr",
        np.array([a[0] for a in merged]),
        symbol=[a[1] for a in merged],
        aux_note=[a[2] for a in merged],
        write_dir=str(folder),
        fs=FS,
    )


@pytest.fixture(scope="module")
def ltafdb(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ltafdb")
    write_record(folder, "00", 0)
    write_record(folder, "01", 1)
    return folder


@pytest.fixture(scope="module")
def generated(ltafdb, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ltaf-out")
    get_taskset("ltaf").generate({"path": str(ltafdb), "seed": 3, "windows": 10}, out)
    return out / "seed3"


def test_rows_follow_the_window_rules(ltafdb, generated):
    taskset = get_taskset("ltaf")
    files = taskset.resolve([str(generated)], seed=3, split="test", root=None, filters={})
    index = taskset.index(files, {})
    assert len(index) == 10 and index["stratum"].value_counts().to_dict() == {
        reader.PVC: 4,
        reader.APC: 4,
        "No anomaly": 2,
    }
    ann = {key: wfdb.rdann(str(ltafdb / key), "atr") for key in ("00", "01")}
    for rec in index.itertuples():
        sample = taskset.load(SampleRef("ltaf", rec.path, rec.id))
        source, gold = json.loads(rec.source), sample.gold
        start, end = source["start"], source["end"]
        assert sample.task.values.shape == (2, end - start) and 60 * FS <= end - start <= 1017 * FS
        assert np.allclose(sample.task.values.mean(axis=1), 0, atol=1e-3)  # z-normalized per channel
        a = ann[source["record"]]
        inside = [(s, sym) for s, sym in zip(a.sample, a.symbol) if start <= s < end and sym not in ("N", "+")]
        rhythm = [n for s, sym, n in zip(a.sample, a.symbol, a.aux_note) if sym == "+" and s <= start][-1]
        assert rhythm == "(N" and not any(sym == "+" for s, sym in zip(a.sample, a.symbol) if start < s < end)
        if gold["answer"] == "No anomaly":
            assert inside == []
            continue
        assert len(inside) == 1 and reader.TARGETS[inside[0][1]] == gold["answer"]  # one beat, the gold one
        assert gold["start"] <= inside[0][0] - start < gold["end"]  # its RR bracket
        margin = 0.05 * (end - start)
        assert gold["start"] >= margin and (end - start) - gold["end"] >= margin
        message = json.dumps({"kind": gold["answer"], "start": gold["start"], "end": gold["end"]})
        assert taskset.score(rec.category, gold, message).score == 1.0
    manifest = json.loads((generated / "manifest.json").read_text())
    assert manifest["family"] == "ltaf" and manifest["seed"] == 3
    assert set(manifest["splits"]["test"]["sources"]) == {"00.hea", "00.atr", "00.dat", "01.hea", "01.atr", "01.dat"}


def test_same_seed_same_bytes(ltafdb, generated, tmp_path):
    get_taskset("ltaf").generate({"path": str(ltafdb), "seed": 3, "windows": 10}, tmp_path)
    assert (tmp_path / "seed3" / "test.parquet").read_bytes() == (generated / "test.parquet").read_bytes()


def test_generate_and_eval_through_the_command(ltafdb, tmp_path, cli):
    out = tmp_path / "data"
    code, stdout, err = cli("generate", "--family", "ltaf", "--path", str(ltafdb), "--seed", "5", "--out", str(out))
    assert code == 0, err
    assert "test.parquet" in stdout and (out / "seed5" / "manifest.json").is_file()
    run = tmp_path / "run"
    code, stdout, err = cli(
        "eval",
        "--family",
        "ltaf",
        "--data",
        str(out / "seed5"),
        "--model",
        "scripted/zscore",
        "--harness",
        "single-pass-text",
        "--limit-per-category",
        "1",
        "--out",
        str(run),
    )
    assert code == 0, err
    samples = pd.read_parquet(run / "samples.parquet")
    assert len(samples) == 1 and samples["error_type"].isna().all()
    assert samples["family"].unique().tolist() == ["ltaf"] and samples["valid"].all()
    results = json.loads((run / "results.json").read_text())
    assert results["summary"]["overall"]["n"] == 1 and results["dataset"]["family"] == "ltaf"


@pytest.mark.parametrize(
    "args, needle",
    [
        ([], "physionet.org/content/ltafdb"),  # no --path
        (["--path", "{tmp}"], "physionet.org/content/ltafdb"),  # nothing there
        (["--path", "{tmp}/nope"], "does not exist"),
        (["--path", "{tmp}", "--preset", "small"], "--preset do not apply to --family ltaf"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, cli, args, needle):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    code, _, err = cli("generate", "--family", "ltaf", *args, "--out", str(tmp_path / "o"))
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1
