"""Hand-computed cases for AnomalyXL scoring: extraction rules, every category's metric, aggregation."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from tsbench.core.answers import extract_choice, iou, last_json_object
from tsbench.core.stats import bootstrap_ci, category_means, macro_f1, overall_mean, paired_bootstrap_diff
from tsbench.core.text import json_object_spans, strip_reasoning
from tsbench.tasks.anomalyxl.metrics import match_events, metrics, score

L = 16384
LOC_GOLD = {"present": True, "start": 100, "end": 180, "_L": L}
LOC_ABSENT = {"present": False, "_L": L}
CLS_GOLD = {"kind": "Level Shift", "start": 100, "end": 180, "_L": L}
CLS_NONE = {"kind": "No anomaly", "_L": L}
MAG_GOLD = {"magnitude_sigma": 10.0, "_L": L}
CHANNELS = [f"ch_{i:02d}" for i in range(16)]
AC_GOLD = {
    "anomalies": [
        {"channel": "ch_02", "start": 100, "end": 200},
        {"channel": "ch_07", "start": 500, "end": 600},
    ],
    "channels": CHANNELS,
    "_L": 32768,
}
LL_GOLD = {"direction": "lead", "lag_samples": 1000, "_L": 100000}
LL_INDEPENDENT = {"direction": "independent", "lag_samples": 0, "_L": 100000}
PRESENCE_GOLD = {"answer": "Yes", "options": ["Yes", "No"]}

EXACT_LOC = '{"present": true, "start": 100, "end": 180}'


def loc(start, end) -> str:
    return json.dumps({"present": True, "start": start, "end": end})


def events(*triples) -> str:
    return json.dumps({"anomalies": [{"channel": c, "start": s, "end": e} for c, s, e in triples]})


def ac_gold(*triples) -> dict:
    gold_events = [{"channel": c, "start": s, "end": e} for c, s, e in triples]
    gold_events.sort(key=lambda event: (event["channel"], event["start"]))
    return {"anomalies": gold_events, "channels": CHANNELS, "_L": 32768}


# --- IoU ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ((0, 10), (0, 10), 1.0),
        ((0, 10), (5, 15), 5 / 15),
        ((0, 100), (25, 75), 0.5),
        ((-10, 10), (0, 10), 0.5),
        ((0, 10), (10, 20), 0.0),  # touching half-open windows share nothing
        ((0, 10), (20, 30), 0.0),
        ((5, 5), (0, 10), 0.0),  # empty window
        ((0, 10), (8, 3), 0.0),  # reversed window is degenerate
        ((3, 3), (3, 3), 0.0),  # two empty windows are not a perfect match
    ],
)
def test_iou_edges(a, b, expected):
    assert iou(a, b) == pytest.approx(expected)
    assert iou(b, a) == pytest.approx(expected)


# --- integer rule ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "start, valid",
    [
        ("100", None),
        ("100.0", True),
        ("100.5", False),
        ('"100"', False),
        ("true", False),
        ("false", False),
        ("null", False),
        ("NaN", False),
        ("Infinity", False),
        ("-Infinity", False),
        ("1e400", False),
        ("1e2", True),
        ("[100]", False),
    ],
)
def test_integer_rule(start, valid):
    response = f'{{"present": true, "start": {start}, "end": 180}}'
    result = metrics("localize", LOC_GOLD, response)
    if valid is None or valid:
        assert result["valid"] and result["score"] == 1.0
        assert result["parsed"] == {"present": True, "start": 100, "end": 180}
        assert type(result["parsed"]["start"]) is int
    else:
        assert not result["valid"] and result["score"] == 0.0 and result["error"]


def test_integers_beyond_2_pow_53_are_rejected():
    assert metrics("localize", LOC_GOLD, loc(0, 2**53))["valid"]
    assert not metrics("localize", LOC_GOLD, loc(0, 2**53 + 1))["valid"]


# --- extraction -----------------------------------------------------------------------------


def test_last_object_wins():
    response = f"{loc(0, 10)}\nOn reflection:\n{EXACT_LOC}"
    assert score("localize", LOC_GOLD, response) == 1.0
    assert score("localize", LOC_GOLD, f"{EXACT_LOC} or maybe {loc(0, 10)}") == 0.0


def test_invalid_last_object_does_not_fall_back():
    assert score("localize", LOC_GOLD, EXACT_LOC + " so {present: true}") == 0.0
    result = metrics("localize", LOC_GOLD, EXACT_LOC + ' then {"present": "yes"}')
    assert result["score"] == 0.0 and result["error"] == "'present' is not a bool"


def test_nested_object_is_part_of_the_top_level_one():
    response = '{"present": true, "start": 100, "end": 180, "meta": {"present": false}}'
    assert score("localize", LOC_GOLD, response) == 1.0


def test_fenced_json_with_prose():
    response = f"Here is the window I found.\n```json\n{EXACT_LOC}\n```\nHope that helps!"
    assert score("localize", LOC_GOLD, response) == 1.0


def test_braces_and_escaped_quotes_inside_strings():
    response = '{"note": "a } and a { and \\"}\\" here", "present": true, "start": 100, "end": 180}'
    assert score("localize", LOC_GOLD, response) == 1.0
    assert json_object_spans(response) == [(0, len(response))]


def test_stray_braces_in_prose():
    assert score("localize", LOC_GOLD, "A { opens here and } closes nothing. " + EXACT_LOC) == 1.0
    assert score("localize", LOC_GOLD, "use {x as a set, then " + EXACT_LOC) == 1.0
    assert score("localize", LOC_GOLD, 'a { and a " quote, then ' + EXACT_LOC + " done") == 1.0


def test_json_object_spans():
    text = 'a {"x": 1} b {"y": {"z": 2}} c { unclosed'
    first, second = text.index('{"x"'), text.index('{"y"')
    assert json_object_spans(text) == [(first, first + 8), (second, second + 15)]
    assert json_object_spans("no braces") == []


def test_think_block_with_json_is_ignored():
    hidden = f"<think>The answer is {EXACT_LOC}</think>"
    assert metrics("localize", LOC_GOLD, hidden)["error"] == "no JSON object"
    assert score("localize", LOC_GOLD, f'<think>{{"present": false}}</think>\n{EXACT_LOC}') == 1.0
    assert score("localize", LOC_GOLD, f"<THINK>{loc(0, 5)}</Think>{EXACT_LOC}") == 1.0


def test_unclosed_think_means_the_rest_is_reasoning():
    assert score("localize", LOC_GOLD, f"<think>I believe {EXACT_LOC} but let me check") == 0.0
    assert score("localize", LOC_GOLD, f'{EXACT_LOC}\n<think>or {{"present": false}}') == 1.0


def test_orphan_close_means_everything_before_was_reasoning():
    assert score("localize", LOC_GOLD, f'maybe {{"present": false}}</think>\n{EXACT_LOC}') == 1.0
    assert score("localize", LOC_GOLD, f"{EXACT_LOC}</think>") == 0.0


def test_strip_reasoning():
    assert strip_reasoning("a<think>b</think>c<think>d</think>e") == "ace"
    assert strip_reasoning("<think>a<think>b</think>c</think>ans") == "ans"
    assert strip_reasoning("keep<think>cut") == "keep"


def test_last_json_object_errors():
    assert last_json_object("nothing here")[1] == "no JSON object"
    assert last_json_object("{'single': 'quotes'}")[1] == "invalid JSON"
    assert last_json_object('x {"a": [1, 2]} y')[0] == {"a": [1, 2]}


def test_non_string_response_scores_zero():
    assert score("localize", LOC_GOLD, None) == 0.0  # type: ignore[arg-type]


def test_unknown_category_raises():
    with pytest.raises(ValueError):
        score("no_such_category", LOC_GOLD, EXACT_LOC)


# --- localize -------------------------------------------------------------------------------


def test_localize_both_absent():
    assert score("localize", LOC_ABSENT, '{"present": false}') == 1.0
    assert score("localize", LOC_ABSENT, '{"present": false, "start": "n/a"}') == 1.0


def test_localize_presence_mismatch():
    result = metrics("localize", LOC_ABSENT, EXACT_LOC)
    assert result["score"] == 0.0 and result["presence_correct"] == 0.0 and result["iou"] is None
    result = metrics("localize", LOC_GOLD, '{"present": false}')
    assert result["score"] == 0.0 and result["valid"] and result["iou"] == 0.0


def test_localize_present_needs_a_window_and_a_real_bool():
    assert metrics("localize", LOC_GOLD, '{"present": true, "start": 100}')["error"] == "missing 'end'"
    assert score("localize", LOC_GOLD, '{"present": "true", "start": 100, "end": 180}') == 0.0
    assert score("localize", LOC_GOLD, '{"present": 1, "start": 100, "end": 180}') == 0.0


def test_localize_partial_overlap_and_secondary_metrics():
    # [120, 200) vs [100, 180): intersection 60, union 100.
    result = metrics("localize", LOC_GOLD, loc(120, 200))
    assert result["score"] == pytest.approx(0.6)
    assert result["presence_correct"] == 1.0
    assert (result["acc_iou_0.3"], result["acc_iou_0.5"], result["acc_iou_0.8"]) == (1.0, 1.0, 0.0)
    assert result["start_err_frac"] == pytest.approx(20 / L)
    assert result["end_err_frac"] == pytest.approx(20 / L)
    json.dumps(result, allow_nan=False)


def test_localize_accuracy_at_iou_threshold_is_inclusive():
    result = metrics("localize", LOC_GOLD, loc(100, 140))  # 40 / 80
    assert result["iou"] == 0.5 and result["acc_iou_0.5"] == 1.0


def test_localize_degenerate_prediction_is_valid_but_scores_zero():
    result = metrics("localize", LOC_GOLD, loc(180, 100))
    assert result["valid"] and result["score"] == 0.0


# --- classify with evidence -----------------------------------------------------------------


def cls(kind, start=None, end=None) -> str:
    answer = {"kind": kind}
    if start is not None:
        answer.update(start=start, end=end)
    return json.dumps(answer)


def test_classify_label_gates_the_window():
    assert score("classify_with_evidence", CLS_GOLD, cls("Level Shift", 100, 180)) == 1.0
    assert score("classify_with_evidence", CLS_GOLD, cls("Level Shift", 120, 200)) == pytest.approx(0.6)
    wrong = metrics("classify_with_evidence", CLS_GOLD, cls("Transient Spike", 100, 180))
    assert wrong["score"] == 0.0 and wrong["kind_correct"] == 0.0 and wrong["iou"] == 1.0


def test_classify_labels_match_exactly():
    assert score("classify_with_evidence", CLS_GOLD, cls("level shift", 100, 180)) == 0.0
    assert score("classify_with_evidence", CLS_GOLD, cls("Level Shift ", 100, 180)) == 0.0


def test_classify_no_anomaly():
    assert score("classify_with_evidence", CLS_NONE, cls("No anomaly")) == 1.0
    assert score("classify_with_evidence", CLS_NONE, cls("Level Shift", 0, 10)) == 0.0
    missed = metrics("classify_with_evidence", CLS_GOLD, cls("No anomaly"))
    assert missed["valid"] and missed["score"] == 0.0 and missed["presence_correct"] == 0.0
    # "No Anomaly" is the MCQ spelling: not the precise label, so it needs a window.
    assert metrics("classify_with_evidence", CLS_NONE, cls("No Anomaly"))["valid"] is False


def test_classify_type_checks():
    assert metrics("classify_with_evidence", CLS_GOLD, cls("Level Shift"))["error"] == "missing 'start'"
    assert not metrics("classify_with_evidence", CLS_GOLD, '{"kind": 3, "start": 100, "end": 180}')["valid"]


# --- measure magnitude ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "estimate, expected",
    [
        ("10", 1.0),
        ("10.0", 1.0),
        ("12.5", 0.5),
        ("7.5", 0.5),
        ("11", 0.8),
        ("15", 0.0),
        ("20", 0.0),
        ("5", 0.0),
        ("-10", 0.0),
    ],
)
def test_magnitude_ramp(estimate, expected):
    result = metrics("measure_magnitude", MAG_GOLD, f'{{"magnitude_sigma": {estimate}}}')
    assert result["valid"]
    assert result["score"] == pytest.approx(expected)


def test_magnitude_secondary_metrics():
    result = metrics("measure_magnitude", MAG_GOLD, '{"magnitude_sigma": 11}')
    assert result["rel_err"] == pytest.approx(0.1)
    assert (result["acc_rel_10"], result["acc_rel_25"], result["acc_rel_50"]) == (1.0, 1.0, 1.0)
    result = metrics("measure_magnitude", MAG_GOLD, '{"magnitude_sigma": 13}')
    assert (result["acc_rel_10"], result["acc_rel_25"], result["acc_rel_50"]) == (0.0, 0.0, 1.0)


@pytest.mark.parametrize("estimate", ['"10"', "true", "NaN", "Infinity", "null", "1e400", "[10]"])
def test_magnitude_rejects_non_numbers(estimate):
    result = metrics("measure_magnitude", MAG_GOLD, f'{{"magnitude_sigma": {estimate}}}')
    assert not result["valid"] and result["score"] == 0.0 and result["rel_err"] is None


# --- localize all channels ------------------------------------------------------------------


def test_all_channels_by_name_and_by_index():
    assert score("localize_all_channels", AC_GOLD, events(("ch_02", 100, 200), ("ch_07", 500, 600))) == 1.0
    by_index = metrics("localize_all_channels", AC_GOLD, events((7, 500, 600), (2.0, 100, 200)))
    assert by_index["score"] == 1.0
    assert by_index["parsed"]["anomalies"][0]["channel"] == "ch_07"


@pytest.mark.parametrize("channel", [16, -1, "ch_16", "CH_02", "2", True, 2.5, None])
def test_all_channels_bad_channel_invalidates_the_answer(channel):
    response = events(("ch_07", 500, 600), (channel, 100, 200))
    result = metrics("localize_all_channels", AC_GOLD, response)
    assert not result["valid"] and result["score"] == 0.0


def test_all_channels_one_malformed_event_invalidates_the_answer():
    good = {"channel": "ch_02", "start": 100, "end": 200}
    response = json.dumps({"anomalies": [good, {"channel": "ch_07", "start": 500}]})
    assert metrics("localize_all_channels", AC_GOLD, response)["error"] == "missing anomaly 1 'end'"
    assert not metrics("localize_all_channels", AC_GOLD, '{"anomalies": {"channel": "ch_02"}}')["valid"]
    assert not metrics("localize_all_channels", AC_GOLD, '{"anomalies": ["ch_02"]}')["valid"]


def test_all_channels_f1_counts():
    one = metrics("localize_all_channels", AC_GOLD, events(("ch_02", 100, 200)))
    assert (one["tp"], one["fp"], one["fn"]) == (1, 0, 1)
    assert one["score"] == pytest.approx(2 / 3)
    assert (one["precision"], one["recall"]) == (1.0, 0.5)
    response = events(("ch_02", 100, 200), ("ch_07", 500, 600), ("ch_03", 0, 50))
    extra = metrics("localize_all_channels", AC_GOLD, response)
    assert (extra["tp"], extra["fp"], extra["fn"]) == (2, 1, 0)
    assert extra["score"] == pytest.approx(0.8)
    wrong_channel = metrics("localize_all_channels", AC_GOLD, events(("ch_03", 100, 200)))
    assert (wrong_channel["tp"], wrong_channel["fp"], wrong_channel["fn"]) == (0, 1, 2)
    assert wrong_channel["score"] == 0.0


def test_all_channels_empty_sides():
    empty_gold = ac_gold()
    assert score("localize_all_channels", empty_gold, '{"anomalies": []}') == 1.0
    assert score("localize_all_channels", empty_gold, events(("ch_00", 0, 10))) == 0.0
    assert score("localize_all_channels", AC_GOLD, '{"anomalies": []}') == 0.0
    nothing = metrics("localize_all_channels", empty_gold, '{"anomalies": []}')
    assert nothing["precision"] is None and nothing["recall"] is None


def test_all_channels_iou_exactly_point_three_does_not_match():
    gold = ac_gold(("ch_00", 0, 10))
    assert Fraction(3, 10) == Fraction(3, 10 + 3 - 3)  # [0, 3) inside [0, 10): 3 / 10
    assert score("localize_all_channels", gold, events(("ch_00", 0, 3))) == 0.0
    assert score("localize_all_channels", gold, events(("ch_00", 0, 4))) == 1.0
    # [4, 20) against [0, 10): intersection 6, union 20, IoU exactly 3/10.
    assert Fraction(6, 20) == Fraction(3, 10)
    assert score("localize_all_channels", gold, events(("ch_00", 4, 20))) == 0.0
    assert score("localize_all_channels", gold, events(("ch_00", 4, 19))) == 1.0  # 6/19 > 0.3


def test_greedy_matching_prefers_the_higher_iou():
    gold_events = [
        {"channel": "ch_00", "start": 0, "end": 100},
        {"channel": "ch_00", "start": 100, "end": 200},
    ]
    # [40, 150): 60/150 = 0.4 with the first gold, 50/160 = 0.3125 with the second.
    assert match_events(gold_events, [{"channel": "ch_00", "start": 40, "end": 150}]) == [(0, 0)]
    # [50, 160): 50/160 with the first, 60/150 with the second.
    assert match_events(gold_events, [{"channel": "ch_00", "start": 50, "end": 160}]) == [(1, 0)]


def test_greedy_matching_is_not_an_optimal_assignment():
    # P=[40,150) pairs first with A=[0,100) (0.4); Q=[0,35) could only take A (0.35), and P-B
    # (0.3125) is gone because P is used. Greedy: TP 1, FP 1, FN 1 -> F1 0.5 (optimal would be 1).
    gold = ac_gold(("ch_00", 0, 100), ("ch_00", 100, 200))
    result = metrics("localize_all_channels", gold, events(("ch_00", 40, 150), ("ch_00", 0, 35)))
    assert (result["tp"], result["fp"], result["fn"]) == (1, 1, 1)
    assert result["score"] == 0.5


def test_each_gold_event_is_used_once():
    gold = ac_gold(("ch_05", 0, 100))
    result = metrics("localize_all_channels", gold, events(("ch_05", 0, 100), (5, 0, 100)))
    assert (result["tp"], result["fp"], result["fn"]) == (1, 1, 0)
    assert result["score"] == pytest.approx(2 / 3)


# --- lead-lag -------------------------------------------------------------------------------


def ll(direction, lag=None) -> str:
    answer = {"direction": direction}
    if lag is not None:
        answer["lag_samples"] = lag
    return json.dumps(answer)


def test_lead_lag_ramp():
    assert score("lead_lag_with_magnitude", LL_GOLD, ll("lead", 1000)) == 1.0
    assert score("lead_lag_with_magnitude", LL_GOLD, ll("lead", 1000.0)) == 1.0
    one_pct = metrics("lead_lag_with_magnitude", LL_GOLD, ll("lead", 2000))  # |1000|/1e5 = 1 % of L
    assert one_pct["score"] == pytest.approx(0.8)
    assert (one_pct["lag_acc_1pct"], one_pct["lag_acc_5pct"]) == (1.0, 1.0)
    two_pct = metrics("lead_lag_with_magnitude", LL_GOLD, ll("lead", 3000))
    assert two_pct["score"] == pytest.approx(0.6)
    assert (two_pct["lag_acc_1pct"], two_pct["lag_acc_5pct"]) == (0.0, 1.0)
    assert score("lead_lag_with_magnitude", LL_GOLD, ll("lead", 6000)) == 0.0
    assert score("lead_lag_with_magnitude", LL_GOLD, ll("lead", -50000)) == 0.0


def test_lead_lag_wrong_direction():
    result = metrics("lead_lag_with_magnitude", LL_GOLD, ll("lag", 1000))
    assert result["valid"] and result["score"] == 0.0 and result["direction_correct"] == 0.0
    assert result["lag_acc_5pct"] == 0.0


def test_lead_lag_type_checks():
    assert not metrics("lead_lag_with_magnitude", LL_GOLD, ll("Lead", 1000))["valid"]
    assert not metrics("lead_lag_with_magnitude", LL_GOLD, ll("lead", "1000"))["valid"]
    missing_lag = metrics("lead_lag_with_magnitude", LL_GOLD, ll("lead"))
    assert missing_lag["error"] == "'lag_samples' is not an integer"


def test_lead_lag_independent():
    assert score("lead_lag_with_magnitude", LL_INDEPENDENT, ll("independent", 0)) == 1.0
    assert score("lead_lag_with_magnitude", LL_INDEPENDENT, ll("independent", 250.0)) == 1.0  # integral float
    result = metrics("lead_lag_with_magnitude", LL_INDEPENDENT, ll("lead", 0))
    assert result["score"] == 0.0 and result["lag_acc_1pct"] is None
    assert score("lead_lag_with_magnitude", LL_GOLD, ll("independent")) == 0.0


# --- MCQ ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "response, expected",
    [
        ("Yes", 1.0),
        ("  Yes \n", 1.0),
        ('"Yes"', 1.0),
        ("'Yes'", 1.0),
        ("' Yes '", 1.0),
        ("''Yes''", 0.0),  # only one pair of quotes comes off
        ("yes", 0.0),
        ("Yes.", 0.0),
        ('{"answer": "Yes"}', 1.0),
        ('```json\n{"answer": " Yes "}\n```', 1.0),
        ('I lean No.\n{"answer": "Yes"}', 1.0),
        ('{"answer": "No"} wait, actually {"answer": "Yes"}', 1.0),
        ('{"answer": "Yes"} {"confidence": 0.9}', 1.0),  # last object *that has* an answer
        ('Answer: No\n{"answer": "Yes"}', 1.0),  # JSON beats an answer line
        ("Let me look.\nAnswer: Yes", 1.0),
        ('answer: No\nmore thoughts\n   ANSWER:  "Yes"  ', 1.0),
        ("Answer:\n\nYes", 1.0),  # blank answer line: the next non-blank line
        ("The answer: Yes", 0.0),  # the line must start with answer:
        ("<think>Answer: No</think>Yes", 1.0),
        ('<think>{"answer": "No"}</think>\nAnswer: Yes', 1.0),
        ('{"answer": 1}', 0.0),
        ("", 0.0),
    ],
)
def test_mcq_extraction(response, expected):
    assert score("presence", PRESENCE_GOLD, response) == expected


def test_mcq_answers_with_special_characters():
    assert score("magnitude_band", {"answer": "3-10σ"}, "Answer: 3-10σ") == 1.0
    assert score("categorization", {"answer": "No Anomaly"}, '{"answer": "No Anomaly"}') == 1.0
    assert score("identification", {"answer": "ch_01, ch_04"}, "ch_01, ch_04") == 1.0


def test_mcq_metrics_fields():
    result = metrics("start_time", {"answer": "Early"}, "Answer: Early")
    assert result == {"score": 1.0, "valid": True, "parsed": "Early", "error": None}
    assert metrics("indicator", {"answer": "Leading"}, "  ")["valid"] is False
    assert extract_choice('{"answer": "Late"}') == "Late"


def test_mcq_valid_only_for_one_of_the_options():
    """valid means the answer is one of the row's options; anything else is invalid and scores 0."""
    row = {"answer": "ch_01, ch_04", "options": ["ch_01", "ch_04", "ch_01, ch_04", "ch_01, ch_04, ch_09", "None"]}
    assert metrics("identification", row, "Answer: ch_01, ch_04")["valid"]
    outside = metrics("identification", row, "Answer: ch_09")
    assert outside == {"score": 0.0, "valid": False, "parsed": "ch_09", "error": "not one of the options"}
    assert not metrics("presence", {"answer": "Yes"}, "Maybe")["valid"]  # no list in the gold: the template's
    assert metrics("presence", PRESENCE_GOLD, "No") == {"score": 0.0, "valid": True, "parsed": "No", "error": None}
    dropped = {
        "answer": "Level Shift",
        "options": ["Level Shift", "Transient Spike", "Change in Trend", "Change in Variance", "No Anomaly"],
    }
    assert not metrics("categorization", dropped, "Change in Seasonality")["valid"]  # the label this row dropped
    assert metrics("categorization", {"answer": "Level Shift"}, "Change in Seasonality")["valid"]
    assert metrics("identification", {"answer": "ch_01"}, "anything")["valid"]  # options unknown: not judged


