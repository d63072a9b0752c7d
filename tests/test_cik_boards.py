"""CiK's numbers where users read them (results.json's tasks block, the leaderboard's cells and its CiK
board): CiK's aggregate (RCRPS capped at 5, weighted by task weight, an unusable answer at 5, lower is
better) and sMAPE in percent, on fabricated run dirs with hand-computed numbers."""

from __future__ import annotations

import json

import pytest

from test_leaderboard import make_run, record
from tsbench.eval.task_results import task_results
from tsbench.leaderboard import build_leaderboard
from tsbench.results import load_samples
from tsbench.tasks.cik.taskset import CiK

DATASET = "c" * 64


def cik_row(id: str, rcrps: float | None, weight: str, smape: float | None = None, **overrides) -> dict:
    """A finished CiK row: an unusable answer has no RCRPS (score 0); `weight` is the task weight."""
    metrics = {} if rcrps is None else {"rcrps": rcrps, "smape": smape if smape is not None else 10.0}
    return record(
        id,
        "Energy",
        0.0 if rcrps is None else 1.0 / (1.0 + rcrps),
        family="cik",
        regime="context",
        metrics=metrics,
        attributes={"weight": weight, "context_types": "future,covariate"},
        gold=None,
        parsed_answer=None if rcrps is None else "{}",
        valid=rcrps is not None,
        **overrides,
    )


def rows_a() -> list[dict]:
    # weights 1/3, 1/3, 1: RCRPS 0.3, 9.0 (capped at 5), 0.6 -> (0.1 + 5/3 + 0.6) / (5/3) = 1.42
    return [cik_row("t1", 0.3, "0.3333333333333333"), cik_row("t2", 9.0, "0.3333333333333333"), cik_row("t3", 0.6, "1")]


def rows_b() -> list[dict]:
    # the same instances: 0.2, an unusable answer (counts 5), 0.1 -> (0.2/3 + 5/3 + 0.1) / (5/3) = 1.1
    return [
        cik_row("t1", 0.2, "0.3333333333333333"),
        cik_row("t2", None, "0.3333333333333333"),
        cik_row("t3", 0.1, "1"),
    ]


def cik_run(root, name: str, model: str, rows: list[dict]):
    run = make_run(root, name, model, rows, dataset=DATASET)
    info = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**info, "family": "cik", "config": {"family": "cik"}}))
    return run


A_MEAN = (0.3 / 3 + 5 / 3 + 0.6) / (5 / 3)
B_MEAN = (0.2 / 3 + 5 / 3 + 0.1) / (5 / 3)


def test_results_json_reports_cik_aggregate(tmp_path):
    run = cik_run(tmp_path, "a", "m-a", rows_a())
    tasks = task_results(load_samples(run), "cik", CiK().columns())
    energy = tasks["cik/Energy"]
    assert energy["primary"] == "rcrps" and energy["rcrps"] == pytest.approx(A_MEAN) and energy["lower_is_better"]
    assert "capped at 5" in energy["protocol"]
    assert tasks["cik"]["rcrps"] == pytest.approx(A_MEAN)  # the overall carries CiK's number too
    unweighted = (0.3 + 9.0 + 0.6) / 3
    assert not energy["rcrps"] == pytest.approx(unweighted)


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    root = tmp_path_factory.mktemp("cik_results")
    cik_run(root, "a", "m-a", rows_a())
    cik_run(root, "b", "m-b", rows_b())
    out = root / "leaderboard"
    return build_leaderboard(sorted(p for p in root.iterdir() if p != out), out, n_boot=200, seed=0), out


def test_cells_use_the_aggregate_and_rank_lower_as_better(board):
    result, _ = board
    cells = result.cells.set_index("model")
    assert cells.loc["m-a", "mean"] == pytest.approx(A_MEAN) and cells.loc["m-b", "mean"] == pytest.approx(B_MEAN)
    assert cells.loc["m-b", "mean_mark"] == "best" and cells.loc["m-a", "mean_mark"] == "second"
    assert cells.loc["m-a", "mean_lo"] <= cells.loc["m-a", "mean"] <= cells.loc["m-a", "mean_hi"]


def test_the_cik_board_in_markdown_and_csv(board):
    result, out = board
    [(title, intro, (header, body))] = result.family_sections[DATASET]
    assert title.startswith("CiK") and "Avg RCRPS" in header and "Avg sMAPE (%)" in header
    by_model = {line[0]: dict(zip(header, line)) for line in body}
    assert by_model["m-b"]["Avg RCRPS"] == f"{B_MEAN:.4f}" and by_model["m-b"]["Unusable"] == "1"
    # TimeClaw's sMAPE mean: 10 % for each usable answer, 200 for the unusable one
    assert by_model["m-b"]["Avg sMAPE (%)"] == f"{(10 + 200 + 10) / 3:.2f}"
    assert by_model["m-a"]["RCRPS future"] == f"{A_MEAN:.4f}" and by_model["m-a"]["RCRPS causal"] == "—"
    markdown = (out / "leaderboard.md").read_text()
    assert "CiK (TimeClaw Table 1 layout)" in markdown and "capped at 5" in markdown
    assert (out / "cik_board.csv").is_file()


def test_results_json_of_a_row_with_an_error_leaves_it_out(tmp_path):
    failing = cik_row("t4", None, "1", error_type="RateLimitError", error="429")
    failing["score"] = None
    run = cik_run(tmp_path, "e", "m-e", [*rows_a(), failing])
    energy = task_results(load_samples(run), "cik", CiK().columns())["cik/Energy"]
    assert energy["errors"] == 1 and energy["rcrps"] == pytest.approx(A_MEAN)  # an error is never a 5 (or a 0)
    assert json.dumps(energy)  # results.json can hold it
