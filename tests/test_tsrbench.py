"""TSRBench: the official scorer's golden vectors, TimeClaw's sampling and parser, and the reader on
files written here in the published layouts (both sets of file names)."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tsbench.core.errors import UserError
from tsbench.tasks import get_taskset
from tsbench.tasks.base import SampleRef
from tsbench.tasks.timeclaw_protocol import mc_letter, split_train_test, subsample
from tsbench.tasks.tsrbench import official
from tsbench.tasks.tsrbench import reader as tsr
from tsbench.tasks.tsrbench import taskset as tsr_taskset

GOLDEN = Path(__file__).parent / "golden"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_evaluate_mcq_reproduces_every_official_vector():
    rows = _lines(GOLDEN / "tsrbench" / "evaluate_mcq.jsonl")
    assert len(rows) > 3000 and {r["direct"] for r in rows} == {None, 0.0, 1.0}
    mismatches = [
        (kind, r["label"], r["reply"][:60], r[kind], got)
        for r in rows
        for kind, reply in (("direct", r["reply"]), ("text_inference", official.strip_fences(r["reply"])))
        if (got := official.evaluate_mcq(r["label"], reply)) != r[kind]
    ]
    assert mismatches == []


def test_literals_combined_by_operators_score_as_the_official_eval():
    """6,000 replies (hand-written and fuzzed) of constants under every operator: % / // ** | << + * ..."""
    text = lzma.decompress((GOLDEN / "tsrbench" / "operators.jsonl.xz").read_bytes()).decode()
    rows = [json.loads(line) for line in text.splitlines()]
    assert len(rows) == 6000 and sum(r["direct"] == 1.0 for r in rows) > 250
    assert [r for r in rows if official.evaluate_mcq(r["label"], r["reply"]) != r["direct"]] == []
    assert official.evaluate_mcq("A", "{'answer': '%s' % 'A'}") == 1.0


def test_replies_that_are_code_are_not_run():
    """eval() runs these; the parser calls them unreadable (the documented difference)."""
    rows = _lines(GOLDEN / "tsrbench" / "runs_code.jsonl")
    assert len(rows) >= 15
    for row in rows:
        assert official.evaluate_mcq(row["label"], row["reply"]) is None


def test_values_eval_would_build_without_bound_are_refused_before_they_are_built():
    """`'a' * 10**9`, `2 ** 10**9`, a width of 10**12: refused (a computed one would stall this test)."""
    for row in _lines(GOLDEN / "tsrbench" / "too_large.jsonl"):
        with pytest.raises(official.TooLarge):
            official.python_literal(row["reply"])
        assert official.evaluate_mcq(row["label"], row["reply"]) is None
    assert official.evaluate_mcq("A", "{'answer': 'A', 'pad': 'a' * 10 ** 6}") == 1.0  # under the bound: read


def test_timeclaw_letter_parser_and_split_reproduce_timeclaw():
    rows = _lines(GOLDEN / "timeclaw" / "parse_mc_letter.jsonl")
    assert [r for r in rows if mc_letter(r["reply"], r["n_options"]) != r["letter"]] == []
    for case in json.loads((GOLDEN / "timeclaw" / "timeclaw_split.json").read_text()):
        records = [(g, i) for g, n in case["groups"].items() for i in range(n)]
        sample = subsample(records, lambda r: r[0], case["ratio"], case["seed"])
        train, test = split_train_test(sample, lambda r: r[0], case["train_ratio"], case["split_seed"])
        for name, chosen in (("sampled", sample), ("train", train), ("test", test)):
            assert {g: [i for h, i in chosen if h == g] for g in case["groups"]} == case[name], (case["case"], name)
    paper = json.loads((GOLDEN / "timeclaw" / "timeclaw_split.json").read_text())[0]
    assert sum(map(len, paper["sampled"].values())) == 825  # Table 8


# ------------------------------------------------------------------------------------- the reader --

FILES = {  # evaluator names for three files, the release's names for the rest
    "perception/perception.jsonl": ["Pattern Recognition", "Noise Understanding", "Anolmaly Detection",
                                    "Similarity Analysis", None],
    "prediction/event_forecast/event_forecast.jsonl": [None],
    "prediction/time_series_forecasting.jsonl": [None],
    "decision/pattern_decision/pattern_decision.jsonl": [None],
    "decision/quantitative_decision.jsonl": [None],
    "reasoning/abductive_reasoning/abductive_reasoning.jsonl": [None],
    "reasoning/causal_reasoning.jsonl": [None],
    "reasoning/deductive_reasoning.jsonl": [None],
    "reasoning/etiological_reasoning.jsonl": [None],
    "reasoning/inductive_reasoning.jsonl": [None],
    "reasoning/math_reasoning/math_reasoning.jsonl": [None],
    "reasoning/temporal_relation_reasoning.jsonl": [None],
}  # fmt: skip