# The shapes of the 15 rows where the authors' scorer disagreed: their schema check
# (`_valid_lead_lag_with_magnitude`) wants an integer lag_samples in EVERY answer, independent included.
AUTHORS_DISAGREEING_SHAPES = [
    '{"direction": "independent"}',
    '{"direction": "independent", "lag_samples": null}',
    '{"direction": "independent", "lag_samples": 12.5}',
    '{"direction": "independent", "lag_samples": "0"}',
    '{"direction": "independent", "lag_samples": "n/a"}',
    '{"direction": "independent", "lag_samples": true}',
    '{"direction": "independent", "lag_samples": false}',
    '{"direction": "lead", "lag_samples": 1000.5}',
    '{"direction": "lag", "lag_samples": "1000"}',
    '{"direction": "lead", "lag_samples": null}',
    '{"direction": "lag", "lag_samples": true}',
    '{"direction": "lead"}',
]


@pytest.mark.parametrize("answer", AUTHORS_DISAGREEING_SHAPES)
def test_lead_lag_needs_an_integer_lag_in_every_answer(answer):
    for gold in (LL_INDEPENDENT, LL_GOLD):
        result = metrics("lead_lag_with_magnitude", gold, answer)
        assert not result["valid"] and result["score"] == 0.0, (answer, gold["direction"])
        assert result["error"] == "'lag_samples' is not an integer"


