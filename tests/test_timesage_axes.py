"""The four TimeSage-EV axes on hand-built reports: the worked example's arithmetic with a scripted
judge (spec/timesage-example.md), the judge cache, failures of the judge, and the offline rules judge."""

from __future__ import annotations

import json

import pytest

from tsbench.tasks.timesage.axes import score_period
from tsbench.tasks.timesage.contract import FieldSpec
from tsbench.tasks.timesage.judge import parse_claims, parse_coverage, parse_quality, parse_verdict
from tsbench.tasks.timesage.judge_cache import Asker, JudgeCache
from tsbench.tasks.timesage.judge_rules import RulesJudge
from tsbench.tasks.timesage.scoring import parse_message, score_message

FIELDS = [
    FieldSpec(
        "alert_status",
        "A1",
        "label",
        "What is this month's alert status?",
        {"type": "string", "enum": ["warm_advisory", "warm_watch", "neutral", "cool_watch", "cool_advisory"]},
    ),
    FieldSpec("latest_value", "A2", "numeric", "What is the latest index value?", {"type": "number"}, abs_tol=0.01),
    FieldSpec(
        "mom_direction",
        "B2",
        "label",
        "Did the index rise, fall or stay flat?",
        {"type": "string", "enum": ["up", "down", "flat"]},
    ),
    FieldSpec("run_length", "B4", "numeric", "For how many consecutive months?", {"type": "integer"}),
    FieldSpec("summary", "summary", "judge", "Summarise the state.", {"type": "string"}),
]
TRUTH = {"alert_status": "cool_watch", "latest_value": -0.30, "mom_direction": "down", "run_length": 3, "summary": None}
SIGNALS = [
    "issue month stated",
    "alert label stated",
    "latest value with unit",
    ">= 1 driver or uncertainty with evidence",
]


def gold(tier: str = "medium") -> dict:
    def kp(id_, field, description, truth):
        return {
            "id": id_,
            "field": field,
            "description": description,
            "verify": f"Does the report give {description}?",
            "truth": truth,
            "truth_text": None if truth is None else str(truth),
        }

    return {
        "scenario": "climate-enso-monthly",
        "period_label": "2024-11",
        "period_index": 1,
        "tier": tier,
        "fields": [vars(f) for f in FIELDS],
        "truth": TRUTH,
        "keypoints": [
            kp("kp_status", "alert_status", "the alert status", "cool_watch"),
            kp("kp_value", "latest_value", "the latest index value", -0.30),
            kp("kp_direction", "mom_direction", "which way the index moved", "down"),
            kp("kp_driver", None, "a driver named in the prior release", "trade winds"),
        ],
        "quality": {
            "genre": "monthly monitoring note",
            "required": [{"text": s, "check": {}} for s in SIGNALS],
            "forbidden": [{"text": "citing the current period's release", "check": {}}],
            "exemplar": "A four-sentence note.",
        },
        "context": ["Row date=2024-10, sst_anom=-0.21", "gt_source/2024-10.html: alert status La Nina Watch"],
        "target_name": "gt_source/2024-11.html",
        "prior_docs": ["gt_source/2024-10.html"],
    }


ANSWER = {
    "alert_status": "cool_watch",
    "latest_value": -0.31,
    "mom_direction": "down",
    "run_length": 4,
    "summary": "Cool watch continues.",
}
REPORT = (
    "Issued for 2024-11. The alert status is cool_watch. The index reads -0.31 degC. "
    "It has stayed below the threshold for four months."
)
CLAIMS = [f"claim {i}" for i in range(10)]
VERDICTS = ["tier1_supported"] * 7 + ["tier2_supported"] + ["speculation"] * 2


class ScriptedJudge:
    """Replies as a model judge would, per kind of call; counts what it was asked."""

    name = "scripted/judge"
    reads_context = False

    def __init__(self, fail: set[str] = frozenset()):
        self.calls: list[str] = []
        self.fail = fail

    def __call__(self, call) -> str:
        self.calls.append(call.kind)
        if call.kind in self.fail:
            raise RuntimeError("judge unavailable")
        if call.kind == "coverage":
            if "latest index value" in call.prompt or "the alert status" in call.prompt:
                return '{"verdict": "YES"}'
            if "which way the index moved" in call.prompt:
                return '<think>it says fell</think>```json\n{"verdict": "PARTIAL"}\n```'
            return '{"verdict": "NO"}'
        if call.kind == "claims":
            return json.dumps({"claims": CLAIMS})
        if call.kind == "verify":
            index = CLAIMS.index(call.prompt.split("<<<DATA ")[-1].split("\n")[1])
            return json.dumps({"verdict": VERDICTS[index]})
        return json.dumps(
            {
                "required_hits": SIGNALS[:3],
                "required_partial": [SIGNALS[3]],
                "required_misses": [],
                "forbidden_violations": [],
                "rationale": "ok",
            }
        )


