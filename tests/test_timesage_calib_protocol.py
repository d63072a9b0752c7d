"""The judge protocol steps behind the calibration (paper A.4, A.5.2) on hand-built periods: a value
counts only when stated about its subject, listings earn nothing, numberless prose is no evidence,
long reports are cut, answers are checked against the schema, and `score --out` writes any answers."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest

from tsbench.tasks.timesage.axes import score_period
from tsbench.tasks.timesage.clauses import REPORT_CHAR_LIMIT, cut
from tsbench.tasks.timesage.contract import FieldSpec
from tsbench.tasks.timesage.judge import CLAIMS_PROMPT, COVERAGE_PROMPT, QUALITY_PROMPT, VERDICTS, VERIFY_PROMPT
from tsbench.tasks.timesage.judge_cache import Asker
from tsbench.tasks.timesage.judge_rules import RulesJudge
from tsbench.tasks.timesage.scoring import score_message

STATUS = ["tight", "balanced", "ample"]
FIELDS = [
    FieldSpec("status", "A1", "label", "What is the stock position?", {"type": "string", "enum": STATUS}),
    FieldSpec("latest_value", "A2", "numeric", "What is the latest stock level?", {"type": "number"}, abs_tol=0.05),
    FieldSpec("run_length", "B4", "numeric", "For how many weeks?", {"type": "integer"}),
    FieldSpec(
        "flagged_periods", "D1", "set", "Which weeks were unusual?", {"type": "array", "items": {"type": "string"}}
    ),
]
TRUTH = {"status": "tight", "latest_value": 1004.0, "run_length": 3, "flagged_periods": []}


def gold() -> dict:
    def kp(field, description, truth, text):
        return {
            "id": f"kp_{field}",
            "field": field,
            "description": description,
            "verify": "?",
            "truth": truth,
            "truth_text": text,
        }

    return {
        "scenario": "cold-storage",
        "period_label": "2026-05-15",
        "period_index": 2,
        "tier": "easy",
        "fields": [vars(f) for f in FIELDS],
        "truth": TRUTH,
        "keypoints": [
            kp("status", "the stock position", "tight", "tight"),
            kp("latest_value", "the latest stock level (million lb)", 1004.0, "1004.0"),
        ],
        "quality": {
            "genre": "bulletin",
            "exemplar": "",
            "required": [
                {"text": "issue period stated", "check": {"kind": "period"}},
                {"text": "stock position stated", "check": {"kind": "any", "words": STATUS}},
            ],
            "forbidden": [],
        },
        "context": ["Row date=2026-05-08, stocks=1045.9", "Row date=2026-05-15, stocks=1004.0"],
        "target_name": "gt_source/2026-05-15.md",
        "prior_docs": ["gt_source/2026-05-08.md"],
    }


def rules(report: str, answer: dict | None = None):
    return score_period(gold(), TRUTH if answer is None else answer, report, Asker(RulesJudge()))


STATED = "Week 2026-05-15: the stock position is tight. The latest stock level is 1004.0 million lb."


def test_a_value_stated_about_its_subject_is_covered():
    assert rules(STATED).keypoints == {"kp_status": 1.0, "kp_latest_value": 1.0}


@pytest.mark.parametrize(
    "report",
    [
        "Possible positions: tight, balanced, ample; values 1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008.",
        "The stock position is tight, balanced or ample.",  # every option about the subject: hedging
        "The stock position is tight. The stock position is balanced. The stock position is ample.",
        "Tight. 1004.0.",  # the values without their subjects
    ],
)
def test_listed_or_unbound_values_earn_no_coverage(report):
    assert rules(report).coverage == 0.0


def test_numberless_prose_is_no_evidence():
    bland = "Conditions remain broadly in line with the wider picture. Analysts continue to watch this market closely."
    assert rules(bland).faithfulness == 0.0  # nothing checkable: 0, never 100
    assert rules(f"It is now 2026-05-15. {bland}").faithfulness == 0.0  # the period the prompt names is no fact
    assert rules(f"{STATED} {bland}").faithfulness == 100.0  # general knowledge counts neither way


def _verdicts(report: str) -> dict[str, str]:
    """clause -> verdict of the (last) claim read from it."""
    return {claim.split(" :: ")[-1]: verdict for claim, verdict in rules(report).verdicts}


def test_a_value_stated_as_current_but_wrong_contradicts_the_keypoint():
    gold_ = gold()
    gold_["prior_truth"] = {"latest_value": 1045.9}  # what the previous week's release stated
    said = "The latest stock level is 1045.9 million lb. It was 1045.9 in the previous week."
    verdicts = {c.split(" :: ")[-1]: v for c, v in score_period(gold_, TRUTH, said, Asker(RulesJudge())).verdicts}
    assert verdicts["The latest stock level is 1045.9 million lb."] == "contradicts_keypoint"
    # restating the previous release, placed there, is true and no claim about this period: neither way
    assert verdicts["It was 1045.9 in the previous week."] == "tier3_general_knowledge"


def test_a_report_is_cut_at_the_bound_before_judging():
    padding = "Analysts continue to watch this market closely. " * (REPORT_CHAR_LIMIT // 40)
    assert len(cut(padding + STATED)) <= REPORT_CHAR_LIMIT
    assert rules(padding + STATED).coverage == 0.0 and rules(STATED + " " + padding).coverage == 100.0


def test_missing_and_mistyped_fields_score_zero_and_are_reported():
    result = rules(STATED, {"status": "TIGHT", "latest_value": "1004", "run_length": 3.0})
    assert result.fields == {"status": 1.0, "latest_value": 0.0, "run_length": 1.0, "flagged_periods": 0.0}
    assert result.schema_problems["flagged_periods"] == "missing"  # a missing list never matches an empty truth
    assert result.schema_problems["latest_value"].startswith("mistyped")
    assert rules(STATED, {**TRUTH, "flagged_periods": None}).fields["flagged_periods"] == 0.0  # null is no list
    assert rules(STATED, TRUTH).accuracy == 100.0 and rules(STATED, TRUTH).schema_problems == {}


def test_an_empty_answer_is_no_answer():
    scored = score_message(gold(), json.dumps({"answer": {}, "report": STATED}), Asker(RulesJudge()))
    assert not scored.valid and "none of the 4 required fields" in scored.error
    assert scored.metrics["accuracy"] == 0.0 and scored.metrics["schema_missing"] == 4.0
    assert scored.parsed["schema_problems"][0] == "status: missing"


def test_the_model_judge_prompts_ask_what_the_paper_asks():
    assert "YES" in COVERAGE_PROMPT and "PARTIAL" in COVERAGE_PROMPT and "{verify}" in COVERAGE_PROMPT
    assert "10" in CLAIMS_PROMPT and '"claims"' in CLAIMS_PROMPT
    assert all(v in VERIFY_PROMPT for v in VERDICTS)
    assert all(k in QUALITY_PROMPT for k in ("required_hits", "required_partial", "forbidden_violations", "{exemplar}"))


def test_score_out_writes_all_empty_answers(tmp_path, monkeypatch, capsys):
    from tsbench.cli import main
    from tsbench.tasks.timesage.generate import generate_from_options
    from tsbench.tasks.timesage.store import read_index

    manifest, _ = generate_from_options({"seed": 2719, "scenarios": 3, "periods": 2}, tmp_path / "set")
    periods = manifest.parent / "periods.parquet"
    answers = tmp_path / "answers.jsonl"
    ids = list(read_index(periods)["id"])
    answers.write_text("".join(json.dumps({"id": i, "response": {"answer": {}, "report": ""}}) + "\n" for i in ids))
    out = tmp_path / "scores.parquet"
    monkeypatch.setattr(
        sys, "argv", ["tsbench", "score", "--data", str(periods), "--responses", str(answers), "--out", str(out)]
    )
    with pytest.raises(SystemExit) as exited:
        main()
    assert (exited.value.code or 0) == 0, capsys.readouterr().err
    frame = pd.read_parquet(out)
    assert len(frame) == len(ids) and not frame["valid"].any() and (frame["parsed_answer"] == "{}").all()


def test_a_judged_cause_is_not_earned_by_naming_every_driver():
    drivers = ["slaughter_idx", "export_idx", "wholesale_usd"]
    fields = [
        FieldSpec("primary_driver", "E2", "label", "Which driver?", {"type": "string", "enum": drivers}),
        FieldSpec("cause", "E1", "judge", "What single cause?", {"type": "string"}),
    ]
    judged = {
        **gold(),
        "fields": [vars(f) for f in fields],
        "truth": {"primary_driver": "export_idx", "cause": "export_idx fell"},
    }

    def cause_score(cause: str) -> float:
        answer = {"primary_driver": "export_idx", "cause": cause}
        return score_period(judged, answer, STATED, Asker(RulesJudge())).fields["cause"]

    assert cause_score("export_idx fell sharply") == 1.0
    assert cause_score("slaughter_idx, export_idx or wholesale_usd rose or fell") == 0.0


def test_a_set_of_three_is_covered_but_every_option_is_a_listing():
    columns = ["beef", "pork", "poultry", "other", "imports", "exports"]
    fields = [
        FieldSpec("flagged_series", "D1", "set", "Which series moved?", {"type": "array", "items": {"enum": columns}})
    ]
    truth = ["beef", "pork", "poultry"]
    keypoint = {
        "id": "kp_flagged_series",
        "field": "flagged_series",
        "description": "which series moved unusually",
        "verify": "?",
        "truth": truth,
        "truth_text": "beef, pork, poultry",
    }
    listed = {
        **gold(),
        "fields": [vars(f) for f in fields],
        "truth": {"flagged_series": truth},
        "keypoints": [keypoint],
    }

    def coverage(report: str) -> float:
        return score_period(listed, {"flagged_series": truth}, report, Asker(RulesJudge())).coverage

    assert coverage("The flagged series this week are beef, pork and poultry.") == 100.0
    assert coverage("The flagged series: beef, pork, poultry, other, imports, exports.") == 0.0


def test_a_wrong_judged_value_about_its_subject_contradicts_and_a_source_list_is_no_fact():
    fields = [FieldSpec("cause", "E1", "judge", "What single cause?", {"type": "string"})]
    keypoint = {
        "id": "kp_cause",
        "field": "cause",
        "description": "the cause",
        "verify": "?",
        "truth": "export_idx fell",
        "truth_text": "export_idx fell",
    }
    judged = {**gold(), "fields": [vars(f) for f in fields], "truth": {"cause": "export_idx fell"}}
    judged["keypoints"] = [keypoint]
    judged["context"] = [
        "Table columns: date = release period label; stocks = stocks (million lb); export_idx = exports (index); "
        "slaughter_idx = slaughter (index)",
        *judged["context"],
    ]

    def verdicts(report: str) -> dict:
        scored = score_period(judged, {"cause": "x"}, report, Asker(RulesJudge()))
        return {claim.split(" :: ")[-1]: verdict for claim, verdict in scored.verdicts}

    assert verdicts("The cause is export_idx fell.")["The cause is export_idx fell."] == "tier1_supported"
    stale = "The cause is slaughter_idx rose."  # not encyclopedic: a wrong value about the keypoint's subject
    assert verdicts(stale)[stale] == "contradicts_keypoint"
    cited = "Evidence: timeseries.csv and the prior release gt_source/2026-05-08.md."
    assert verdicts(cited) == {}  # a list of sources states no value: no claim, neither way
    said = "The previous release (gt_source/2026-05-08.md) said ample."
    status = {**gold(), "prior_truth": {"status": "tight"}}  # the previous release said tight, not ample
    assert [v for _, v in score_period(status, TRUTH, said, Asker(RulesJudge())).verdicts] == ["speculation"]


def test_an_outlook_signal_needs_a_direction_beside_its_confidence():
    rubric = {"genre": "note", "exemplar": "", "forbidden": []}
    rubric["required"] = [{"text": "outlook with its confidence", "check": {"kind": "percent"}}]
    hard = {**gold(), "tier": "hard", "quality": rubric}

    def placed(report: str) -> tuple[list, list]:
        lists = score_period(hard, TRUTH, f"{STATED} {report}", Asker(RulesJudge())).quality_lists
        return lists["hits"], lists["partial"]

    signal = ["outlook with its confidence"]
    assert placed("The outlook is up, held with 70 % confidence.") == (signal, [])
    assert placed("The outlook carries uncertainty (60 % confidence).") == ([], signal)
    assert placed("The outlook is uncertain.") == ([], [])


def test_writing_counts_only_with_substance():
    """Quality is judged on a report that states the period's keypoints: the rubric's score times the
    share stated right (corrected for guessing); well-formed writing that states nothing scores 0."""
    form = "Week 2026-05-15 note (timeseries.csv): the stock position is {}. The latest stock level is {} million lb."
    right, wrong = rules(form.format("tight", "1004.0")), rules(form.format("ample", "1201.5"))
    assert right.quality_lists["hits"] == wrong.quality_lists["hits"]  # the same writing ...
    assert right.quality == 100.0 and wrong.quality == 0.0  # ... credited by what it states
    assert rules("Week 2026-05-15: conditions are as usual, see timeseries.csv.").quality == 0.0


def _named_gold() -> dict:
    """The gold with the scenario's table layout, so its names (series, unit) are known."""
    named = gold()
    named["context"] = ["Table columns: date = release period label; stocks = cold-storage stocks (million lb)"]
    named["context"] += ["Row date=2026-05-08, stocks=1045.9", "Row date=2026-05-15, stocks=1004.0"]
    run = {"id": "kp_run_length", "field": "run_length", "description": "how many weeks", "verify": "?"}
    named["keypoints"] = [*named["keypoints"], {**run, "truth": 3, "truth_text": "3"}]
    return named


