"""A hostile --path, family by family, through the real `tsbench generate` (issue 37 items 1 and 3), and
TSAIA's release through the real `tsbench convert-tsaia` (the one command that reads its pickles).

Each family gets a small folder in its published layout, then one attack: a file that is a symlink to a
host file outside --path, and a `../` name (written inside a file where the family reads names from
files: REFERENCE.csv, query_group, a TSAIA CSV cell; else a symlink whose target climbs out). Each must
end in exit 2 with one line naming the file, and nothing written, so no outside byte reaches an output. The
two crafted small files that expanded to gigabytes are refused by a child process whose peak RSS stays
far under 1 GiB."""

from __future__ import annotations

import csv
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tsbench.tasks import get_taskset

wfdb = pytest.importorskip("wfdb")
pyedflib = pytest.importorskip("pyedflib")

MARKER = "HOST-FILE-37"


@pytest.fixture
def place(tmp_path) -> tuple[Path, Path]:
    """(root, outside): --path and a sibling folder the family must never read from."""
    (tmp_path / "root").mkdir()
    (tmp_path / "outside").mkdir()
    return tmp_path / "root", tmp_path / "outside"


def refused(cli, family: str, root: Path, naming: str, *extra: str) -> str:
    return refused_by(cli, ("generate", "--family", family), root, naming, *extra)


def refused_by(cli, command: tuple[str, ...], root: Path, naming: str, *extra: str) -> str:
    """`tsbench COMMAND --path root --out OUT EXTRA` ends in exit 2, one line with `naming`, nothing written."""
    out = root.parent / "out"
    code, _, stderr = cli(*command, "--path", root, "--out", out, *extra)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and naming in lines[0], stderr
    assert not out.exists() or not any(p.is_file() for p in out.rglob("*"))  # nothing written: no outside byte
    return lines[0]


def link_out(inside: Path, target: Path, relative: bool = False) -> None:
    """Replace `inside` by a symlink to `target` (by a `../` path when `relative`)."""
    if inside.is_dir() and not inside.is_symlink():
        shutil.rmtree(inside)
    else:
        inside.unlink(missing_ok=True)
    inside.symlink_to(os.path.relpath(target, inside.parent) if relative else target)


def retarget_header(header: Path, signal_file: str) -> None:
    """Point every signal line of a WFDB header at `signal_file` (wfdb opens it by that name)."""
    lines = header.read_text().splitlines()
    header.write_text("\n".join([lines[0], *(f"{signal_file} {line.split(' ', 1)[1]}" for line in lines[1:])]) + "\n")


# -- ltaf, sleep-psg, timerbed: WFDB and EDF --------------------------------------------------------------------
def wfdb_record(folder: Path, name: str, n: int, channels: list[str], fs: int) -> None:
    signal = np.random.default_rng(0).standard_normal((n, len(channels)))
    wfdb.wrsamp(name, fs=fs, units=["mV"] * len(channels), sig_name=channels, p_signal=signal,
                fmt=["16"] * len(channels), write_dir=str(folder))  # fmt: skip


def ltaf_record(folder: Path) -> None:
    wfdb_record(folder, "00", 4000, ["ECG1", "ECG2"], 128)
    beats = np.arange(50, 3950, 100)
    wfdb.wrann("00", "atr", beats, symbol=["N"] * len(beats), write_dir=str(folder), fs=128)


@pytest.mark.parametrize("relative", [False, True], ids=["symlink", "dotdot"])
def test_ltaf_refuses_a_signal_file_outside(cli, place, relative):
    root, outside = place
    ltaf_record(root)
    shutil.copy(root / "00.dat", outside / "00.dat")
    if relative:  # the header names a sibling (wfdb opens it by that name) that climbs out
        link_out(root / "leak.dat", outside / "00.dat", relative=True)
        retarget_header(root / "00.hea", "leak.dat")
        refused(cli, "ltaf", root, "leak.dat: leads to")
    else:
        link_out(root / "00.dat", outside / "00.dat")
        refused(cli, "ltaf", root, "00.dat: leads to")