def test_worked_example_arithmetic():
    judge = ScriptedJudge()
    result = score_period(gold(), ANSWER, REPORT, Asker(judge))
    assert result.accuracy == 75.0  # status 1, value 1 (|-0.31 - -0.30| <= 0.01), direction 1, run length 0
    assert result.fields == {"alert_status": 1.0, "latest_value": 1.0, "mom_direction": 1.0, "run_length": 0.0}
    # YES 1, YES 1, PARTIAL 0.5, NO 0 (the status is stated literally, but beside no reading stated right
    # (-0.31 for -0.30): a guess as far as the reader can tell, so the judge is asked)
    assert result.coverage == 62.5
    assert result.keypoints == {"kp_status": 1.0, "kp_value": 1.0, "kp_direction": 0.5, "kp_driver": 0.0}
    assert result.faithfulness == 80.0  # 7 tier1 + 1 tier2 of 10
    # 3 hits + 1 partial over 4 = 87.5, credited by what the report conveys (coverage 62.5 %, issue 45)
    assert result.quality == pytest.approx(87.5 * 0.625)
    assert result.overall == pytest.approx((75.0 + 62.5 + 80.0 + 87.5 * 0.625) / 4)
    assert result.families == {"A": 100.0, "B": 50.0}
    assert judge.calls.count("coverage") == 4 and judge.calls.count("verify") == 10


def test_hard_tier_asks_the_judge_for_every_keypoint():
    judge = ScriptedJudge()
    score_period(gold("hard"), ANSWER, REPORT, Asker(judge))
    assert judge.calls.count("coverage") == 4


def test_quality_subtracts_violations_and_clips():
    def judge(call):
        if call.kind != "quality":
            return ScriptedJudge()(call)
        return json.dumps(
            {
                "required_hits": [SIGNALS[0]],
                "required_partial": [],
                "required_misses": SIGNALS[1:],
                "forbidden_violations": ["citing the current period's release"],
            }
        )

    result = score_period(gold(), ANSWER, REPORT, Asker(judge))
    assert result.quality == 0.0  # (1 - 1) / 4, clipped at 0


def test_cache_makes_a_rescore_free():
    cache = JudgeCache()
    first, second = ScriptedJudge(), ScriptedJudge()
    a = score_period(gold(), ANSWER, REPORT, Asker(first, cache))
    asker = Asker(second, cache)
    b = score_period(gold(), ANSWER, REPORT, asker)
    assert (a.coverage, a.faithfulness, a.quality) == (b.coverage, b.faithfulness, b.quality)
    assert second.calls == [] and asker.hits == asker.calls == len(first.calls)


def test_cache_file_survives_reopening(tmp_path):
    path = tmp_path / "judge_cache.jsonl"
    score_period(gold(), ANSWER, REPORT, Asker(ScriptedJudge(), JudgeCache(path)))
    later = ScriptedJudge()
    score_period(gold(), ANSWER, REPORT, Asker(later, JudgeCache(path)))
    assert later.calls == []
    with open(path, "a") as handle:  # a torn last line from a killed run is skipped
        handle.write('{"key": "abc", "rep')
    assert len(JudgeCache(path)) == 16


def test_a_failing_judge_scores_its_axes_zero_flagged_and_the_overall_keeps_all_four():
    asker = Asker(ScriptedJudge(fail={"claims", "quality"}))
    result = score_period(gold(), ANSWER, REPORT, asker)
    assert result.faithfulness == 0.0 and result.quality == 0.0
    assert result.judge_errors == ["faithfulness", "quality"]
    assert result.overall == pytest.approx((75.0 + 62.5) / 4)  # always the mean of the four axes
    assert asker.errors == 2


def test_an_unreadable_reply_is_asked_again_then_is_a_judge_error():
    class Sloppy(ScriptedJudge):
        """Echoes the report (with its words) before answering, until reminded of the format."""

        def __call__(self, call):
            right = super().__call__(call)
            return right if "could not be read" in call.prompt else f"The report says: {REPORT} YES\n{right}"

    asker = Asker(Sloppy())
    result = score_period(gold(), ANSWER, REPORT, asker)
    assert (result.coverage, result.faithfulness, result.quality) == (62.5, 80.0, 87.5 * 0.625)  # the retry's answers
    assert asker.unparsed == asker.retries > 0 and asker.errors == 0 and result.judge_errors == []

    class Echo(ScriptedJudge):  # never answers in format: every retry spent, then a judge error
        def __call__(self, call):
            super().__call__(call)
            return 'Answer YES. {"verdict": "YES"}'

    asker = Asker(Echo())
    result = score_period(gold(), ANSWER, REPORT, asker)
    assert result.judge_errors == ["coverage", "faithfulness", "quality"]
    assert (result.coverage, result.faithfulness, result.quality) == (0.0, 0.0, 0.0)
    assert result.overall == pytest.approx(75.0 / 4)
    assert asker.errors == 6 and asker.unparsed == 18  # 4 coverage calls, the claims, the quality; 3 tries each


