"""`tsbench export`: a real run read back by the real libraries (inspect_ai, datasets, pandas)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from tsbench import results as schema
from tsbench.core.config import build
from tsbench.core.episode import EpisodeOutcome
from tsbench.core.provenance import write_json
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.results.records import apply_outcome, finish, new_record
from tsbench.results.summary import summarize
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.testing import readiness

inspect_log = pytest.importorskip("inspect_ai.log")
datasets = pytest.importorskip("datasets")


@pytest.fixture(scope="module")
def run_dir(small_data, tmp_path_factory) -> Path:
    """Two rlm episodes of the scripted policy (real kernels, real transcripts) plus one error row,
    with results.json rewritten as the runner would."""
    out = tmp_path_factory.mktemp("runs") / "scripted__rlm"
    cfg = build(
        EvalConfig,
        dict(
            model="scripted/zscore",
            harness="rlm",
            data=[str(small_data)],
            limit_per_category=1,
            categories=[lb.PRESENCE, lb.LOCALIZE],
            out=str(out),
        ),
    )
    run_eval(cfg)
    error = new_record(
        sample_id="test-error-row",
        epoch=0,
        family="anomalyxl",
        columns={"category": lb.PRESENCE, "split": "test", "regime": "coarse"},
        model="scripted/zscore",
        harness="rlm",
        depth=0,
        gold={"answer": "Yes"},
    )
    apply_outcome(error, EpisodeOutcome(None, "server", "HTTP 500 after 6 attempts", 6))
    journal = schema.Journal(out)
    journal.append(finish(error, 0.5))
    journal.close()
    schema.consolidate(out)
    results = json.loads((out / schema.RESULTS_JSON).read_text())
    results["summary"] = summarize(schema.load_samples(out), [lb.PRESENCE, lb.LOCALIZE])
    write_json(out / schema.RESULTS_JSON, results)
    return out


def _samples(run_dir: Path) -> pd.DataFrame:
    return schema.load_samples(run_dir).set_index("id")


def test_inspect_log_reads_back_with_samples_scores_messages_and_usage(run_dir, tmp_path):
    from tsbench.interop import export_run

    path = export_run(run_dir, "inspect", tmp_path / "logs")
    assert path.suffix == ".eval"
    log = inspect_log.read_eval_log(str(path))
    rows = _samples(run_dir)
    assert log.eval.task == "tsbench/anomalyxl" and log.eval.model == "scripted/zscore"
    assert log.eval.dataset.name.startswith("anomalyxl/seed42/test/") and log.status == "success"
    assert len(log.samples) == 3 and log.results.total_samples == 3 and log.results.completed_samples == 2
    headline = log.results.scores[0]
    assert headline.name == "tsbench_score"  # as in logs of `inspect eval tsbench/anomalyxl`
    assert headline.metrics["mean"].value == pytest.approx(rows["score"].dropna().mean())
    for category, scores in rows["score"].dropna().groupby(rows["category"]):
        assert headline.metrics[category].value == pytest.approx(scores.mean())
    by_id = {s.id: s for s in log.samples}
    failed = by_id["test-error-row"]
    assert failed.scores is None and failed.error is not None and failed.error.message.startswith("server:")
    for sample_id, row in rows.drop(index="test-error-row").iterrows():
        sample = by_id[sample_id]
        assert sample.epoch == 1 and sample.scores["tsbench_score"].value == pytest.approx(row["score"])
        assert sample.scores["tsbench_score"].answer == row["parsed_answer"]
        assert sample.output.completion == row["final_message"]
        roles = [m.role for m in sample.messages]
        assert roles == ["system", "user", "assistant", "user", "assistant"]  # rlm: code, kernel output, answer
        assert "ZSCORE_SUMMARY" in sample.messages[3].text
        assert sample.input == sample.messages[1].text and sample.metadata["category"] == row["category"]
        assert set(sample.model_usage) == {"scripted/zscore"}


def test_inspect_log_as_json_keeps_an_incomplete_run_resumable(run_dir, tmp_path):
    from tsbench.interop.inspect_log import write_inspect_log
    from tsbench.interop.source import read_source

    source = read_source(run_dir)
    source.run["complete"] = False
    path = write_inspect_log(source, tmp_path / "run.json")
    log = inspect_log.read_eval_log(str(path))
    assert log.status == "cancelled" and len(log.samples) == 3


def test_hf_dataset_folder_loads_with_datasets_and_has_a_card(run_dir, tmp_path):
    import pyarrow.parquet as pq
    import yaml

    from tsbench.interop import export_run

    folder = export_run(run_dir, "hf", tmp_path / "hf")
    loaded = datasets.load_dataset(str(folder))
    test = loaded["test"]
    assert test.num_rows == 3 and test.column_names == schema.COLUMN_NAMES
    parquet = next((folder / "data").glob("test-*.parquet"))
    assert test.features == datasets.Features.from_arrow_schema(pq.read_schema(parquet))
    rows = _samples(run_dir)
    for item in test:
        expected = rows.loc[item["id"]]
        assert (item["score"] is None) == pd.isna(expected["score"])
        assert {m["key"]: m["value"] for m in item["metrics"]} == pytest.approx(expected["metrics"])
    card = (folder / "README.md").read_text()
    header = yaml.safe_load(card.split("---")[1])
    assert header["configs"][0]["data_files"][0] == {"split": "test", "path": "data/test-*.parquet"}
    assert [f["name"] for f in header["dataset_info"]["features"]] == schema.COLUMN_NAMES
    assert header["dataset_info"]["splits"][0]["num_examples"] == 3
    run = json.loads((run_dir / schema.RUN_JSON).read_text())
    assert run["dataset"]["key"] in card and "scripted/zscore" in card and "## Columns" in card
    assert json.loads((folder / "tsbench" / "run.json").read_text())["run_name"] == run["run_name"]
    assert pq.read_schema(parquet).field("score").metadata[b"description"].startswith(b"score in [0, 1]")


def test_long_csv_has_one_line_per_measure_and_no_score_for_errors(run_dir, tmp_path):
    res = readiness.run(
        [
            sys.executable,
            "-m",
            "tsbench.cli",
            "export",
            str(run_dir),
            "--format",
            "csv",
            "--out",
            str(tmp_path / "long.csv"),
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    frame = pd.read_csv(tmp_path / "long.csv")
    rows = _samples(run_dir)
    scores = frame[frame["measure"] == "score"].set_index("id")["value"]
    assert set(scores.index) == set(rows["score"].dropna().index)
    assert scores.to_dict() == pytest.approx(rows["score"].dropna().to_dict())
    errors = frame[frame["id"] == "test-error-row"]
    assert set(errors["error_type"]) == {"server"} and not {"score", "valid"} & set(errors["measure"])
    metrics = frame[frame["measure"].str.startswith("metric:")]
    assert len(metrics) == sum(len(m) for m in rows["metrics"])


def test_export_refuses_bad_input_in_one_line(run_dir, tmp_path):
    for args, needle in ((["--format", "xls"], "--format must be one of"), ([], "Missing option")):
        res = readiness.run(
            [sys.executable, "-m", "tsbench.cli", "export", str(run_dir), *args],
            capture_output=True,
            text=True,
        )
        assert res.returncode == 2 and needle in res.stderr
    res = readiness.run(
        [sys.executable, "-m", "tsbench.cli", "export", str(tmp_path), "--format", "csv"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0 and "not a run dir" in res.stderr