def test_sleep_psg_refuses_an_edf_or_a_header_file_outside(cli, place):
    root, outside = place
    headers = [
        {"label": label, "dimension": "uV", "sample_frequency": 32, "physical_min": -10, "physical_max": 10,
         "digital_min": -32768, "digital_max": 32767, "transducer": "", "prefilter": ""}
        for label in ("Airflow", "Thor", "ABDO RES", "SpO2")
    ]  # fmt: skip
    with pyedflib.EdfWriter(str(outside / "host.edf"), 4, file_type=pyedflib.FILETYPE_EDFPLUS) as edf:
        edf.setSignalHeaders(headers)
        edf.writeSamples([np.zeros(32 * 60)] * 4)
    link_out(root / "p1.edf", outside / "host.edf")
    refused(cli, "sleep-psg", root, "p1.edf: leads to")
    (root / "p1.edf").unlink()
    wfdb_record(root, "tr00-0001", 2000, ["ABD", "CHEST", "AIRFLOW", "SaO2"], 200)
    wfdb.wrann("tr00-0001", "arousal", np.array([0]), symbol=['"'], aux_note=["N2"], write_dir=str(root), fs=200)
    shutil.move(root / "tr00-0001.dat", outside / "tr00-0001.dat")
    link_out(root / "leak.dat", outside / "tr00-0001.dat", relative=True)
    retarget_header(root / "tr00-0001.hea", "leak.dat")
    refused(cli, "sleep-psg", root, "leak.dat: leads to")


@pytest.fixture
def cinc(place) -> tuple[Path, Path]:
    root, outside = place
    (root / "training2017").mkdir()
    wfdb_record(root / "training2017", "A00001", 3200, ["ECG"], 300)
    (root / "training2017" / "REFERENCE.csv").write_text("A00001,N\n")
    wfdb_record(outside, "B00001", 3200, ["ECG"], 300)
    return root, outside


def test_timerbed_refuses_a_record_file_symlinked_out(cli, cinc):
    root, outside = cinc
    link_out(root / "training2017" / "A00001.dat", outside / "B00001.dat")
    refused(cli, "timerbed", root, "training2017/A00001.dat: leads to", "--split", "all")


def test_timerbed_refuses_a_reference_line_that_climbs_out(cli, cinc):
    root, _ = cinc
    with open(root / "training2017" / "REFERENCE.csv", "a") as handle:
        handle.write("../../outside/B00001,A\n")
    line = refused(cli, "timerbed", root, "training2017/REFERENCE.csv: names '../../outside/B00001'", "--split", "all")
    assert "not a plain relative path" in line


def test_timerbed_refuses_a_record_whose_header_declares_more_than_the_budget(cli, cinc):
    """A whole-record read (CinC, EMG) holds what the header declares: a 315 KB FLAC-coded record
    of 100M samples took generate to 1.7 GiB. The header alone is judged (here it claims 20M)."""
    root, _ = cinc
    header = root / "training2017" / "A00001.hea"
    first, *signals = header.read_text().splitlines()
    header.write_text("\n".join([" ".join([*first.split()[:3], "20000000"]), *signals]) + "\n")
    line = refused(cli, "timerbed", root, "training2017/A00001: the record its header declares", "--split", "all")
    assert "20,000,000 values, over the input budget of 16,777,216 values" in line


def test_timerbed_refuses_an_archive_file_symlinked_out(cli, place):
    root, outside = place
    (root / "Computers").mkdir()
    rows = np.column_stack([[1, 2, 1, 2], np.random.default_rng(0).random((4, 20))])
    for split in ("TRAIN", "TEST"):
        np.savetxt(root / "Computers" / f"Computers_{split}.tsv", rows, delimiter="\t", fmt="%.6g")
    np.savetxt(outside / "host.tsv", rows, delimiter="\t", fmt="%.6g")
    link_out(root / "Computers" / "Computers_TRAIN.tsv", outside / "host.tsv", relative=True)
    refused(cli, "timerbed", root, "Computers/Computers_TRAIN.tsv: leads to", "--split", "all")


# -- arfbench -----------------------------------------------------------------------------------------------------
def arfbench_release(root: Path, group: str = "1001_0") -> None:
    (root / "arfbench-data").mkdir()
    stamps = pd.Timestamp("2025-03-01", tz="UTC") + pd.to_timedelta(np.arange(100) * 60, unit="s")
    frame = pd.DataFrame({"timestamp": stamps, "p50": np.arange(100.0)})
    frame.to_parquet(root / "arfbench-data" / "1001_0_60.parquet")
    question = {"question": "When?", "task_category": "Anomaly Start", "options_str": json.dumps(["a", "b"]),
                "correct_answer": "a", "query_group": group}  # fmt: skip
    pd.DataFrame([question]).to_csv(root / "arfbench-qa.csv", index=False)


