"""How judge/rules reads list and object keypoints (paper A.4.2 / A.5.2), the reading that keeps a
copy of the last release from earning coverage or support with stale parts:
- a set stated with an item the truth does not hold is PARTIAL, not YES;
- an item paired with evidence (E4 drivers, F1 risks) needs its figures, its name alone is half;
- a joint unit (F3 outlook, F4 conditional, E6 guidance, E7 comparison) with one part stated wrong
  is NO: the value written after each part's name decides;
- a number is stated "to rounding", not by a neighbouring value;
- a clause naming several items of a set is one atomic claim per item, so a wrong item is its own
  unsupported claim;
- keypoints are the answer schema's facts, plus (medium, hard) the worked example's prior-release
  driver, which counts only when the report attributes it to that release."""

from __future__ import annotations

import pytest

from tsbench.tasks.timesage.axes import score_period
from tsbench.tasks.timesage.clauses import bound_coverage, number_matches
from tsbench.tasks.timesage.contract import FieldSpec
from tsbench.tasks.timesage.judge_cache import Asker
from tsbench.tasks.timesage.judge_rules import RulesJudge, atomic, split_claims
from tsbench.tasks.timesage.sources.catalog import PRIOR_KEYPOINT, keypoints_for
from tsbench.tasks.timesage.taxonomy import SUMMARY_TAG

DIRECTIONS = ["up", "down", "flat"]
DRIVERS = ["wage_idx", "quits_rate_pct", "hires_rate_pct"]
COMPONENTS = ["north", "south", "east", "west"]


def kp(field: str, truth, joint: bool = False) -> dict:
    return {"id": f"kp_{field}", "field": field, "truth": truth, "terms": [field.replace("_", " ")], "joint": joint}


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ("The top components are north and south.", 1.0),
        ("The top components are north, south and west.", 0.5),  # a stale third item beside the right ones
        ("The top components are north and east.", 0.5),
        ("The top components are east and west.", 0.0),
    ],
)
def test_a_set_with_an_item_the_truth_lacks_is_partial(report, expected):
    assert bound_coverage(kp("top_components", ["north", "south"]), report, COMPONENTS, [COMPONENTS]) == expected


def test_an_item_paired_with_evidence_needs_its_figures():
    truth = [{"driver": "wage_idx", "evidence": "wage_idx at 103.71 (+2.89)"}]
    key = kp("drivers_evidence", truth)
    assert bound_coverage(key, "The drivers evidence is wage_idx (wage_idx at 103.71, +2.89).", DRIVERS, [DRIVERS]) == 1
    stale = "The drivers evidence is wage_idx (wage_idx at 101.20, -0.40)."
    assert bound_coverage(key, stale, DRIVERS, [DRIVERS]) == 0.5


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ("The conditional outlook is if_direction down, if_driver wage_idx, then_direction up.", 1.0),
        ("The conditional outlook is if_direction up, if_driver wage_idx, then_direction down.", 0.0),
        ("The conditional outlook is if_direction down, if_driver quits_rate_pct, then_direction up.", 0.0),
        ("The conditional outlook names if_driver wage_idx.", 0.5),  # part of it, nothing wrong
    ],
)
def test_a_joint_unit_with_a_wrong_part_is_not_conveyed(report, expected):
    truth = {"if_direction": "down", "if_driver": "wage_idx", "then_direction": "up"}
    enums = [DIRECTIONS, DRIVERS, DIRECTIONS]
    assert bound_coverage(kp("conditional_outlook", truth, joint=True), report, [], enums) == expected


def test_an_outlook_with_a_stale_probability_or_date_is_not_conveyed():
    outlook = kp("outlook", {"horizon": 3, "probability": 80, "regime": "tight"}, joint=True)
    regimes = [["tight", "slack"]]
    assert bound_coverage(outlook, "The outlook is horizon 3, probability 80 %, regime tight.", [], regimes) == 1.0
    assert bound_coverage(outlook, "The outlook is horizon 3, probability 70 %, regime slack.", [], regimes) == 0.0
    yoy = kp("yoy_comparison", {"direction": "up", "reference": "2023-09"}, joint=True)
    assert bound_coverage(yoy, "The yoy comparison is direction up, reference 2023-08.", [], [DIRECTIONS]) == 0.0
    shares = kp("component_shares", {"north": 22.0, "south": 23.1})  # item-wise: a right part is half
    assert bound_coverage(shares, "The component shares are north 24.5, south 23.1.", [], []) == 0.5


@pytest.mark.parametrize(
    ("written", "truth", "states"),
    [(1457.0, 1457.3, True), (1457.3, 1457.3, True), (-0.3, -0.30, True), (0.8, 0.82, True)]
    + [(1450.0, 1457.3, False), (891.8, 890.5, False), (-0.31, -0.30, False), (3.0, 2.6, False)],
)
def test_a_number_is_stated_to_rounding_not_by_a_neighbour(written, truth, states):
    assert number_matches(written, truth) is states


