"""results.json (lm-eval style), the leaderboard reading it, --report-to, and the documented schema."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tsbench import results as schema
from tsbench.core.config import build
from tsbench.core.provenance import write_json
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.leaderboard.load import load_results, read_summary
from tsbench.results.schema_doc import render
from tsbench.tasks.anomalyxl import labels as lb

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tracked_run(small_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "tracked"
    cfg = build(
        EvalConfig,
        dict(
            model="scripted/zscore",
            harness="single-pass-text",
            data=[str(small_data)],
            limit_per_category=2,
            regime="coarse",
            categories=[lb.PRESENCE, lb.INDICATOR],
            out=str(out),
            report_to=["tensorboard", "wandb"],
        ),
    )
    return run_eval(cfg)


def test_results_json_has_scores_intervals_counts_usage_config_and_dataset(tracked_run):
    results = json.loads((tracked_run / schema.RESULTS_JSON).read_text())
    samples = schema.load_samples(tracked_run)
    blocks = results["results"]
    assert [b["category"] for b in blocks["categories"]] == [lb.PRESENCE, lb.INDICATOR]
    for block, rows in [(blocks["overall"], samples)] + [
        (b, samples[samples["category"] == b["category"]]) for b in blocks["categories"]
    ]:
        assert block["n"] == len(rows) and block["errors"] == 0 and block["rows"] == len(rows)
        assert block["mean"] == pytest.approx(rows["score"].mean())
        low, high = block["ci95"]
        assert low <= block["mean"] <= high
        assert block["input_tokens"] == rows["input_tokens"].sum() and "cost_usd" in block
    assert results["config"]["limit_per_category"] == 2 and results["config"]["harness"] == "single-pass-text"
    assert results["dataset"]["key"].startswith("anomalyxl/seed42/test/") and results["dataset"]["file_sha256"]
    assert results["expected_samples"] == results["finished_samples"] == len(samples) and results["complete"]
    assert results["versions"]["tsbench"] and "git_commit" in results and results["updated_at"]


def test_leaderboard_reads_results_json_and_cross_checks_it(tracked_run, tmp_path):
    rows, [info], warnings = load_results([tracked_run])
    assert info.summary == json.loads((tracked_run / schema.RESULTS_JSON).read_text())["results"]
    assert not [w for w in warnings if "results.json" in w]
    assert read_summary(tracked_run)["overall"]["n"] == len(rows)
    # A results.json that no longer matches the rows (a run narrowed by a later --limit, say) is reported.
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in (schema.RUN_JSON, schema.SAMPLES):
        (copy / name).write_bytes((tracked_run / name).read_bytes())
    results = json.loads((tracked_run / schema.RESULTS_JSON).read_text())
    results["results"]["overall"].update(rows=1, mean=0.123)
    write_json(copy / schema.RESULTS_JSON, results)
    _, _, warnings = load_results([copy])
    assert any("results.json disagrees" in w and "1 rows against" in w for w in warnings), warnings
    # Without results.json the summary is computed from the rows, the same numbers.
    (copy / schema.RESULTS_JSON).unlink()
    assert read_summary(copy)["overall"]["mean"] == pytest.approx(info.summary["overall"]["mean"])


def test_report_to_tensorboard_and_wandb_offline(tracked_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    results = json.loads((tracked_run / schema.RESULTS_JSON).read_text())
    events = EventAccumulator(str(tracked_run / "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"progress/done", "progress/score", f"progress/score/{lb.PRESENCE}", "results/overall/mean"} <= set(tags)
    done = [e.value for e in events.Scalars("progress/done")]
    assert done == sorted(done) and done[-1] == results["results"]["overall"]["rows"]
    assert events.Scalars("results/overall/mean")[-1].value == pytest.approx(results["results"]["overall"]["mean"])
    [offline] = list((tracked_run / "wandb").glob("offline-run-*/run-*.wandb"))
    data = offline.read_bytes()
    assert b"results/overall/mean" in data and b"progress/score" in data and b"single-pass-text" in data


def test_results_schema_doc_is_generated_from_the_schema():
    doc = (ROOT / "docs" / "results-schema.md").read_text()
    assert doc == render(), (
        "docs/results-schema.md is stale: python -m tsbench.results.schema_doc > docs/results-schema.md"
    )
    for field in schema.COLUMNS:
        assert f"| `{field.name}` | `{field.type}` |" in doc
        assert field.metadata[b"description"].decode().replace("|", "\\|") in doc


def test_samples_parquet_carries_the_field_descriptions(tracked_run):
    written = pq.read_schema(tracked_run / schema.SAMPLES)
    assert written.names == schema.COLUMN_NAMES
    for field in schema.COLUMNS:
        assert written.field(field.name).metadata[b"description"] == field.metadata[b"description"]
