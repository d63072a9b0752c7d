"""Property tests: scoring never raises, stays in [0, 1], and a gold answer always scores 1."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tsbench.core.answers import iou
from tsbench.core.stats import bootstrap_ci, macro_f1
from tsbench.core.text import json_object_spans
from tsbench.tasks.anomalyxl.metrics import metrics, score

CHANNELS = [f"ch_{i:02d}" for i in range(16)]
GOLDS = {
    "localize": [
        {"present": True, "start": 100, "end": 180, "_L": 16384},
        {"present": False, "_L": 16384},
    ],
    "classify_with_evidence": [
        {"kind": "Change in Variance", "start": 4000, "end": 4100, "_L": 32768},
        {"kind": "No anomaly", "_L": 32768},
    ],
    "measure_magnitude": [{"magnitude_sigma": 13.62, "_L": 65536}],
    "localize_all_channels": [
        {
            "anomalies": [
                {"channel": "ch_02", "start": 100, "end": 200},
                {"channel": "ch_02", "start": 900, "end": 1000},
                {"channel": "ch_11", "start": 5000, "end": 5040},
            ],
            "channels": CHANNELS,
            "_L": 32768,
        },
        {"anomalies": [], "channels": CHANNELS, "_L": 131072},
    ],
    "lead_lag_with_magnitude": [
        {"direction": "lag", "lag_samples": 777, "_L": 32768},
        {"direction": "independent", "lag_samples": 0, "_L": 131072},
    ],
    "presence": [{"answer": "No", "options": ["Yes", "No"]}],
    "start_time": [{"answer": "Medium"}],
    "categorization": [{"answer": "Change in Trend"}],
    "magnitude_band": [{"answer": "10-30σ"}],
    "identification": [{"answer": "ch_00 and ch_02"}],
    "indicator": [{"answer": "Uncorrelated"}],
}
CASES = [(category, gold) for category, golds in GOLDS.items() for gold in golds]
CASE_IDS = [f"{category}-{i}" for category, golds in GOLDS.items() for i in range(len(golds))]

FRAGMENTS = [
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    ":",
    ",",
    " ",
    "\n",
    "<think>",
    "</think>",
    "```json",
    "Answer: ",
    '"present"',
    '"start"',
    '"end"',
    '"kind"',
    '"magnitude_sigma"',
    '"anomalies"',
    '"channel"',
    '"direction"',
    '"lag_samples"',
    '"answer"',
    "true",
    "false",
    "null",
    "NaN",
    "-Infinity",
    "1e400",
    "100",
    "100.0",
    "100.5",
    "-3",
    "13.62",
    '"ch_02"',
    "2",
    "16",
    '"lead"',
    '"lag"',
    '"independent"',
    '"Level Shift"',
    '"No anomaly"',
    '"Yes"',
    '"No"',
]
json_ish_text = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["lead", "lag", "independent", "Level Shift", "No anomaly", "ch_02", "Yes"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["channel", "start", "end", "kind", "present"]), children, max_size=4)
    ),
    max_leaves=12,
)
ANSWER_KEYS = [
    "present",
    "start",
    "end",
    "kind",
    "magnitude_sigma",
    "anomalies",
    "direction",
    "lag_samples",
    "answer",
]
answer_like_objects = st.dictionaries(st.sampled_from(ANSWER_KEYS), json_values, max_size=5).map(json.dumps)

prose = st.text(alphabet=st.characters(blacklist_characters="{}<"), max_size=40)


def check_row(category: str, gold: dict, response: str) -> None:
    result = metrics(category, gold, response)
    assert 0.0 <= result["score"] <= 1.0
    assert result["score"] == score(category, gold, response)
    assert isinstance(result["valid"], bool)
    assert (result["error"] is None) == result["valid"]
    json.dumps(result, allow_nan=False)


def serialised_gold(gold: dict) -> str:
    answer = {key: value for key, value in gold.items() if not key.startswith("_") and key != "channels"}
    return json.dumps(answer)


PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("category, gold", CASES, ids=CASE_IDS)
@PROPERTY_SETTINGS
@given(response=st.text(max_size=200))
def test_any_text_scores_in_range(category, gold, response):
    check_row(category, gold, response)


@pytest.mark.parametrize("category, gold", CASES, ids=CASE_IDS)
@PROPERTY_SETTINGS
@given(response=json_ish_text)
def test_json_ish_text_scores_in_range(category, gold, response):
    check_row(category, gold, response)


@pytest.mark.parametrize("category, gold", CASES, ids=CASE_IDS)
@PROPERTY_SETTINGS
@given(answer=answer_like_objects, before=prose, after=prose)
def test_answer_like_objects_score_in_range(category, gold, answer, before, after):
    response = before + answer + after
    check_row(category, gold, response)
    result = metrics(category, gold, response)
    if result["valid"] and isinstance(result["parsed"], dict):
        # A valid precise answer's normalised form scores the same when sent back.
        assert score(category, gold, json.dumps(result["parsed"])) == result["score"]


@pytest.mark.parametrize("category, gold", CASES, ids=CASE_IDS)
@PROPERTY_SETTINGS
@given(before=prose, after=prose, fenced=st.booleans(), reasoning=st.booleans())
def test_gold_answer_scores_one(category, gold, before, after, fenced, reasoning):
    answer = serialised_gold(gold)
    if fenced:
        answer = f"```json\n{answer}\n```"
    if reasoning:
        answer = '<think>{"present": false, "answer": "nope"}</think>' + answer
    result = metrics(category, gold, before + answer + after)
    assert result["valid"] and result["score"] == 1.0


windows = st.tuples(st.integers(-1000, 1000), st.integers(-1000, 1000))


@given(a=windows, b=windows)
def test_iou_is_symmetric_and_bounded(a, b):
    value = iou(a, b)
    assert 0.0 <= value <= 1.0
    assert value == iou(b, a)
    if a[0] < a[1]:
        assert iou(a, a) == 1.0


labels = st.sampled_from(["A", "B", "C", "D"])


@given(pairs=st.lists(st.tuples(labels, labels), min_size=1, max_size=30))
def test_macro_f1_bounded_and_perfect_on_gold(pairs):
    golds = [gold for gold, _ in pairs]
    preds = [pred for _, pred in pairs]
    assert 0.0 <= macro_f1(golds, preds, options=["A", "B", "C", "D"]) <= 1.0
    assert macro_f1(golds, golds) == 1.0


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40), seed=st.integers(0, 2**32 - 1))
def test_bootstrap_ci_is_ordered_and_inside_the_data(values, seed):
    low, high = bootstrap_ci(values, n_boot=200, seed=seed)
    assert min(values) - 1e-12 <= low <= high <= max(values) + 1e-12
    assert (low, high) == bootstrap_ci(values, n_boot=200, seed=seed)


def reference_spans(text: str) -> list[tuple[int, int]]:
    """Plain restart-at-every-brace matcher: the definition json_object_spans must agree with."""
    spans = []
    i = text.find("{")
    while i >= 0:
        depth, in_string, escaped, end = 0, False, False, None
        for j in range(i, len(text)):
            ch = text[j]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    end = j
                    break
        if end is None:
            i = text.find("{", i + 1)
        else:
            spans.append((i, end + 1))
            i = text.find("{", end + 1)
    return spans


BRACE_FRAGMENTS = ["{", "}", '"', "\\", "a", " ", '{"', '"}', "{}"]
brace_heavy_text = st.lists(st.sampled_from(BRACE_FRAGMENTS), max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=brace_heavy_text)
def test_object_spans_match_the_reference_matcher(text):
    assert json_object_spans(text) == reference_spans(text)


events_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "channel": st.sampled_from(["ch_00", "ch_01", 1, 2]),
            "start": st.integers(0, 300),
            "end": st.integers(0, 300),
        }
    ),
    max_size=5,
)


@settings(max_examples=100, deadline=None)
@given(gold_events=events_strategy, predicted=events_strategy)
def test_all_channels_counts_are_consistent(gold_events, predicted):
    def name(channel):
        return channel if isinstance(channel, str) else CHANNELS[channel]

    by_name = [{**event, "channel": name(event["channel"])} for event in gold_events]
    gold = {"anomalies": by_name, "channels": CHANNELS, "_L": 32768}
    result = metrics("localize_all_channels", gold, json.dumps({"anomalies": predicted}))
    assert result["valid"]
    assert result["tp"] + result["fn"] == len(gold_events)
    assert result["tp"] + result["fp"] == len(predicted)
    tp = reference_matches(by_name, [{**e, "channel": name(e["channel"])} for e in predicted])
    assert result["tp"] == tp  # an independent greedy matcher, in exact fractions
    n_gold, n_pred = len(gold_events), len(predicted)
    assert result["score"] == pytest.approx(1.0 if n_gold == n_pred == 0 else 2 * tp / (n_gold + n_pred))


def reference_matches(gold: list[dict], predicted: list[dict]) -> int:
    """Pairs of same-channel windows with IoU > 3/10, taken greedily by IoU (ties: lower indices)."""
    from fractions import Fraction

    pairs = []
    for g, a in enumerate(gold):
        for p, b in enumerate(predicted):
            if a["channel"] != b["channel"]:
                continue
            inter = max(0, min(a["end"], b["end"]) - max(a["start"], b["start"]))
            union = max(0, a["end"] - a["start"]) + max(0, b["end"] - b["start"]) - inter
            if (
                a["start"] < a["end"]
                and b["start"] < b["end"]
                and inter > 0
                and Fraction(inter, union) > Fraction(3, 10)
            ):
                pairs.append((-Fraction(inter, union), g, p))
    used_g, used_p = set(), set()
    for _, g, p in sorted(pairs):
        if g not in used_g and p not in used_p:
            used_g.add(g)
            used_p.add(p)
    return len(used_g)