def test_a_clause_naming_several_set_items_is_one_claim_per_item():
    groups = [{"subject": "top components", "options": COMPONENTS}]
    assert atomic("The top components are north, west", groups) == [
        "The top components are north",
        "The top components are west",
    ]
    assert atomic("North and south lead the shares", groups) == ["North and south lead the shares"]
    other = "The risks are north_upside, west_downside"  # names no top components: one claim
    assert atomic(other, groups) == [other]
    report = "Week 2026-05: the top components are north, west. The change is 2.5 points."
    assert split_claims(report, set_enums=groups) == [
        "Week 2026-05: the top components are north",
        "Week 2026-05: the top components are west.",
        "The change is 2.5 points.",
    ]


def test_a_wrong_item_is_its_own_unsupported_claim():
    field = FieldSpec(
        "top_components",
        "C1",
        "set",
        "Which two components contribute most?",
        {"type": "array", "items": {"type": "string", "enum": COMPONENTS}},
    )
    keypoint = {**kp("top_components", ["north", "south"]), "description": "the top components", "verify": "?"}
    keypoint["truth_text"] = "north, south"
    gold = {
        "scenario": "s",
        "period_label": "2026-05",
        "period_index": 1,
        "tier": "medium",
        "fields": [vars(field)],
        "truth": {"top_components": ["north", "south"]},
        "keypoints": [keypoint],
        "quality": {"genre": "note", "exemplar": "", "required": [], "forbidden": []},
        "context": [],
    }
    result = score_period(
        gold, {"top_components": ["north", "west"]}, "The top components are north, west.", Asker(RulesJudge())
    )
    assert [v for _, v in result.verdicts] == ["tier1_supported", "contradicts_keypoint"]
    assert result.faithfulness == 50.0 and result.coverage == 50.0


def test_keypoints_are_the_answer_fields_plus_a_prior_release_driver_beyond_easy():
    fields = [
        FieldSpec("change", "B1", "numeric", "What is the change?", {"type": "number"}),
        FieldSpec("summary", SUMMARY_TAG, "judge", "Summarise.", {"type": "string"}),
    ]
    assert [k.id for k in keypoints_for(fields, "state", "easy")] == ["kp_change"]
    for tier in ("medium", "hard"):
        assert [k.id for k in keypoints_for(fields, "state", tier)] == ["kp_change", PRIOR_KEYPOINT]
        assert "previous release" in keypoints_for(fields, "state", tier)[-1].subject


def _prior_gold(tier: str) -> dict:
    field = FieldSpec("change", "B1", "numeric", "What is the change?", {"type": "number"})
    others = FieldSpec(
        "secondary_drivers", "E3", "set", "Which other drivers?", {"type": "array", "items": {"enum": DRIVERS}}
    )
    change, secondary, prior = keypoints_for([field, others], "state", tier)
    keypoints = [
        {**vars(change), "truth": 1.5, "truth_text": "1.5"},
        {**vars(secondary), "truth": ["hires_rate_pct"], "truth_text": "hires_rate_pct"},
        {**vars(prior), "truth": "wage_idx", "truth_text": "wage_idx"},
    ]
    return {
        "scenario": "s",
        "period_label": "2026-05",
        "period_index": 2,
        "tier": tier,
        "fields": [vars(field), vars(others)],
        "truth": {"change": 1.5, "secondary_drivers": ["hires_rate_pct"]},
        "keypoints": keypoints,
        "quality": {"genre": "note", "exemplar": "", "required": [], "forbidden": []},
        "context": [],
    }


@pytest.mark.parametrize("tier", ("medium", "hard"))
def test_the_prior_release_driver_counts_only_attributed_to_that_release(tier):
    gold, judge = _prior_gold(tier), Asker(RulesJudge())
    attributed = "The change is 1.5. The previous release (gt_source/2026-04.md) named wage_idx as a driver."
    bare = "The change is 1.5. The main mover is wage_idx this period."
    assert (
        score_period(gold, {"change": 1.5, "secondary_drivers": ["hires_rate_pct"]}, attributed, judge).keypoints[
            PRIOR_KEYPOINT
        ]
        == 1.0
    )
    scored = score_period(gold, {"change": 1.5, "secondary_drivers": ["hires_rate_pct"]}, bare, Asker(RulesJudge()))
    assert scored.keypoints[PRIOR_KEYPOINT] == 0.0  # the driver named, not as the prior release's
    # what an earlier release said backs no claim about this period
    assert [v for _, v in scored.verdicts] == ["tier1_supported", "speculation"]