def tsr_record(file: str, category: str | None, index: int) -> dict:
    rng = np.random.default_rng(index)
    record = {
        "question": f"Which pattern does the series show? ({index})",
        "choices": ["rising trend", "falling trend", "no trend"],
        "answer": "B" if index % 2 else "A",
        "domain": "Energy",
        "type": "MCQ",
        "name_of_series": ["load", "price"],
        "timeseries": rng.normal(size=(2, 30)).round(3).tolist(),
    }
    if category is not None:
        record["category"] = category
    if "temporal_relation" in file:
        stamps = [str(t) for t in pd.date_range("2024-01-01", periods=30, freq="D")]
        record["timeseries"] = [stamps, record["timeseries"][0]]
        record["name_of_series"] = ["load"]
    if "pattern_decision" in file:
        record["choices"] = {"B": "sell", "A": "buy", "C": "hold"}
    if "abductive" in file:
        nested = {k: record.pop(k) for k in ("question", "choices", "answer")}
        record["multiple_choice_question"] = nested
        record.pop("timeseries")
        record["numerical_time_series"] = {
            "wp_Team A": {"history": [0.5, 0.6, 0.7], "future": [0.2, 0.1]},
            "wp_Team B": {"history": [0.5, 0.4, 0.3], "future": [0.8, 0.9]},
        }
        record["context"] = {
            "history_events": ["tip-off", "A scores", "A scores"],
            "history_times": ["1:00", "2:00", "3:00"],
            "future_events": ["B leads", "B wins"],
            "future_times": ["5:00", "6:00"],
        }
    return record