# -- cik, tsrbench, tsaia ------------------------------------------------------------------------------------------
def cik_record(seed: int, background: str = "hourly load") -> dict:
    frame = pd.DataFrame({"load": np.arange(24.0)}, index=pd.date_range("2024-01-01", periods=24, freq="h"))
    future = pd.DataFrame({"load": np.ones(6)}, index=pd.date_range("2024-01-02", periods=6, freq="h"))
    return {"name": "ElectricityIncreaseInPredictionTask", "seed": seed, "background": background,
            "past_time": frame.to_json(), "future_time": future.to_json(), "metric_scaling": 1.0}  # fmt: skip


def tsr_record(index: int, question: str = "Which trend?") -> dict:
    return {"question": question, "choices": ["up", "down"], "answer": "A", "task": "qualitative_decision",
            "timeseries": [[1.0, 2.0, 3.0, float(index)]]}  # fmt: skip


@pytest.mark.parametrize("relative", [False, True], ids=["symlink", "dotdot"])
@pytest.mark.parametrize("family", ["cik", "tsrbench"])
def test_json_lines_families_refuse_a_file_outside(cli, place, family, relative):
    root, outside = place
    make = cik_record if family == "cik" else tsr_record
    name = "all_tasks.jsonl" if family == "cik" else "decision/qualitative_decision.jsonl"
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text("".join(json.dumps(make(i)) + "\n" for i in range(4)))
    (outside / "host.jsonl").write_text("".join(json.dumps(make(i, MARKER)) + "\n" for i in range(4)))
    more = "more.jsonl" if family == "cik" else "decision/quantitative_decision.jsonl"  # TSRBench: a subtask's name
    link_out(root / more, outside / "host.jsonl", relative=relative)
    refused(cli, family, root, f"{more}: leads to")


def test_a_fifo_is_refused_not_waited_on(cli, place):
    root, _ = place
    (root / "decision").mkdir()
    (root / "decision" / "qualitative_decision.jsonl").write_text(json.dumps(tsr_record(0)) + "\n")
    os.mkfifo(root / "decision" / "quantitative_decision.jsonl")  # reading it would block forever
    refused(cli, "tsrbench", root, "decision/quantitative_decision.jsonl: is a FIFO")


