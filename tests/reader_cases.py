"""Every reader of model (or server) output, called as scoring calls it, and the inputs that broke
readers before: shared by tests/test_reader_fuzz.py and scripts/reader_timings.py (before/after).

A reader here is `f(text) -> anything`: it must never raise and its cost must grow linearly."""

from __future__ import annotations

import json

CHANNELS = [f"ch_{i:02d}" for i in range(4)]
_AXL = {
    "localize": {"present": True, "start": 100, "end": 180, "_L": 16384},
    "classify_with_evidence": {"kind": "Change in Variance", "start": 40, "end": 100, "_L": 32768},
    "localize_all_channels": {
        "anomalies": [{"channel": "ch_02", "start": 100, "end": 200}],
        "channels": CHANNELS,
        "_L": 32768,
    },
    "lead_lag_with_magnitude": {"direction": "lag", "lag_samples": 777, "_L": 32768},
    "presence": {"answer": "No", "options": ["Yes", "No"]},
}
_CIK_GOLD = {"target": [1.0, 2.0, 3.0], "scaling": 1.0, "answer_format": "quantiles"}


def _timesage_gold() -> dict:
    from tsbench.tasks.timesage.contract import FieldSpec

    status = ["tight", "balanced", "ample"]
    fields = [
        FieldSpec("status", "A1", "label", "What is the stock position?", {"type": "string", "enum": status}),
        FieldSpec("latest_value", "A2", "numeric", "What is the level?", {"type": "number"}, abs_tol=0.05),
    ]
    kp = {"id": "kp_status", "field": "status", "description": "the position", "verify": "?"}
    return {
        "scenario": "cold-storage",
        "period_label": "2026-05-15",
        "period_index": 2,
        "tier": "easy",
        "fields": [vars(f) for f in fields],
        "truth": {"status": "tight", "latest_value": 1004.0},
        "keypoints": [{**kp, "truth": "tight", "truth_text": "tight"}],
        "quality": {
            "genre": "bulletin",
            "exemplar": "",
            "required": [
                {"text": "issue period stated", "check": {"kind": "period"}},
                {"text": "stock position stated", "check": {"kind": "any", "words": status}},
            ],
            "forbidden": [],
        },
        "context": ["Row date=2026-05-08, stocks=1045.9", "Row date=2026-05-15, stocks=1004.0"],
        "target_name": "gt_source/2026-05-15.md",
        "prior_docs": ["gt_source/2026-05-08.md"],
    }


def readers() -> dict:
    """name -> f(text), imported lazily (one module's import error fails its own case only)."""
    from tsbench.core import json_input, sanitize
    from tsbench.core.answers import extract_choice, last_json_object
    from tsbench.core.class_tags import first_named, first_span, named_option
    from tsbench.core.text import json_object_spans, strip_reasoning
    from tsbench.harness.rlm import extract_code
    from tsbench.harness.tool_protocol import parse_json_calls
    from tsbench.tasks.anomalyxl.taskset import AnomalyXL
    from tsbench.tasks.arfbench.taskset import ARFBench
    from tsbench.tasks.cik.answer import read_reply
    from tsbench.tasks.cik.taskset import score_forecast
    from tsbench.tasks.recordings import classify
    from tsbench.tasks.timeclaw_protocol import mc_letter
    from tsbench.tasks.timerbed.taskset import chosen_class
    from tsbench.tasks.trend.taskset import named_class
    from tsbench.tasks.tsaia.taskset import score_mc
    from tsbench.tasks.tsrbench.taskset import score_reply
    from tsbench.train import timemaster_reward as tm
    from tsbench.train.sft_timemaster import is_trace

    axl = AnomalyXL()
    arf_gold = {"options": ["A", "B"], "option": "A", "answer": "spike"}
    found = {
        "strip_reasoning": strip_reasoning,
        "json_object_spans": json_object_spans,
        "last_json_object": last_json_object,
        "extract_choice": extract_choice,
        "json_input.loads": lambda t: _quiet(json_input.loads, t),
        "terminal_text": sanitize.terminal_text,
        "markdown_text": sanitize.markdown_text,
        "csv_cell": sanitize.csv_cell,
        "cik.read_reply(timeclaw)": lambda t: read_reply(t, 3),
        "cik.read_reply(timeclaw-repo)": lambda t: read_reply(t, 3, parser="timeclaw-repo"),
        "cik.read_reply(strict)": lambda t: read_reply(t, 3, parser="strict"),
        "cik.score(samples)": lambda t: score_forecast({**_CIK_GOLD, "answer_format": "samples"}, t),
        "mc_letter": lambda t: mc_letter(t, 4),
        "tsaia.score_mc": lambda t: score_mc({"kind": "mc", "answer": "A"}, t),
        "tsrbench.score": lambda t: score_reply({"label": "A", "answer": "A"}, t),
        "timerbed.chosen_class": lambda t: chosen_class(t, ["Walking", "Sitting"]),
        "trend.named_class": named_class,
        "arfbench.score": lambda t: ARFBench().score("x", arf_gold, t),
        "recordings.classify": lambda t: classify.score({"answer": "spike", "start": 1, "end": 5}, t),
        "class_tags.first_span": first_span,
        "class_tags.first_named": lambda t: first_named(t, lambda s: named_option(s, ["up", "down"])),
        "timemaster.read(paper)": lambda t: tm.read(t, lambda s: named_option(s, ["up"]), tm.DEFAULT),
        "rlm.extract_code": extract_code,
        "tool_protocol.parse_json_calls": lambda t: parse_json_calls(t, ["lookup"]),
        "timeclaw.rationale_block": _rationale_block,
        "timesage.score": _timesage_score,
        "timesage.parse_message": _timesage_message,
        "timesage.judge_reply": _judge_reply,
        "sft_timemaster.is_trace": is_trace,
    }
    for category, gold in _AXL.items():
        found[f"anomalyxl.{category}"] = lambda t, c=category, g=gold: axl.score(c, g, t)
    return found