def test_lead_lag_independent_with_an_integer_lag_is_valid():
    for lag in (0, 17, 3.0):
        answer = json.dumps({"direction": "independent", "lag_samples": lag})
        result = metrics("lead_lag_with_magnitude", LL_INDEPENDENT, answer)
        assert result["valid"] and result["score"] == 1.0, lag


def test_generated_mcq_golds_list_their_options(small_data):
    from tsbench.tasks.anomalyxl.rows import read_index

    index = read_index(small_data / "test-coarse.parquet")
    for gold in index["gold"].map(json.loads):
        assert gold["answer"] in gold["options"]


# --- aggregation ----------------------------------------------------------------------------


def test_category_means_and_overall_mean():
    rows = [("a", 1.0), ("a", 0.0), ("b", 0.5), ("a", 1.0)]
    assert category_means(rows) == {"a": pytest.approx(2 / 3), "b": 0.5}
    assert overall_mean([("a", 1.0), ("a", 1.0), ("a", 1.0), ("b", 0.0)]) == 0.75
    with pytest.raises(ValueError):
        overall_mean([])


def test_macro_f1_hand_computed():
    golds = ["Yes", "Yes", "No", "No"]
    preds = ["Yes", "No", "No", "No"]
    # Yes: TP1 FP0 FN1 -> 2/3; No: TP2 FP1 FN0 -> 4/5; mean 11/15.
    assert macro_f1(golds, preds) == pytest.approx(11 / 15)
    assert macro_f1(golds, preds, options=["Yes", "No", "Maybe"]) == pytest.approx(11 / 15)
    assert macro_f1(golds, golds) == 1.0