def tsaia_release(root: Path, executor: str = "vars/a0.pkl") -> None:
    """The release's layout: CSVs whose file columns name pickles (convert-tsaia loads them in the jail)."""
    (root / "vars").mkdir()
    (root / "vars" / "a0.pkl").write_bytes(pickle.dumps({"VAL": np.arange(100.0, 130.0)}))
    (root / "vars" / "a0_truth.pkl").write_bytes(pickle.dumps(1.25))
    analysis = {"question_id": "a0", "question_type": "stock_rv_estimation-sharpe ratio", "prompt": "Sharpe?",
                "data_str": "", "executor_variables": executor, "ground_truth_data": "vars/a0_truth.pkl"}  # fmt: skip
    with (root / "analysis_questions.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(analysis))
        writer.writeheader()
        writer.writerow(analysis)


def tsaia_converted(root: Path, executor: str | None = None, rows: int = 2) -> None:
    """A folder as `tsbench convert-tsaia` writes it (what --family tsaia reads): conversion.json and
    multiple_choice.parquet, its file columns tagged JSON (`executor`: that text in every row instead)."""
    from tsbench.tasks.tsaia.encode import encode
    from tsbench.tasks.tsaia.reader import CONVERTED

    prices = pd.DataFrame({"S0": np.arange(30.0)}, index=pd.date_range("2024-01-02", periods=30, freq="B").date)
    tagged = json.dumps(encode({"VAL": prices, "market_VAL": prices}))
    table = {"question_id": [str(i) for i in range(rows)], "question_type": ["MarketAB-beta"] * rows,
             "prompt": ["More or less volatile?"] * rows, "data_info": ["VAL, market_VAL"] * rows,
             "options": [str(["Option A: less", "Option B: more"])] * rows, "answer": ["A"] * rows,
             "executor_variables": [executor or tagged] * rows, "conversion_error": [None] * rows}  # fmt: skip
    pq.write_table(pa.table({k: pa.array(v, pa.string()) for k, v in table.items()}), root / "multiple_choice.parquet")
    (root / "conversion.json").write_text(json.dumps({"converted": CONVERTED, "counts": {"multiple_choice": rows}}))


NAMES_IN_FILES = {  # family: (command, writer, a file it reads, writer options naming a file out, the refusal)
    "arfbench": (
        ("generate", "--family", "arfbench"),
        arfbench_release,
        "arfbench-data/1001_0_60.parquet",
        {"group": "../../outside/host"},
        "arfbench-qa.csv: names '../../outside/host_10.parquet'",
    ),
    "tsaia": (  # the release's pickles are read by the converter, and refused before any jail starts
        ("convert-tsaia",),
        tsaia_release,
        "vars/a0.pkl",
        {"executor": "../outside/host.pkl"},
        "analysis_questions.csv: names '../outside/host.pkl'",
    ),
}


@pytest.mark.parametrize("family", NAMES_IN_FILES)
def test_a_file_symlinked_out_and_a_name_read_from_a_file_that_climbs_out(cli, place, family):
    root, outside = place
    command, write, attacked, climbing, refusal = NAMES_IN_FILES[family]
    write(root)
    shutil.copy(root / attacked, outside / "host")
    link_out(root / attacked, outside / "host")
    refused_by(cli, command, root, f"{attacked}: leads to")
    shutil.rmtree(root)
    root.mkdir()
    write(root, **climbing)
    assert "not a plain relative path" in refused_by(cli, command, root, refusal)


def test_the_tsaia_converter_refuses_a_fifo_and_its_reader_a_table_outside(cli, place):
    root, outside = place
    tsaia_release(root)
    (root / "vars" / "a0.pkl").unlink()
    os.mkfifo(root / "vars" / "a0.pkl")  # a jail fed from it would wait forever
    refused_by(cli, ("convert-tsaia",), root, "vars/a0.pkl: is a FIFO")
    shutil.rmtree(root)
    root.mkdir()
    tsaia_converted(root)
    shutil.copy(root / "multiple_choice.parquet", outside / "host.parquet")
    link_out(root / "multiple_choice.parquet", outside / "host.parquet")
    refused(cli, "tsaia", root, "multiple_choice.parquet: leads to")


def test_a_converted_tsaia_table_is_judged_by_its_expanded_text_before_it_is_read(cli, place):
    """One 1 MiB tagged-JSON cell repeated by 300 rows: a small parquet file (one dictionary value)
    that would decode to 300 MiB."""
    root, _ = place
    tsaia_converted(root, executor=json.dumps({"VAL": "x" * 2**20}), rows=300)
    assert (root / "multiple_choice.parquet").stat().st_size < 2**20
    refused(cli, "tsaia", root, "multiple_choice.parquet: its text once dictionaries are expanded is 300.0 MiB")


# -- timesage released and snapshot ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def released_set(tmp_path_factory) -> Path:
    from tsbench.tasks.timesage.sources.released import export_released
    from tsbench.tasks.timesage.sources.synthetic import materialize, plan_set

    folder = tmp_path_factory.mktemp("released")
    export_released([materialize(plan) for plan in plan_set(42, 1, 2)], folder)
    return folder


@pytest.mark.parametrize("source", ["released", "snapshot"])
def test_timesage_refuses_a_prior_document_or_folder_that_leads_out(cli, place, released_set, source):
    root, outside = place
    shutil.rmtree(root)
    shutil.copytree(released_set, root)
    docs = next(root.glob("*/*/gt_source"))
    (outside / "secret.md").write_text(MARKER)
    first = sorted(docs.iterdir())[0]
    link_out(first, outside / "secret.md")
    refused(cli, "timesage", root, f"{first.relative_to(root)}: leads to", "--source", source)
    (outside / "docs").mkdir()
    link_out(docs, outside / "docs", relative=True)  # gt_source/ -> ../../../outside/docs
    refused(cli, "timesage", root, f"{docs.relative_to(root)}: leads to", "--source", source)
    shutil.rmtree(outside / "docs")
    docs.unlink()
    docs.mkdir()
    os.mkfifo(docs / "2025-07-15.md")
    refused(cli, "timesage", root, "2025-07-15.md: is a FIFO", "--source", source)


def split_sources(manifest: Path) -> list[dict[str, str]]:
    return [split["sources"] for split in json.loads(manifest.read_text())["splits"].values()]


def test_every_file_read_is_in_the_manifest_with_its_sha256(place, released_set, tmp_path):
    """Clean folders: the manifest lists the files read (TSAIA's converted tables, a record's signal file),
    keyed by their path under --path, with their sha256."""
    from tsbench.core.provenance import sha256_file
    from tsbench.tasks.timesage.generate import build_sets

    root, _ = place
    tsaia_converted(root)
    manifest, _ = get_taskset("tsaia").generate({"path": str(root), "seed": 1}, tmp_path / "tsaia")
    expected = {n: sha256_file(root / n) for n in ("conversion.json", "multiple_choice.parquet")}
    assert split_sources(manifest) and all(sources == expected for sources in split_sources(manifest))
    (tmp_path / "cinc").mkdir()
    wfdb_record(tmp_path / "cinc", "A00001", 3200, ["ECG"], 300)
    (tmp_path / "cinc" / "REFERENCE.csv").write_text("A00001,N\n")
    manifest, _ = get_taskset("timerbed").generate({"path": str(tmp_path / "cinc"), "split": "all"}, tmp_path / "tb")
    assert all(sorted(s) == ["A00001.dat", "A00001.hea", "REFERENCE.csv"] for s in split_sources(manifest))
    _, config = build_sets({"source": "released", "path": str(released_set)})
    every = {str(p.relative_to(released_set)): sha256_file(p) for p in released_set.rglob("*") if p.is_file()}
    assert config["sources"] == every


# -- input budgets: small files that expand ------------------------------------------------------------------------
def peak_rss_of_generate(*args: str) -> tuple[int, str, float]:
    """(exit code, stderr, peak RSS in MiB) of `tsbench generate ARGS` in a child, measured by a wrapper
    process whose only child it is (getrusage(RUSAGE_CHILDREN) covers every child a process waited for)."""
    wrapper = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run([sys.executable, '-c', 'from tsbench.cli import main; main()', *sys.argv[1:]],"
        " capture_output=True, text=True, timeout=300)\n"
        "sys.stderr.write(r.stderr)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.exit(r.returncode)\n"
    )
    run = subprocess.run([sys.executable, "-c", wrapper, "generate", *args], capture_output=True, text=True)
    return run.returncode, run.stderr, int(run.stdout.split()[-1]) / 1024


def test_a_785_byte_parquet_whose_dictionary_expands_to_gigabytes_is_refused_in_bounded_memory(tmp_path):
    """One 1 MiB dictionary value over 1,500 rows (the issue's file: before, 3.15 GiB and a traceback)."""
    (tmp_path / "cik").mkdir()
    column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(1500, dtype=np.int32)), pa.array(["a" * 2**20]))
    pq.write_table(
        pa.table({"name": ["X"] * 1500, "past_time": column}), tmp_path / "cik" / "test.parquet", compression="zstd"
    )
    assert (tmp_path / "cik" / "test.parquet").stat().st_size < 2000
    code, stderr, peak = peak_rss_of_generate(
        "--family", "cik", "--path", str(tmp_path / "cik"), "--out", str(tmp_path)
    )
    assert code == 2 and stderr.strip().count("\n") == 0, stderr
    assert "test.parquet: its text once dictionaries are expanded is 1,500.0 MiB, over the input budget" in stderr
    assert peak < 1024, peak


def test_a_small_parquet_of_twenty_million_run_length_rows_is_refused_in_bounded_memory(tmp_path):
    """20M equal rows in a ~200 KB ARFBench series file (before: 1.45 GiB and two minutes, then a row)."""
    root = tmp_path / "arfbench"
    root.mkdir()
    arfbench_release(root)
    (root / "arfbench-data" / "1001_0_60.parquet").unlink()  # else that file, which fits, is read instead
    schema = pa.schema([("timestamp", pa.int64()), ("p50", pa.float64())])
    block = pa.table({"timestamp": np.zeros(2**20, dtype=np.int64), "p50": np.ones(2**20)}, schema=schema)
    with pq.ParquetWriter(root / "arfbench-data" / "1001_0_10.parquet", schema, compression="zstd") as writer:
        for _ in range(20):
            writer.write_table(block)
    code, stderr, peak = peak_rss_of_generate("--family", "arfbench", "--path", str(root), "--out", str(tmp_path))
    assert code == 2 and stderr.strip().count("\n") == 0, stderr
    assert "1001_0_10.parquet: the row count its footer declares is 20,971,520 rows" in stderr
    assert peak < 1024, peak