@pytest.fixture(scope="module")
def tsrbench_release(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tsrbench")
    for file, categories in FILES.items():
        path = root / file
        path.parent.mkdir(parents=True, exist_ok=True)
        records = [tsr_record(file, c, i) for c in categories for i in range(10)]
        path.write_text("\n".join(json.dumps(r) for r in records) + "\n\n")
    return root


def test_reader_uses_category_both_file_names_dict_choices_and_abductive_context(tsrbench_release):
    items, skipped = tsr.read_items(tsrbench_release)
    assert skipped == {} and len(items) == 10 * 16
    assert {i.subtask for i in items} == set(tsr.SUBTASKS) and len(tsr.SUBTASKS) == 16
    perception = [i for i in items if i.group == "perception"]
    assert sum(i.subtask == "anomaly_detection" for i in perception) == 10  # "Anolmaly Detection"
    assert sum(i.subtask == tsr.UNCATEGORISED for i in perception) == 10  # no category: no subtask, as official
    assert sum(i.subtask == "pattern_recognition" for i in perception) == 10
    assert {i.group for i in items if i.subtask == "numerical_reasoning"} == {"numerical_reasoning"}
    decision = next(i for i in items if i.subtask == "qualitative_decision")
    assert decision.choices == ["buy", "sell", "hold"] and decision.letters == ["A", "B", "C"]
    abductive = next(i for i in items if i.subtask == "abductive_reasoning")
    assert abductive.channel_names == ["wp_Team A", "wp_Team B"] and abductive.values.shape == (2, 5)
    assert abductive.history_length == 3 and abductive.context["future_events"] == ["B leads", "B wins"]
    assert abductive.times == ["1:00", "2:00", "3:00", "5:00", "6:00"]


def test_generate_samples_as_timeclaw_and_scores_as_official(tsrbench_release, tmp_path):
    family = get_taskset("tsrbench")
    manifest, _ = family.generate({"path": str(tsrbench_release), "seed": 42}, tmp_path)
    config = json.loads(manifest.read_text())["splits"]["test"]["config"]
    assert config["ratio"] == 0.2 and config["records"] == 160
    files = [manifest.parent / "train.parquet", manifest.parent / "test.parquet"]
    rows = family.index(files, {})
    assert len(rows) == 10 + 11 * 2  # ceil(0.2 x 50) of perception, ceil(0.2 x 10) = 2 of each other file
    test = family.index([files[1]], {})
    abductive = test[test["category"] == "abductive_reasoning"].iloc[0]
    sample = family.load(SampleRef("tsrbench", str(files[1]), str(abductive["id"])))
    assert "Past Events (History):\n- 1:00: tip-off" in sample.task.question
    assert "[A CRITICAL EVENT HAPPENED HERE]" in sample.task.question
    gold = sample.gold
    letter = gold["answer"]
    for reply, score, valid in [
        (json.dumps({"answer": f"({letter})"}), 1.0, True),
        (f"```json\n{{'answer': '**{letter.lower()}**'}}\n```", 1.0, True),
        ('{"answer": "Z"}', 0.0, True),
        (f"The answer is {letter}", 0.0, False),  # official: unreadable, left out of its accuracy
        (f'{{"answer": "{letter}", "sure": true}}', 0.0, False),  # `true` is not Python
    ]:
        scored = family.score("abductive_reasoning", gold, reply)
        assert (scored.score, scored.valid) == (score, valid), reply
        assert scored.metrics["official_accuracy"] == (score if valid else None)
    assert family.score("x", gold, f"The answer is {letter}").metrics["timeclaw_accuracy"] == 1.0
    assert {c.mean_metric for c in family.columns()} == {"official_accuracy"}


def _write(root: Path, name: str, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text)
    return root


def test_unknown_files_duplicate_subtasks_and_bad_lines_are_one_line(tmp_path):
    good = json.dumps(tsr_record("reasoning/causal_reasoning.jsonl", None, 1))
    cases = {
        "notes.jsonl": (good, "not a TSRBench subtask file"),
        "causal_reasoning.jsonl": (good + "\n{oops\n", "causal_reasoning.jsonl:2 is not a JSON line"),
    }
    for name, (text, message) in cases.items():
        with pytest.raises(UserError, match=message):
            tsr.read_items(_write(tmp_path / name, name, text))
    both = _write(tmp_path / "both", "math_reasoning.jsonl", good)
    _write(both, "numerical_reasoning.jsonl", good)
    with pytest.raises(UserError, match="both hold numerical_reasoning"):
        tsr.read_items(both)


def test_a_deeply_nested_line_is_one_line_through_the_command_line(tmp_path, cli):
    root = _write(tmp_path / "deep", "causal_reasoning.jsonl", '{"question": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    code, _, err = cli("generate", "--family", "tsrbench", "--path", str(root), "--out", str(tmp_path / "out"))
    assert code == 2 and err.strip().count("\n") == 0 and "nested too deeply" in err and "Traceback" not in err


def test_results_json_gives_the_official_accuracy_beside_the_row_score():
    from tsbench.eval.task_results import task_results

    family = get_taskset("tsrbench")
    gold = {"answer": "B", "label": "B", "choices": ["x", "y"], "letters": ["A", "B"], "timeclaw_options": 2}
    replies = ['{"answer": "B"}', '{"answer": "A"}', "B, surely", '{"answer": "(b)"}']
    scored = [family.score("causal_reasoning", gold, r) for r in replies]
    samples = pd.DataFrame(
        {
            "category": "causal_reasoning",
            "score": [s.score for s in scored],
            "error_type": None,
            "metrics": [s.metrics for s in scored],
            "gold": json.dumps(gold),
            "parsed_answer": None,
        }
    )
    cell = task_results(samples, "tsrbench", family.columns())["tsrbench/causal_reasoning"]
    assert cell["primary"] == "official_accuracy" and cell["official_accuracy"] == pytest.approx(2 / 3)
    assert cell["official_accuracy_n"] == 3 and cell["n"] == 4 and cell["score"] == 0.5


def test_timeclaw_option_count_and_accuracy_reproduce_timeclaw(tmp_path):
    """`choices` as a list, a JSON string of one (decoded, as TimeClaw does), a dict, broken JSON, a number,
    missing, nested (abductive): the letters TimeClaw allows and its accuracy on each record."""
    golden = json.loads(lzma.decompress((GOLDEN / "timeclaw" / "tsrbench_options.json.xz").read_bytes()))
    for relative, lines in golden["files"].items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("\n".join(lines) + "\n")
    items, _ = tsr.read_items(tmp_path)
    by_line = {(item.group, int(item.key.rsplit("-", 1)[1])): item for item in items}
    checked = 0
    for vector in golden["records"]:
        item = by_line.get((vector["subtask"], vector["line"]))
        if item is None:  # tsbench cannot list this record's options: not an item
            continue
        assert item.timeclaw_options == vector["n_opts"], vector
        gold = tsr_taskset.to_row(item, "test", 0).gold
        for case in vector["replies"]:
            scored = tsr_taskset.score_reply(gold, case["reply"])
            assert scored.metrics["timeclaw_accuracy"] == float(case["correct"]), (vector, case)
        checked += 1
    assert checked > 150 and {v["n_opts"] for v in golden["records"]} >= {0, 1, 2, 5, 7}
