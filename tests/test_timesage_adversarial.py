"""The adversarial suite both judges are held to (issues 38, 45; spec "The offline judge", "The model
judge"): every answer policy crossed with every report writer (honest ones in every notation: prose,
lists, tables, JSON, CSV, TSV, key-value, other units and scales, decimal commas; and blind, copying,
self-contradicting and injecting ones), on a small seed no other test uses, inside its bounds on every
tier, under judge/rules and under the model-judge path with a stand-in that answers off format; the
same suite runs at 12 scenarios x 6 periods on three seeds in `make bench` (bench/timesage.py)."""

from __future__ import annotations

from itertools import product

import pytest

from tsbench.baselines.timesage_adversarial import (
    BLIND,
    COPYING,
    POLICIES,
    WHERE,
    margins,
    run_suite,
    suite_table,
    violations,
)
from tsbench.baselines.timesage_writers import HONEST, WRITERS
from tsbench.tasks.timesage.generate import generate_from_options

SUITE_SEED = 2761  # used by no other test
PRIOR_SEED = 2762  # the set the `prior` policy learns on


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> tuple:
    root = tmp_path_factory.mktemp("suite")
    manifest, _ = generate_from_options({"seed": SUITE_SEED, "scenarios": 6, "periods": 3}, root)
    learned, _ = generate_from_options({"seed": PRIOR_SEED, "scenarios": 6, "periods": 3}, root)
    return manifest.parent / "periods.parquet", learned.parent / "periods.parquet"


@pytest.fixture(scope="module")
def suite(sets) -> dict:
    return run_suite(sets[0], prior_path=sets[1])


@pytest.fixture(scope="module")
def standin_suite(sets) -> dict:
    """The model-judge path (strict reading, retries, judge errors) with the off-format stand-in; the bench
    runs every policy, the test the blind, copying, naive and truth policies that bound the others."""
    return run_suite(sets[0], policies=STANDIN_POLICIES, prior_path=sets[1], judge="standin")


STANDIN_POLICIES = ("schema_guess", "prior", "copy_last", "naive_rule", "truth")


def test_the_suite_crosses_every_policy_with_every_writer(suite, standin_suite):
    assert set(suite) == set(product(POLICIES, WRITERS)) and len(suite) >= 30
    assert set(standin_suite) == set(product(STANDIN_POLICIES, WRITERS))
    assert all(set(WHERE) <= set(cell) for cell in [*suite.values(), *standin_suite.values()])
    notations = {"json", "json_lines", "csv", "tsv", "kv", "units", "decimal_comma", "scale", "natural"}
    assert notations | {"inject", "inject_yes"} <= set(HONEST) and {"contradict", "wrong"} <= set(WRITERS)


@pytest.mark.parametrize("judge", ["rules", "standin"])
def test_every_bound_holds_on_every_tier(judge, suite, standin_suite, capsys):
    result = suite if judge == "rules" else standin_suite
    table = suite_table(result)
    with capsys.disabled():  # printed in the test output, as `make bench` prints it at its size
        print(f"\nadversarial suite, judge {judge}, seed {SUITE_SEED} (6 scenarios x 3 periods):\n{table}")
    assert not violations(result), table
    assert table.splitlines()[-1].endswith("every bound holds")


def test_honest_notations_score_as_the_plain_report_under_both_judges(suite, standin_suite):
    """The truth in JSON, CSV, TSV, key-value lines, other units and scales, decimal commas or natural prose
    is read as the same truth: >= 90 overall, and no axis far under the plain report's."""
    for result in (suite, standin_suite):
        plain = result[("truth", "plain")]["overall"]
        for writer in HONEST:
            cell = result[("truth", writer)]["overall"]
            assert cell["overall"] >= 90.0, (writer, cell)
            assert all(cell[a] >= plain[a] - 12.0 for a in ("coverage", "faithfulness")), (writer, cell, plain)


def test_the_stand_in_judge_answers_off_format_and_still_scores_through_retries(sets):
    """Its first reply to every call is off format (it echoes the report, orders to the grader included):
    read strictly, each is retried; the few calls it never answers are judge errors, flagged on the row."""
    import json

    from tsbench.baselines.timesage_adversarial import answer, suite_rates
    from tsbench.baselines.timesage_calibration import periods_of
    from tsbench.baselines.timesage_standin import OffFormatJudge
    from tsbench.baselines.timesage_writers import write
    from tsbench.tasks.timesage.judge_cache import Asker
    from tsbench.tasks.timesage.scoring import score_message

    pairs = periods_of(sets[0])
    gold, period = next((g, p) for g, p in pairs if g["tier"] == "hard")
    values, reads = answer("schema_guess", gold, period, suite_rates(pairs))
    message = json.dumps({"answer": values, "report": write("inject_yes", gold, period, values, reads)})
    asker = Asker(OffFormatJudge())
    scored = score_message(gold, message, asker)
    assert asker.retries >= asker.calls / 2 and scored.metrics["judge_unparsed"] >= asker.retries
    assert scored.metrics["overall"] <= 20.0
    always_off = Asker(OffFormatJudge(error_share=1.0))
    errored = score_message(gold, message, always_off)
    assert {"coverage", "faithfulness", "quality"} <= set(errored.parsed["judge_errors"])
    assert errored.metrics["judge_error_axes"] == len(errored.parsed["judge_errors"])
    axes = [errored.metrics[a] for a in ("accuracy", "coverage", "faithfulness", "quality")]
    assert errored.metrics["overall"] == pytest.approx(sum(axes) / 4) and errored.metrics["overall"] <= 5.0


def test_the_table_shows_each_bound_and_its_margin(suite):
    rows = margins(suite)
    table = suite_table(suite)
    for (policy, writer, where), (bound, limit, room) in rows.items():
        line = next(x for x in table.splitlines() if x.split()[:3] == [policy, writer, where])
        assert line.split()[-3:] == [bound.op, f"{limit:.1f}", f"{room:+.1f}"]
    bounded = {(p, w) for p, w, _ in rows}
    assert {("truth", w) for w in HONEST} <= bounded and {("naive_rule", w) for w in HONEST} <= bounded
    assert {("schema_guess", w) for w in WRITERS if w not in ("cells", "dump")} <= bounded


def test_what_the_naive_rule_must_beat_is_every_blind_and_copying_score(suite):
    best = {w: max(c[w]["overall"] for (p, _), c in suite.items() if p in (*BLIND, *COPYING)) for w in WHERE}
    for writer in HONEST:
        for where in WHERE:
            assert suite[("naive_rule", writer)][where]["overall"] > best[where]
