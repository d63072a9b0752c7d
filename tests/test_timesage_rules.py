"""TimeSage-EV field rules (paper Table 11 primitives, Table 7 composites) on hand cases."""

from __future__ import annotations

import pytest

from tsbench.tasks.timesage.contract import FieldSpec
from tsbench.tasks.timesage.rules import (
    boolean_match,
    field_score,
    itemwise_score,
    joint_score,
    label_match,
    numeric_check,
    set_overlap,
    text_match,
)


def test_label_match_is_exact_up_to_case_and_whitespace():
    assert label_match("cool_watch", "cool_watch") == 1.0
    assert label_match(" Cool_Watch ", "cool_watch") == 1.0
    assert label_match("cool watch", "cool_watch") == 0.0
    assert label_match("neutral", "cool_watch") == 0.0
    assert label_match(None, "neutral") == 0.0


def test_boolean_match_reads_false_strings_as_false():
    assert boolean_match(True, True) == 1.0
    assert boolean_match(False, True) == 0.0
    assert boolean_match("false", False) == 1.0  # bool("false") would be True
    assert boolean_match("no", False) == 1.0
    assert boolean_match("yes", True) == 1.0
    assert boolean_match(0, False) == 1.0
    assert boolean_match(None, False) == 1.0


def test_text_match_strips_but_keeps_case():
    assert text_match("  La Nina ", "La Nina") == 1.0
    assert text_match("la nina", "La Nina") == 0.0


@pytest.mark.parametrize(
    "a, b, abs_tol, rel_tol, expected",
    [
        (-0.31, -0.30, 0.01, None, 1.0),  # the worked example: |-0.31 - -0.30| <= 0.01
        (-0.32, -0.30, 0.01, None, 0.0),
        (104.0, 100.0, None, 0.05, 1.0),  # 4 % relative error within 5 %
        (106.0, 100.0, None, 0.05, 0.0),
        (106.0, 100.0, 10.0, 0.05, 1.0),  # either tolerance passes
        (0.001, 0.0, None, 0.05, 0.0),  # b == 0: the relative tolerance does not apply
        (3, 3, None, None, 1.0),  # no tolerance: exact
        (3.0000001, 3, None, None, 0.0),
        ("1,234.5", 1234.5, None, None, 1.0),  # numeric strings parse
        ("12.5%", 12.5, 0.01, None, 1.0),
        ("about 3", 3, 1.0, None, 0.0),  # not a number
        (True, 1, None, None, 0.0),  # a boolean is not a number
        (float("nan"), 1.0, 10.0, None, 0.0),
    ],
)
def test_numeric_check(a, b, abs_tol, rel_tol, expected):
    assert numeric_check(a, b, abs_tol, rel_tol) == expected


def test_set_overlap_is_dice_with_the_empty_set_rules():
    assert set_overlap(["a", "b"], ["a", "b"]) == 1.0
    assert set_overlap(["a", "b", "c"], ["a", "d"]) == pytest.approx(2 * 1 / (3 + 2))
    assert set_overlap([], []) == 1.0  # both empty
    assert set_overlap(None, []) == 1.0
    assert set_overlap(["a"], []) == 0.0  # one empty
    assert set_overlap([], ["a"]) == 0.0
    assert set_overlap("A, b", ["a", "B"]) == 1.0  # a comma string is a set; items normalised
    assert set_overlap(["a", "a"], ["a"]) == 1.0  # a set, not a multiset


def test_joint_scoring_needs_every_part():
    parts = {
        "regime": {"rule": "label"},
        "probability": {"rule": "numeric", "abs_tol": 10.0},
        "horizon": {"rule": "numeric"},
    }
    truth = {"regime": "la_nina", "probability": 57, "horizon": 3}
    assert joint_score({"regime": "La_Nina", "probability": 62, "horizon": 3}, truth, parts) == 1.0
    assert joint_score({"regime": "la_nina", "probability": 70, "horizon": 3}, truth, parts) == 0.0
    assert joint_score({"regime": "la_nina", "probability": 57}, truth, parts) == 0.0
    assert joint_score("la_nina 57% 3", truth, parts) == 0.0


def test_itemwise_scores_each_item_over_the_union():
    truth = {"corn": 40.0, "soy": 35.0, "wheat": 25.0}
    assert (
        itemwise_score({"corn": 40.1, "soy": 35.0, "wheat": 25.0}, truth, None, {"rule": "numeric", "abs_tol": 0.15})
        == 1.0
    )
    # one wrong value, one missing item, one extra item: union of 4 keys, 1 right (corn)
    got = itemwise_score({"corn": 40.0, "soy": 30.0, "rice": 1.0}, truth, None, {"rule": "numeric", "abs_tol": 0.15})
    assert got == pytest.approx(1 / 4)
    risks = [{"risk": "crude_usd_upside", "evidence": "crude at 81"}, {"risk": "imports_downside", "evidence": "x"}]
    assert itemwise_score([{"risk": "crude_usd_upside", "evidence": "anything"}], risks, "risk", None) == 0.5
    assert itemwise_score([], [], "risk", None) == 1.0
    assert itemwise_score(["imports_downside"], [], "risk", None) == 0.0


def _spec(rule: str, **kwargs) -> FieldSpec:
    return FieldSpec("f", "A1", rule, "q?", {}, **kwargs)


def test_field_score_dispatch_and_not_applicable_truth():
    assert field_score(_spec("numeric", abs_tol=0.01), -0.305, -0.30) == 1.0
    assert field_score(_spec("label"), None, None) == 1.0  # truth null: only a null answer matches
    assert field_score(_spec("label"), "N/A", None) == 1.0
    assert field_score(_spec("numeric"), 3.2, None) == 0.0
    assert field_score(FieldSpec("summary", "summary", "judge", "q?", {}), "text", None) is None  # not scored
    judged = field_score(
        FieldSpec("cause", "E1", "judge", "q?", {}), "trade winds", "trade winds", judge_field=lambda spec, a, b: 0.5
    )
    assert judged == 0.5