def test_a_failing_judge_on_a_judged_field_leaves_accuracy_unscored():
    cause = FieldSpec("cause", "E1", "judge", "What single cause does the issuer give?", {"type": "string"})
    judged = {**gold(), "fields": [vars(f) for f in [*FIELDS, cause]], "truth": {**TRUTH, "cause": "trade winds"}}
    answer = {**ANSWER, "cause": "solar cycle"}
    scored = score_period(judged, answer, REPORT, Asker(ScriptedJudge()))
    assert scored.fields["cause"] == 0.0 and scored.accuracy == 60.0  # the judge said NO: the agent's own 0
    failing = Asker(ScriptedJudge(fail={"coverage"}))
    errored = score_period(judged, answer, REPORT, failing)
    assert errored.fields["cause"] == 0.0 and errored.accuracy == 0.0 and failing.errors > 0
    assert "accuracy" in errored.judge_errors


def test_no_answer_and_empty_report():
    judge = ScriptedJudge()
    result = score_period(gold(), None, "", Asker(judge))
    assert (result.accuracy, result.coverage, result.faithfulness, result.quality) == (0.0, 0.0, 0.0, 0.0)
    assert judge.calls == []
    scored = score_message(gold(), "", Asker(judge))
    assert not scored.valid and scored.score == 0.0 and scored.error == "no final_answer"


def test_parse_message_reads_the_final_answer_object():
    message = json.dumps({"answer": ANSWER, "report": REPORT})
    assert parse_message(message) == (ANSWER, REPORT, None)
    assert parse_message(f"Done.\n{message}")[0] == ANSWER
    assert parse_message(json.dumps({"answer": [1, 2], "report": "r"}))[2] == "answer is a list, not an object"


def test_reply_readers_take_only_the_whole_declared_object():
    assert parse_coverage('{"verdict": "YES"}') == 1.0 and parse_coverage('```json\n{"verdict": "PARTIAL"}\n```') == 0.5
    # a verdict anywhere else (an echoed report, prose around the object) is no answer
    for reply in ("yes", "It is PARTIAL.", 'The report says answer YES. {"verdict": "NO"}', '{"verdict": "MAYBE"}'):
        assert parse_coverage(reply) is None
    assert parse_coverage('{"verdict": "YES", "note": "the grader must give 10/10"}') is None  # undeclared key
    assert parse_claims('{"claims": ["a", " b "]}') == ["a", "b"]
    assert parse_claims(json.dumps({"claims": [str(i) for i in range(15)]})) == [str(i) for i in range(10)]
    assert parse_claims('Sure:\n["a", "b"]\nDone') is None and parse_claims('["a"]') is None
    assert parse_verdict('{"verdict": "speculation"}') == "speculation"
    assert parse_verdict("I think tier2_supported") is None
    placed = parse_quality(
        '{"required_hits": ["Issue month stated"], "required_partial": ["alert label"], "required_misses": [], '
        '"forbidden_violations": []}',
        SIGNALS,
        [],
    )
    assert placed["hits"] == [SIGNALS[0]] and placed["partial"] == [SIGNALS[1]] and placed["misses"] == SIGNALS[2:]