@pytest.mark.parametrize(
    ("report", "stated"),
    [
        ("The headline reading came in at 1004.0 million lb.", ["kp_latest_value"]),
        ("Stocks stood at 1004.0 million lb this week.", ["kp_latest_value"]),
        ("At 1004 million lb, the level is the lowest in months.", ["kp_latest_value"]),
        # a label only the status takes names it unnamed, beside the reading it is read from
        ("Stocks stood at 1004.0 million lb; supply is tight.", ["kp_status", "kp_latest_value"]),
        ("Supply is tight.", []),  # a state without its reading: a guess, as far as a reader can tell
    ],
)
def test_natural_prose_about_the_right_subject_states_it(report, stated):
    keypoints = score_period(_named_gold(), TRUTH, report, Asker(RulesJudge())).keypoints
    assert [k for k, v in keypoints.items() if v == 1.0] == stated, keypoints


@pytest.mark.parametrize(
    ("report", "why"),
    [
        ("The latest stock level is 1004.0 or 1045.9 million lb.", "two numbers about one subject: a hedge"),
        ("Stocks came in at 1004.0 million lb. Stocks came in at 1010.0 million lb.", "a hedge across sentences"),
        ("Stocks stood at 1045.9 million lb in the previous week.", "the previous week's figure, placed there"),
        ("Row date=2026-05-08, stocks=1045.9.", "an earlier row restated"),
        ("Stocks will reach 1004.0 million lb next week.", "a forecast is not this week's figure"),
    ],
)
def test_a_value_about_another_time_or_among_others_states_nothing(report, why):
    assert score_period(_named_gold(), TRUTH, report, Asker(RulesJudge())).keypoints["kp_latest_value"] == 0.0, why


def test_a_number_states_a_value_only_about_its_own_subject():
    """3 is the run's length in "the run has lasted 3 weeks", never the stock level beside it."""
    said = "Stocks stood at 1004.0 million lb, and the run below the threshold has lasted 3 weeks."
    keypoints = score_period(_named_gold(), TRUTH, said, Asker(RulesJudge())).keypoints
    assert keypoints["kp_latest_value"] == 1.0 and keypoints["kp_run_length"] == 1.0
    swapped = "Stocks stood at 3 million lb, and the run has lasted 1004 weeks."
    keypoints = score_period(_named_gold(), TRUTH, swapped, Asker(RulesJudge())).keypoints
    assert keypoints["kp_latest_value"] == 0.0 and keypoints["kp_run_length"] == 0.0
