"""The leaderboard on a small fabricated results set: real run dirs, real parquet, hand-computed numbers."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from tsbench.core.stats import macro_f1
from tsbench.leaderboard import build_leaderboard, rich_tables
from tsbench.leaderboard.columns import family_columns
from tsbench.leaderboard.paper_rows import paper_table
from tsbench.leaderboard.stats import (
    _f1_of_codes,
    bootstrap_macro_f1_ci,
    mcq_macro_f1,
    predicted_option,
)
from tsbench.leaderboard.tables import cell_table, length_curves, length_table
from tsbench.results import COLUMN_NAMES, RUN_JSON, SAMPLES, Journal, to_table
from tsbench.testing import readiness

PRECISE = [c.category for c in family_columns("anomalyxl") if c.options is None]


def record(id: str, category: str, score: float | None, **overrides) -> dict:
    """One results row with every schema column; MCQ rows take `gold`/`pred` option texts."""
    mcq = category not in {
        "localize",
        "classify_with_evidence",
        "measure_magnitude",
        "localize_all_channels",
        "lead_lag_with_magnitude",
    }
    gold, pred = overrides.pop("gold", "Yes"), overrides.pop("pred", "Yes")
    row = {
        "id": id,
        "epoch": 0,
        "family": "anomalyxl",
        "split": "test",
        "regime": "coarse" if mcq else "precise",
        "category": category,
        "length": 1024,
        "n_channels": 4,
        "attributes": {},
        "model": "?",
        "harness": "?",
        "depth": 0,
        "final_message": "…",
        "answer_error": None,
        "attempts": None,
        "parsed_answer": json.dumps(pred) if mcq else json.dumps({"start": 1, "end": 2}),
        "gold": json.dumps({"answer": gold}) if mcq else json.dumps({"present": True}),
        "score": score,
        "valid": True,
        "metrics": {},
        "turns": 3,
        "code_cells": 2,
        "sub_calls": 0,
        "forced_final": False,
        "input_tokens": 1000,
        "output_tokens": 100,
        "sub_call_tokens": 0,
        "latency_s": 1.0,
        "cost_usd": None,
        "error_type": None,
        "error": None,
        "transcript": "{}",
        "finished_at": "2025-01-01T00:00:00+00:00",
    }
    row.update(overrides)
    for later in ("calls", "truncated_replies", "node", "worker"):  # added after the first schema (null in old rows)
        if later in COLUMN_NAMES:
            row.setdefault(later, None)
    assert set(row) == set(COLUMN_NAMES)
    return row


def make_run(
    root: Path,
    name: str,
    model: str,
    records: list[dict],
    *,
    dataset: str = "a" * 64,
    harness: str = "rlm",
    depth: int = 0,
    complete: bool = True,
    reference: str | None = None,
) -> Path:
    """A run directory as eval writes it: run.json + samples.parquet (through schema.to_table)."""
    run_dir = root / name
    run_dir.mkdir(parents=True)
    rows = [{**r, "model": model, "harness": harness, "depth": depth} for r in records]
    pq.write_table(to_table(rows), run_dir / SAMPLES)
    meta = {
        "run_name": name,
        "model": model,
        "harness": harness,
        "depth": depth,
        "config": {},
        "reference": reference,
        "dataset": {"paths": ["x.parquet"], "manifest_sha256": dataset},
        "expected_samples": len(rows) + (0 if complete else 5),
        "complete": complete,
        "versions": {},
        "git_commit": None,
        "created_at": "",
        "updated_at": "",
    }
    (run_dir / RUN_JSON).write_text(json.dumps(meta))
    return run_dir


def run_a() -> list[dict]:
    golds = ["Yes", "Yes", "Yes", "No", "No", "No"]
    preds = ["Yes", "Yes", "No", "No", "No", "Yes"]
    return [
        record("L0", "localize", 1.0, length=1024),
        record("L1", "localize", 0.5, length=1024),
        record("L2", "localize", 0.25, length=2048),
        record("L3", "localize", 0.0, length=2048),
        record(
            "L4",
            "localize",
            None,
            length=2048,
            error_type="timeout",
            error="episode timed out",
            valid=None,
            parsed_answer=None,
            turns=1,
        ),
        *(record(f"P{i}", "presence", float(g == p), gold=g, pred=p) for i, (g, p) in enumerate(zip(golds, preds))),
    ]


def run_b() -> list[dict]:
    return [
        *(record(f"L{i}", "localize", 0.5, length=1024 if i < 2 else 2048, cost_usd=0.01) for i in range(4)),
        record(
            "L4",
            "localize",
            0.0,
            length=2048,
            valid=False,
            parsed_answer=None,
            cost_usd=0.01,
            forced_final=True,
            answer_error="no JSON object",
        ),
        *(record(f"P{i}", "presence", 1.0, gold="Yes", pred="Yes", cost_usd=0.01) for i in range(3)),
    ]


def run_d() -> list[dict]:
    golds = ["Yes", "Yes", "Yes", "No", "No", "No"]
    preds = ["Yes", "Yes", "Yes", "No", "No", "Yes"]
    return [
        *(record(f"P{i}", "presence", float(g == p), gold=g, pred=p) for i, (g, p) in enumerate(zip(golds, preds))),
        *(record(f"L{i}", "localize", 0.2, length=1024 if i < 2 else 2048) for i in range(5)),
    ]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("results")
    runs = [
        make_run(root, "a", "m-a", run_a()),
        make_run(root, "b", "m-b", run_b(), complete=False),
        make_run(root, "c", "m-a", [record("L0", "localize", 0.3)], dataset="b" * 64),
        make_run(root, "d", "m-d", run_d()),
        make_run(
            root,
            "e",
            "detector/default",
            [
                *(record(f"L{i}", "localize", 1.0) for i in range(5)),
                *(record(f"P{i}", "presence", 1.0) for i in range(6)),
            ],
            harness="direct",
            reference="knows the generator",
        ),
    ]
    return root, runs


@pytest.fixture(scope="module")
def board(results, tmp_path_factory):
    root, _ = results
    out = root / "leaderboard"
    return build_leaderboard([*sorted(root.iterdir()), out], out, with_paper=True, n_boot=300, seed=1)


def cell(result, model: str, category: str, dataset: str = "a" * 64) -> pd.Series:
    c = result.cells
    return c[(c["model"] == model) & (c["category"] == category) & (c["dataset"] == dataset)].iloc[0]


# ---- aggregation against hand-computed numbers ---------------------------------------------------------


def test_cell_means_counts_and_incomplete_marks(board):
    loc_a = cell(board, "m-a", "localize")
    assert loc_a["mean"] == pytest.approx((1.0 + 0.5 + 0.25 + 0.0) / 4)  # the error row is left out
    assert (loc_a["n_scored"], loc_a["n_rows"], loc_a["incomplete"]) == (4, 5, True)
    loc_b = cell(board, "m-b", "localize")
    assert loc_b["mean"] == pytest.approx(0.4)  # the unparseable row scores 0 and stays in
    assert (loc_b["n_scored"], loc_b["incomplete"]) == (5, True)  # run b says complete=false
    pres_a = cell(board, "m-a", "presence")
    assert pres_a["mean"] == pytest.approx(4 / 6) and not pres_a["incomplete"]
    assert pres_a["f1"] == pytest.approx((2 / 3 + 2 / 3) / 2)  # Yes: 2TP 1FP 1FN; No: the same
    pres_b = cell(board, "m-b", "presence")
    assert pres_b["mean"] == 1.0 and pres_b["f1"] == 1.0 and pres_b["incomplete"]  # run b says complete=false
    assert board.count("a" * 64, "presence") == 6 and board.count("a" * 64, "localize") == 5


def test_best_and_second_best_marks_per_column(board):
    """Marks go to complete cells of models only: never to an incomplete cell, never to a reference policy."""
    assert cell(board, "m-d", "presence")["mean_mark"] == "best"  # 5/6 > 4/6
    assert cell(board, "m-a", "presence")["mean_mark"] == "second"
    assert cell(board, "m-a", "presence")["f1_mark"] == "second"
    assert cell(board, "m-b", "presence")["mean_mark"] == ""  # 1.000, but 3 of 6 rows and a partial run
    assert cell(board, "detector/default", "presence")["mean"] == 1.0
    assert cell(board, "detector/default", "presence")["mean_mark"] == ""  # a reference: shown, never ranked
    assert cell(board, "m-a", "localize")["mean_mark"] == ""  # incomplete: its error row was left out
    assert cell(board, "m-a", "localize", "b" * 64)["mean_mark"] == ""  # alone on its dataset: nothing to rank


def test_ties_share_a_mark_and_a_column_where_every_cell_ties_has_none():
    """Bold says one configuration did better; where all tie (the demo's SmolLM2 and zscore at 0) none did."""
    from tsbench.leaderboard.tables import mark_ranks

    cells = pd.DataFrame(
        {
            "dataset": ["d"] * 6,
            "category": ["presence"] * 3 + ["localize"] * 3,
            "mean": [0.0, 0.0, 0.0, 0.5, 0.5, 0.25],
            "f1": [0.0, 0.0, 0.0, None, None, None],
            "incomplete": [False] * 6,
        }
    )
    marked = mark_ranks(cells)
    assert marked["mean_mark"].tolist() == ["", "", "", "best", "best", "second"]
    assert marked["f1_mark"].tolist() == [""] * 6


def test_mismatched_datasets_are_kept_apart_with_a_warning(board):
    assert board.datasets == ["a" * 64, "b" * 64]
    assert any("different datasets" in w for w in board.warnings)
    assert any("run b is incomplete" in w for w in board.warnings)
    assert set(board.paired["dataset"]) == {"a" * 64}  # never compared across datasets


def test_paired_comparison_over_shared_scored_ids(board):
    paired = board.paired[(board.paired["a"].str.startswith("m-a")) & (board.paired["b"].str.startswith("m-b"))]
    paired = paired.set_index("category")
    loc = paired.loc["localize"]
    assert loc["n"] == 4  # L4 errored in run a, so only L0..L3 are shared
    assert loc["diff"] == pytest.approx(np.mean([0.5, 0.0, -0.25, -0.5]))
    assert loc["lo"] <= loc["diff"] <= loc["hi"]
    pres = paired.loc["presence"]
    assert pres["n"] == 3 and pres["diff"] == pytest.approx(-1 / 3)


def test_costs_and_failures(board):
    costs = board.costs[board.costs["dataset"] == "a" * 64].set_index("model")
    assert costs.loc["m-a", "turns"] == pytest.approx((10 * 3 + 1) / 11) and costs.loc["m-a", "cost_known"] == 0
    assert costs.loc["m-a", "error_rate"] == pytest.approx(1 / 11)
    assert costs.loc["m-b", "cost_usd"] == pytest.approx(0.08) and costs.loc["m-b", "cost_known"] == 8
    assert costs.loc["m-b", "forced_final_rate"] == pytest.approx(1 / 8)
    failures = {(r.model, r.cause): r.count for r in board.failures.itertuples() if r.dataset == "a" * 64}
    assert failures == {("m-a", "error: timeout"): 1, ("m-b", "no parseable answer (no JSON object)"): 1}


def test_length_breakdown_and_curves(board):
    by_length = board.by_length[board.by_length["dataset"] == "a" * 64]
    part = by_length[(by_length["model"] == "m-a") & (by_length["category"] == "localize")].set_index("length")
    assert part.loc[1024, "mean"] == pytest.approx(0.75) and part.loc[2048, "mean"] == pytest.approx(0.125)
    assert part.loc[1024, "delta_pp"] == 0 and part.loc[2048, "delta_pp"] == pytest.approx(-62.5)
    curves = board.curves[(board.curves["model"] == "m-a") & (board.curves["dataset"] == "a" * 64)].set_index("length")
    assert curves.loc[2048, "mean"] == pytest.approx(0.125)  # localize is the only swept precise category


def test_curves_average_only_categories_run_at_every_length():
    rows = pd.DataFrame(
        [
            {"dataset": "d", "model": "m", "harness": "h", "depth": 0, "category": c, "length": L, "score": s}
            for c, L, s in [
                ("localize", 1, 1.0),
                ("localize", 2, 0.0),
                ("classify_with_evidence", 1, 0.5),
                ("classify_with_evidence", 2, 0.5),
                ("measure_magnitude", 2, 0.9),
            ]
        ]
    )
    curves = length_curves(length_table(rows), PRECISE).set_index("length")
    assert curves.loc[1, "mean"] == pytest.approx(0.75) and curves.loc[2, "mean"] == pytest.approx(0.25)


def test_a_run_without_the_jail_is_marked_in_every_table(tmp_path):
    jailed = make_run(tmp_path / "runs", "jailed", "m", [record("a", "localize", 1.0)])
    unjailed = make_run(tmp_path / "runs", "unjailed", "m", [record("a", "localize", 0.0)])
    info = json.loads((unjailed / RUN_JSON).read_text())
    (unjailed / RUN_JSON).write_text(json.dumps({**info, "unsafe_sandbox": True}))
    result = build_leaderboard([jailed, unjailed], tmp_path / "board", n_boot=20)
    assert sorted(r.harness for r in result.runs) == ["rlm", "rlm [no jail]"]  # two rows, never merged
    for name in ("leaderboard.md", "leaderboard.html", "leaderboard.csv"):
        assert "rlm [no jail]" in (tmp_path / "board" / name).read_text()
    assert any("WITHOUT the jail" in w for w in result.warnings)


def test_a_board_says_why_there_is_no_length_curve(tmp_path):
    """--limit 1 over two lengths: no category was run at both, so Fig. 4 has nothing to average."""
    rows = [record("a", "localize", 1.0, length=1024), record("b", "measure_magnitude", 0.5, length=2048)]
    run = make_run(tmp_path / "runs", "limited", "m", rows)
    build_leaderboard([run], tmp_path / "board", n_boot=20)
    for name in ("leaderboard.md", "leaderboard.html"):
        assert "No precise category was run at every length" in (tmp_path / "board" / name).read_text()


def test_epochs_count_as_separate_rows():
    rows = pd.DataFrame(
        [
            record("x", "localize", 1.0, epoch=0),
            record("x", "localize", 0.0, epoch=1),
            record("y", "localize", 1.0, epoch=0),
        ]
    )
    rows = rows.assign(dataset="d", run_complete=True, reference=None)
    cells = cell_table(rows, n_boot=50)
    assert cells.iloc[0]["mean"] == pytest.approx(2 / 3) and cells.iloc[0]["n_scored"] == 3


# ---- statistics --------------------------------------------------------------------------------------


def test_macro_f1_by_hand_on_three_classes():
    golds = ["A", "A", "B", "B", "C", "C"]
    preds = ["A", "B", "B", "B", "C", "A"]
    # A: 1 TP, 1 FP, 1 FN -> 2/4; B: 2 TP, 1 FP -> 4/5; C: 1 TP, 1 FN -> 2/3
    expected = (0.5 + 0.8 + 2 / 3) / 3
    assert macro_f1(golds, preds) == pytest.approx(expected)
    assert mcq_macro_f1((), golds, preds) == pytest.approx(expected)  # () = options differ per row
    # An unparsed answer ("") is a miss for its gold class, not a class of its own.
    unparsed_last = ["A", "B", "B", "B", "C", ""]
    assert mcq_macro_f1((), golds, unparsed_last) == pytest.approx((2 / 3 + 0.8 + 2 / 3) / 3)


def test_vectorised_f1_matches_macro_f1():
    rng = np.random.default_rng(3)
    options = ["Before", "Early", "Medium", "Late", "No Anomaly"]
    for _ in range(20):
        golds = list(rng.choice(options, size=15))
        preds = list(rng.choice(options + [""], size=15))
        code = {o: i for i, o in enumerate(options)}
        g = np.array([[code[x] for x in golds]])
        p = np.array([[code.get(x, -1) for x in preds]])
        assert _f1_of_codes(g, p, len(options))[0] == pytest.approx(macro_f1(golds, preds, options=options))
        low, high = bootstrap_macro_f1_ci(options, golds, preds, n_boot=200, seed=1)
        assert 0.0 <= low <= high <= 1.0


def test_predicted_option_reads_parsed_answer():
    assert predicted_option('"Yes"') == "Yes"
    assert predicted_option('{"answer": "No"}') == "No"
    assert predicted_option(None) == "" and predicted_option("not json") == "" and predicted_option("3") == ""


def test_bootstrap_interval_covers_the_mean_and_narrows_with_n():
    rng = np.random.default_rng(0)
    widths = []
    for n in (20, 500):
        scores = rng.uniform(size=n)
        rows = pd.DataFrame([record(f"r{i}", "localize", float(s)) for i, s in enumerate(scores)])
        cells = cell_table(rows.assign(dataset="d", run_complete=True, reference=None), n_boot=500, seed=2)
        c = cells.iloc[0]
        assert c["mean_lo"] <= c["mean"] <= c["mean_hi"]
        widths.append(c["mean_hi"] - c["mean_lo"])
    assert widths[1] < widths[0] / 3  # ~ 1/sqrt(n): sqrt(500/20) = 5


def test_macro_f1_interval_covers_the_point_estimate():
    golds = ["Yes"] * 30 + ["No"] * 30
    preds = ["Yes"] * 25 + ["No"] * 5 + ["No"] * 20 + ["Yes"] * 10
    point = mcq_macro_f1(("Yes", "No"), golds, preds)
    low, high = bootstrap_macro_f1_ci(("Yes", "No"), golds, preds, n_boot=500, seed=0)
    assert low <= point <= high and high - low < 0.5


# ---- files ---------------------------------------------------------------------------------------


def test_files_written_and_html_is_self_contained(board):
    out = board.files["leaderboard.md"].parent
    for name in ("leaderboard.md", "leaderboard.html", "leaderboard.csv", "curves.csv", "costs.csv"):
        assert (out / name).stat().st_size > 0, name
    for stem in ("by_length-aaaaaaaaaaaa", "accuracy_vs_length-aaaaaaaaaaaa"):
        assert (out / f"{stem}.png").read_bytes()[:4] == b"\x89PNG"
        assert (out / f"{stem}.pdf").read_bytes()[:5] == b"%PDF-"
        assert b"<svg" in (out / f"{stem}.svg").read_bytes()[:400]
    html = (out / "leaderboard.html").read_text()
    assert "<script" not in html and "<link" not in html and not re.search(r'src="(?!data:)', html)
    assert html.count("<img alt=") == sum(len(f) for f in board.figures.values()) == 4
    assert html.count('<tr class="config">') == 5
    assert "reference: knows the generator" in html
    assert "Quoted from the paper" in html and "Failures" in html and "Paired comparisons" in html


def test_markdown_layout(board):
    md = board.files["leaderboard.md"].read_text()
    assert "| Model | Harness | Depth | Pres acc | Pres F1 |" in md
    assert "| Samples |  |  | (6) | (6) |" in md  # counts under the headers
    assert "**0.833**" in md and "† (n=3)" in md and "detector/default (reference: knows the generator)" in md
    assert "## Paper Table 1 (quoted)" in md and "GPT-5.5 (depth-1)" in md


def test_csv_is_long_with_integer_counts_plus_quoted_paper_rows(board):
    import csv

    frame = pd.read_csv(board.files["leaderboard.csv"])
    ours = frame[frame["source"] == "tsbench"]
    assert len(ours) == len(board.cells) == 9  # one line per (configuration, category)
    assert {"category", "column", "metric", "mean", "mean_lo", "f1", "n_scored", "n_rows", "incomplete"} <= set(
        frame.columns
    )
    detector = ours[(ours["model"] == "detector/default") & (ours["category"] == "presence")].iloc[0]
    assert (
        detector["reference"] == "knows the generator" and detector["column"] == "Pres" and detector["metric"] == "F1"
    )
    assert (frame["source"].str.startswith("paper")).sum() == 20 * 11  # 20 quoted rows x 11 columns
    with open(board.files["leaderboard.csv"], newline="") as fh:
        for line in csv.DictReader(fh):
            for name in ("depth", "n_rows", "n_scored", "n_own"):
                assert line[name] == "" or line[name].isdigit(), (name, line[name])
    costs = pd.read_csv(board.files["costs.csv"])
    assert len(costs) == 5 and pd.api.types.is_integer_dtype(costs["rows"])
    by_node = pd.read_csv(board.files["by_node.csv"])  # these runs predate the node column
    assert by_node["rows"].sum() == costs["rows"].sum() and set(by_node["node"]) == {"(not recorded)"}


def test_rich_table_renders(board):
    console = Console(record=True, width=300)
    for table in rich_tables(board):
        console.print(table)
    text = console.export_text()
    assert "m-a" in text and "Pres F1" in text and "[paper] GPT-5.5" in text and "(6)" in text


def test_no_runs_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no run directories"):
        build_leaderboard([tmp_path], tmp_path / "out")


def test_resumed_run_reads_the_journal(tmp_path):
    run = make_run(tmp_path, "r", "m", [record("L0", "localize", None, error_type="server")], complete=False)
    journal = Journal(run)
    for score, error in ((None, "server"), (0.75, None)):  # the resumed episode supersedes the error
        journal.append({**record("L0", "localize", score, error_type=error), "model": "m", "harness": "rlm"})
    journal.close()
    result = build_leaderboard([run], tmp_path / "out", n_boot=50)
    assert cell(result, "m", "localize")["mean"] == 0.75 and result.failures.empty


# ---- the quoted paper rows -----------------------------------------------------------------------


def test_paper_rows_are_quoted_exactly():
    rows, counts = paper_table()
    assert len(rows) == 20 and counts["localize"] == "200" and counts["indicator"] == "42"
    chatts = rows[rows["model"] == "ChatTS Qwen3.5-4B"].iloc[0]
    assert chatts["identification"] == "OOM*" and chatts["presence"] == "0.467"
    # Three rows copied by hand from the paper's Table 1 (TimeRLM GPT-5.5, and its single-pass text and image).
    by_section = {(r["section"], r["model"]): list(r[rows.columns[2:]]) for _, r in rows.iterrows()}
    quoted = {
        "GPT-5.5 (text)": "0.886 0.620 0.420 0.774 0.803 0.476 0.096 0.001 0.506 0.170 0.212",
        "GPT-5.5 (image)": "1.000 0.929 0.189 0.671 0.520 0.784 0.329 0.043 0.440 0.120 0.753",
        "GPT-5.5": "0.640 0.916 0.567 0.793 0.845 0.952 0.677 0.717 0.496 0.461 0.958",
    }
    for model, values in quoted.items():
        assert values.split() in [v for (_, m), v in by_section.items() if m == model], model


def test_leaderboard_imports_no_harness_model_or_trainer():
    code = (
        "import sys, tsbench.leaderboard; "
        "print([m for m in sys.modules if m.startswith(('tsbench.harness', 'tsbench.models', 'tsbench.train', "
        "'torch', 'transformers', 'openai'))])"
    )
    done = readiness.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ---- comparing on common rows, small n, figures ---------------------------------------------------------


def test_configurations_are_compared_on_their_common_rows(tmp_path):
    """Two complete runs that drew different rows (say --limit with different seeds) are shown and
    ranked over the rows both scored; the paired table agrees; a column sharing no row is not ranked."""
    first = [record(f"L{i}", "localize", s) for i, s in enumerate([1.0, 1.0, 0.2, 0.4])]  # L0..L3
    second = [record(f"L{i}", "localize", s) for i, s in zip(range(2, 6), [0.6, 0.8, 0.0, 0.0])]  # L2..L5
    presence_a = [record(f"P{i}", "presence", 1.0) for i in range(3)]
    presence_b = [record(f"Q{i}", "presence", 0.0) for i in range(3)]
    make_run(tmp_path, "a", "m-a", first + presence_a)
    make_run(tmp_path, "b", "m-b", second + presence_b)
    result = build_leaderboard([tmp_path / "a", tmp_path / "b"], tmp_path / "out", n_boot=200)
    a, b = cell(result, "m-a", "localize"), cell(result, "m-b", "localize")
    assert a["common"] and b["common"] and (a["n_scored"], a["n_own"]) == (2, 4)
    assert a["mean"] == pytest.approx(0.3) and b["mean"] == pytest.approx(0.7)  # own means would be 0.65 and 0.35
    assert (a["mean_mark"], b["mean_mark"]) == ("second", "best")
    paired = result.paired[result.paired["category"] == "localize"].iloc[0]
    assert paired["n"] == 2 and paired["diff"] == pytest.approx(-0.4)
    assert any("localize" in w and "compared on the 2 rows" in w for w in result.warnings)
    pa, pb = cell(result, "m-a", "presence"), cell(result, "m-b", "presence")
    assert not pa["common"] and pa["disjoint"] and pa["mean_mark"] == pb["mean_mark"] == ""
    assert any("presence" in w and "share no scored row" in w for w in result.warnings)
    md = result.files["leaderboard.md"].read_text()
    assert "(n=2 common of 4)" in md


def test_intervals_on_fewer_than_ten_rows_carry_a_warning(board):
    small = cell(board, "m-a", "presence")
    assert small["small_n"] and small["n_scored"] == 6
    assert any("fewer than 10 scored rows" in w for w in board.warnings)
    md = board.files["leaderboard.md"].read_text()
    assert re.search(r"\[0\.\d\d, \d\.\d\d\]\*", md) and "* = fewer than 10 rows" in md
    html = board.files["leaderboard.html"].read_text()
    assert re.search(r'<span class="ci">\[[0-9., ]+\]\*</span>', html)


def test_one_legend_convention_everywhere(board):
    md = board.files["leaderboard.md"].read_text()
    html = board.files["leaderboard.html"].read_text()
    assert "Bold = best, underline = second-best" in md and "<ins>0.667</ins>" in md  # m-a presence: second
    assert "<strong>Bold</strong> = best, <u>underline</u> = second-best" in html and "<u>0.667</u>" in html
    assert "m-b · rlm · depth 0 †" in md  # a partial run is marked in every section, not only the main table


def test_figures_show_n_per_cell_not_run_cells_and_bands(tmp_path):
    rows = [record(f"L{i}-{L}", "localize", (i % 3) / 2, length=L) for i in range(12) for L in (1024, 4096)]
    rows += [record(f"C{i}-{L}", "classify_with_evidence", 0.5, length=L) for i in range(4) for L in (1024, 4096)]
    rows += [record(f"A{i}", "localize_all_channels", 1.0, length=4096) for i in range(5)]
    make_run(tmp_path, "a", "m-a", rows)
    result = build_leaderboard([tmp_path / "a"], tmp_path / "out", n_boot=200)
    curve = result.curves.set_index("length")
    assert (
        list(curve["n"]) == [16, 16] and (curve["lo"] <= curve["mean"]).all() and (curve["mean"] <= curve["hi"]).all()
    )
    heat = (tmp_path / "out" / "by_length.svg").read_text()
    assert "n/a" in heat and "n=12" in heat and "n=4" in heat and "percentage points" in heat
    assert "mean score (0 to 1)" in heat and "Loc (IoU)" in heat
    curves = (tmp_path / "out" / "accuracy_vs_length.svg").read_text()
    assert "n=16" in curves and "95 % bootstrap" in curves and "m-a · rlm · depth 0" in curves


def test_a_recordings_board_shows_f1_over_kinds_and_iou_over_anomalous_windows(tmp_path):
    """Paper Table 3's layout: LTAF F1 (macro over the kinds, "No anomaly" included) and IoU, the
    mean of metrics["iou"] over the anomalous windows only (an anomaly-free window has none)."""
    from tsbench.tasks.ltaf.reader import APC, PVC

    kinds = [PVC, APC, "No anomaly"]

    def window(id, gold, pred, iou):
        parsed = {"answer": pred} if iou is None else {"answer": pred, "start": 0, "end": 10}
        row = record(
            id,
            "classify_with_evidence",
            (1.0 if gold == pred else 0.0) * (1.0 if iou is None else iou),
            family="ltaf",
            metrics={} if iou is None else {"iou": iou},
        )
        return {**row, "gold": json.dumps({"answer": gold}), "parsed_answer": json.dumps(parsed)}

    rows = [
        window("w0", PVC, PVC, 0.8),
        window("w1", APC, PVC, 0.4),
        window("w2", APC, APC, 0.6),
        window("w3", "No anomaly", "No anomaly", None),
        window("w4", "No anomaly", "No anomaly", None),
    ]
    run = make_run(tmp_path, "ltaf_run", "m", rows)
    meta = json.loads((run / RUN_JSON).read_text())
    (run / RUN_JSON).write_text(json.dumps({**meta, "family": "ltaf"}))
    result = build_leaderboard([run], tmp_path / "board", n_boot=50)
    dataset = result.datasets[0]
    cell = result.cell(dataset, result.configs(dataset)[0], "classify_with_evidence")
    assert cell["mean"] == pytest.approx((0.8 + 0.4 + 0.6) / 3)  # not the row scores' 0.64, not over 5 rows
    f1 = macro_f1([PVC, APC, APC, "No anomaly", "No anomaly"], [PVC, PVC, APC, "No anomaly", "No anomaly"], kinds)
    assert cell["f1"] == pytest.approx(f1) and f1 < 1.0
    board = (tmp_path / "board" / "leaderboard.md").read_text()
    assert "LTAF IoU" in board and "LTAF F1" in board


def _with_settings(run_dir: Path, **settings) -> Path:
    meta = json.loads((run_dir / RUN_JSON).read_text())
    meta["settings"] = {
        "model": meta["model"],
        "harness": meta["harness"],
        "depth": meta["depth"],
        "base_url": None,
        "cell_timeout_s": 300.0,
        "max_turns": 15,
        **settings,
    }
    (run_dir / RUN_JSON).write_text(json.dumps(meta))
    return run_dir


def test_a_complete_run_is_not_incomplete_beside_a_two_epoch_run(tmp_path):
    """Completeness counts per epoch: 6 ids x 1 epoch is complete next to 6 ids x 2 epochs."""
    golds = ["Yes", "No"] * 3
    one = [record(f"P{i}", "presence", 1.0, gold=g, pred=g) for i, g in enumerate(golds)]
    two = [
        record(f"P{i}", "presence", 0.0, gold=g, pred="No" if g == "Yes" else "Yes", epoch=e)
        for e in (0, 1)
        for i, g in enumerate(golds)
    ]
    runs = [make_run(tmp_path, "one", "m-one", one), make_run(tmp_path, "two", "m-two", two)]
    result = build_leaderboard(runs, tmp_path / "board", n_boot=50)
    cells = result.cells.set_index("model")
    assert not cells.loc["m-one", "incomplete"] and not cells.loc["m-two", "incomplete"]
    assert cells.loc["m-one", "n_rows"] == 6 and cells.loc["m-two", "n_rows"] == 12
    assert result.count(result.datasets[0], "presence") == 6  # the header counts rows, not episodes
    md = (tmp_path / "board" / "leaderboard.md").read_text()
    assert "†" not in md.split("### Table 1 layout")[1].split("### 95 % confidence intervals")[0]
    short = make_run(tmp_path, "short", "m-short", one[:4])  # a complete --limit 4 run: not incomplete,
    board = build_leaderboard(runs + [short], tmp_path / "board2", n_boot=50)  # compared on the common rows
    cells = board.cells.set_index("model")
    assert not cells.loc["m-short", "incomplete"] and not cells.loc["m-one", "incomplete"]
    assert cells.loc["m-one", "common"] and cells.loc["m-one", "n_scored"] == 4 and cells.loc["m-one", "n_own"] == 6
    md = (tmp_path / "board2" / "leaderboard.md").read_text()
    assert "†" not in md.split("### Table 1 layout")[1].split("### 95 % confidence intervals")[0]


def test_runs_of_one_model_on_different_servers_or_settings_are_separate_rows(tmp_path):
    rows = [record(f"L{i}", "localize", s) for i, s in enumerate((1.0, 0.5, 0.0))]
    a = _with_settings(make_run(tmp_path, "a", "openai/m", rows), base_url="http://127.0.0.1:8001/v1")
    b = _with_settings(
        make_run(tmp_path, "b", "openai/m", [{**r, "score": 0.0} for r in rows]), base_url="http://127.0.0.1:8002/v1"
    )
    c = _with_settings(make_run(tmp_path, "c", "openai/m", rows), base_url="http://127.0.0.1:8001/v1")
    d = _with_settings(
        make_run(tmp_path, "d", "openai/m", rows), base_url="http://127.0.0.1:8001/v1", cell_timeout_s=10.0
    )
    result = build_leaderboard([a, b, c, d], tmp_path / "board", n_boot=50)
    harnesses = sorted(result.cells["harness"].unique())
    assert harnesses == [
        "rlm [base_url=127.0.0.1:8001, cell_timeout_s=10.0]",
        "rlm [base_url=127.0.0.1:8001, cell_timeout_s=300.0]",
        "rlm [base_url=127.0.0.1:8002, cell_timeout_s=300.0]",
    ]  # a and c share a row
    means = result.cells.set_index("harness")["mean"]
    assert means[next(h for h in harnesses if "8002" in h)] == 0.0
    assert any("runs a, c merged" in w for w in result.warnings)
    md = (tmp_path / "board" / "leaderboard.md").read_text()
    assert "base_url=127.0.0.1:8002" in md and "cell_timeout_s=10.0" in md
    same = build_leaderboard([a, c], tmp_path / "board2", n_boot=50)  # nothing differs: no suffix
    assert list(same.cells["harness"].unique()) == ["rlm"]


def test_a_path_named_server_model_reads_short_on_the_board(tmp_path):
    """`transformers serve DIR` names its model by the path: the board names it by the folder, unless
    two such models would then read alike."""
    rows = [record(f"L{i}", "localize", s) for i, s in enumerate((1.0, 0.5))]
    path_a = make_run(tmp_path, "a", "openai//root/.cache/tsbench/models/smollm2-135m", rows)
    board = build_leaderboard([path_a], tmp_path / "board", n_boot=50)
    assert set(board.cells["model"]) == {"openai/smollm2-135m"}
    path_b = make_run(tmp_path, "b", "openai//srv/other/smollm2-135m", rows)
    board = build_leaderboard([path_a, path_b], tmp_path / "board2", n_boot=50)
    assert set(board.cells["model"]) == {
        "openai//root/.cache/tsbench/models/smollm2-135m",
        "openai//srv/other/smollm2-135m",
    }


def test_every_board_says_why_a_score_is_zero(board):
    """Per configuration: valid, invalid, cut by the token cap and error rows, adding up to its rows."""
    costs = board.costs[board.costs["dataset"] == "a" * 64].set_index("model")
    assert (costs[["valid", "invalid", "cut", "errors"]].sum(axis=1) == costs["rows"]).all()
    assert costs.loc["m-a", "errors"] == 1 and costs.loc["m-b", "invalid"] >= 1  # the error row; the unparseable one
    md = (board.files["leaderboard.md"]).read_text()
    assert "Valid / invalid / cut / errors" in md and "never scored" in md