def test_macro_f1_out_of_option_predictions():
    # With options, "???" is no class but still misses B: A 1, B 0 -> 0.5. Without: A, B, ??? -> 1/3.
    assert macro_f1(["A", "B"], ["A", "???"], options=["A", "B", "C"]) == 0.5
    assert macro_f1(["A", "B"], ["A", "???"]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        macro_f1(["A"], [])


def test_bootstrap_ci_hand_checked():
    # Resampled means of [0, 1] are 0, 0.5, 1 with odds 1/4, 1/2, 1/4, so the 95 % interval is [0, 1].
    assert bootstrap_ci([0.0, 1.0], n_boot=4000) == (0.0, 1.0)
    assert bootstrap_ci([0.7] * 20) == pytest.approx((0.7, 0.7))
    values = [0.0, 0.2, 0.9, 1.0, 0.5, 0.3, 0.8]
    assert bootstrap_ci(values, seed=3) == bootstrap_ci(values, seed=3)
    with pytest.raises(ValueError):
        bootstrap_ci([])


def test_paired_bootstrap_diff():
    base = [0.1, 0.4, 0.9, 0.3, 0.6]
    diff, low, high = paired_bootstrap_diff([v + 0.1 for v in base], base)
    assert (diff, low, high) == pytest.approx((0.1, 0.1, 0.1))
    assert paired_bootstrap_diff([1, 0, 1, 1], [0, 0, 1, 0])[0] == 0.5
    with pytest.raises(ValueError):
        paired_bootstrap_diff([1.0, 0.0], [1.0])


def test_a_letter_for_a_multiple_choice_answer_scores_0_and_says_why():
    """AnomalyXL has no official scorer: the paper's rule matches the option text, and its prompts list
    the options without letters, so an lm-eval style letter names no option. It is invalid, and says so."""
    from tsbench.tasks import get_taskset

    family = get_taskset("anomalyxl")
    for reply in ("B", "(A)", '{"answer": "c."}'):
        scored = family.score("presence", {"answer": "Yes"}, reply)
        assert scored.score == 0.0 and not scored.valid and "is a letter" in scored.error
    assert family.score("presence", {"answer": "Yes"}, "Maybe").error == "not one of the options"
    assert family.score("presence", {"answer": "Yes"}, '{"answer": "Yes"}').score == 1.0