def _quiet(parse, text):
    try:
        return parse(text)
    except ValueError:  # json_input.loads' contract: malformed (or too deep) is a ValueError
        return None


def _rationale_block(text: str):
    from tsbench.timeclaw import build

    found = build._BLOCK.search(text) if hasattr(build, "_BLOCK") else None
    return build.rationale_text(text) if hasattr(build, "rationale_text") else (found.group(1) if found else text)


def _timesage_score(text: str):
    from tsbench.tasks.timesage.judge_cache import Asker
    from tsbench.tasks.timesage.judge_rules import RulesJudge
    from tsbench.tasks.timesage.scoring import score_message

    return score_message(_timesage_gold(), json.dumps({"answer": {}, "report": text}), Asker(RulesJudge()))


def _timesage_message(text: str):
    from tsbench.tasks.timesage.scoring import parse_message

    return parse_message(text)  # the final message as the agent wrote it, not wrapped in valid JSON


def _judge_reply(text: str):
    from tsbench.tasks.timesage.judge import parse_quality, parse_verdict

    return parse_verdict(text), parse_quality(text, ["issue period stated"], [])


# Inputs that cost a reader superlinear time or an exception before: name -> f(n) of about n chars.
ATTACKS = {
    "open_brackets": lambda n: "[" * n,
    "open_braces": lambda n: "{" * n,
    "open_objects": lambda n: '{"a":' * (n // 5),
    "deep_closed": lambda n: "[" * (n // 2) + "]" * (n // 2),
    "unclosed_json_fences": lambda n: "```json\n{" * (n // 9),
    "unclosed_list_fences": lambda n: "```\n[1, 2, " * (n // 11),
    "fences_only": lambda n: "```" * (n // 3),
    "unclosed_code_fences": lambda n: "```python\nx\n" * (n // 12),
    "open_think": lambda n: "<think>" * (n // 7),
    "close_think": lambda n: "</think>x" * (n // 9),
    "open_class": lambda n: "<class>" * (n // 7) + "</class>",
    "unclosed_class": lambda n: "<class>" * (n // 7),
    "think_class_pairs": lambda n: "<think>x" + "</think><class>y" * (n // 16) + "z",
    "open_tool_calls": lambda n: "<tool_call>" * (n // 11),
    "tool_calls_open_list": lambda n: "<tool_call>[1," * (n // 14),
    "open_rationale": lambda n: "<context_to_action>" * (n // 19),
    "answer_spaces": lambda n: "answer" + " " * n + "1",
    "final_answer_spaces": lambda n: "final" + " " * n + "answer" + " " * n,
    "number_run": lambda n: "1" * n + "a1",
    "digits_only": lambda n: "1" * n,  # one JSON int past Python's 4,300-digit limit: a ValueError to json.loads
    "number_commas": lambda n: "1," * (n // 2) + "x1",
    "bare_list_open": lambda n: "[1," * (n // 3),
    "quotes": lambda n: '"' * n,
    "backslashes": lambda n: "\\" * n,
    "open_string": lambda n: '{"answer": "' + "a\\" * (n // 2),
    "answer_lines": lambda n: "answer:\n" * (n // 8),
    "escape_runs": lambda n: "\x1b[" + "0;" * (n // 2),
    "osc_open": lambda n: "\x1b]" * (n // 2),
    "nul_and_surrogates": lambda n: "\x00\ud800\udfff" * (n // 3),
    "words_and_numbers": lambda n: "the index rose by 1.5 from 2024-01 " * (n // 35),
}