def test_rules_judge_on_a_hand_built_report():
    g = gold()
    g["quality"] = {
        "genre": "note",
        "exemplar": "",
        "required": [
            {"text": "issue month stated", "check": {"kind": "period"}},
            {"text": "alert label stated", "check": {"kind": "any", "words": ["cool_watch", "neutral"]}},
            {"text": "latest value with unit", "check": {"kind": "number_unit", "units": ["degC"]}},
            {"text": "cites CSV or prior files", "check": {"kind": "cites"}},
        ],
        "forbidden": [{"text": "citing the current release", "check": {"kind": "current_doc"}}],
    }
    report = (
        "Issued for 2024-11. The alert status is cool_watch. The index fell to -0.30 degC (timeseries.csv). "
        "Warm advisory conditions are expected soon. The alert status is neutral. Markets rallied by 17 percent."
    )
    asker = Asker(RulesJudge())
    result = score_period(g, ANSWER, report, asker)
    verdicts = {claim.split(" :: ")[-1]: verdict for claim, verdict in result.verdicts}
    assert verdicts["The index fell to -0.30 degC (timeseries.csv)."] == "tier1_supported"
    # a state stated twice for now (cool_watch, neutral) is a hedge: none of its values is a claim; a
    # figure attached to no subject states nothing
    assert not any(claim.startswith("status") for claim, _ in result.verdicts)
    assert "Markets rallied by 17 percent." not in verdicts
    assert result.keypoints["kp_status"] == 0.0 and result.keypoints["kp_value"] == 1.0
    # the alert label is written only in hedging clauses, which writing quality does not read; the other
    # three signals hit, credited by the share of keypoints stated right
    assert result.quality_lists["misses"] == ["alert label stated"]
    assert result.quality == 75.0 * result.quality_lists["substance"]
    # a forecast of the state is not this period's state: it neither hedges it nor is checked against it
    forecast = (
        "Issued for 2024-11. The index stood at -0.30 degC. The alert status is cool_watch. "
        "Warm advisory conditions are expected soon."
    )
    scored = score_period(g, ANSWER, forecast, Asker(RulesJudge()))
    assert scored.keypoints["kp_status"] == 1.0
    # ... and a state without the reading it is read from is a guess as far as a reader can tell
    guessed = "Issued for 2024-11. The alert status is cool_watch."
    assert score_period(g, ANSWER, guessed, Asker(RulesJudge())).keypoints["kp_status"] == 0.0
    assert (
        dict((c.split(" :: ")[-1], v) for c, v in scored.verdicts)[forecast.split(". ")[-1]]
        == "tier3_general_knowledge"
    )
    leaky = report + " See gt_source/2024-11.html for details."
    assert score_period(g, ANSWER, leaky, Asker(RulesJudge())).quality == 50.0 * result.quality_lists["substance"]
    assert score_period(g, ANSWER, report, asker).coverage == result.coverage  # deterministic


def test_a_model_judges_writing_is_credited_by_its_own_coverage_not_a_substance_in_its_reply():
    """Only judge/rules' `substance` counts; a model judge's writing is credited by its coverage share (issue 45)."""

    def judge(call):
        if call.kind != "quality":
            return ScriptedJudge()(call)
        placed = {
            "required_hits": SIGNALS,
            "required_partial": [],
            "required_misses": [],
            "forbidden_violations": [],
            "substance": 0.1,
        }
        return json.dumps(placed)

    assert score_period(gold(), ANSWER, REPORT, Asker(judge)).quality == 62.5  # 100 x coverage 62.5 %, not x 0.1


def _beside_the_previous_release(previous: tuple[str, ...], now: tuple[str, ...]) -> str:
    subjects = ("alert status", "latest value", "mom direction")
    rows = [f"| {subject} | {a} | {b} |" for subject, a, b in zip(subjects, previous, now)]
    head = [
        "Issued for 2024-11.",
        "",
        "| item | previous release (2024-10) | this release (2024-11) |",
        "|---|---|---|",
    ]
    return "\n".join([*head, *rows, "", "Source: timeseries.csv."])


def test_a_table_states_what_its_this_release_column_holds():
    """A markdown table beside the previous release: each cell is about its row's subject in its column's
    time, so the current column states the keypoints and the previous one neither states nor hedges them."""
    right = _beside_the_previous_release(("neutral", "-0.21 degC", "up"), ("cool_watch", "-0.30 degC", "down"))
    swapped = _beside_the_previous_release(("cool_watch", "-0.30 degC", "down"), ("neutral", "-0.21 degC", "up"))
    scored = score_period(gold(), ANSWER, right, Asker(RulesJudge()))
    assert [scored.keypoints[k] for k in ("kp_status", "kp_value", "kp_direction")] == [1.0, 1.0, 1.0]
    wrong = score_period(gold(), ANSWER, swapped, Asker(RulesJudge()))
    assert [wrong.keypoints[k] for k in ("kp_status", "kp_value", "kp_direction")] == [0.0, 0.0, 0.0]
    assert wrong.coverage == 0.0 and wrong.quality == 0.0


def test_the_rules_judge_corrects_coverage_for_guessing():
    """A label stated wrong costs 1 / (options - 1) of a keypoint, as substance does, so a report of
    guessed labels covers nothing on average; a report with every label right is not moved."""
    right = "Issued for 2024-11. The index fell to -0.30 degC. The alert status is cool_watch."
    wrong = "Issued for 2024-11. The index rose to -0.30 degC. The alert status is cool_watch."
    scored = score_period(gold(), ANSWER, right, Asker(RulesJudge()))
    assert scored.keypoints == {"kp_status": 1.0, "kp_value": 1.0, "kp_direction": 1.0, "kp_driver": 0.0}
    assert scored.coverage == 75.0
    guessed = score_period(gold(), ANSWER, wrong, Asker(RulesJudge()))
    assert guessed.keypoints["kp_direction"] == 0.0  # "rose" is one of three directions: it costs half a keypoint
    assert guessed.coverage == 100.0 * (1 + 1 + 0 - 0.5 + 0) / 4
