"""tsbench against TimeMaster's public reward code (langfengQ/TimeMaster) on the golden vectors in
tests/golden/timemaster/ (replies, golds and scripted judge replies as inputs; what the official modules
returned; how they were made: the README there). Every vector is reproduced exactly, floats within 1e-9
relative, by the reward, by TimerBed's scorer and by the training reward functions: one reading of a
reply everywhere."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from composite_reward import reward
from tsbench.core.class_tags import named_option
from tsbench.tasks import get_taskset
from tsbench.tasks.timerbed.labels import TASKS
from tsbench.tasks.timerbed.prompts import question_text
from tsbench.train import rewards as rw
from tsbench.train import timemaster_reward as tm
from tsbench.train.config import RewardConfig

GOLDEN = Path(__file__).parent / "golden" / "timemaster"
HARD = json.loads((GOLDEN / "reward_hard.json").read_text())
SOFT = json.loads((GOLDEN / "reward_soft.json").read_text())
JUDGE = json.loads((GOLDEN / "judge_reply.json").read_text())
EMG = list(TASKS["emg"].classes)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0) or a == b


def options_of(module: str) -> list[str]:
    return list(TASKS[module].classes)


def scripted(replies: list[str], calls: list[int]):
    """The judge's replies in order; '<ERROR>' is a failed call (as the official run scripted it)."""
    queue = list(replies)

    def ask() -> str:
        calls[0] += 1
        if not queue:
            raise RuntimeError("no reply left")
        reply = queue.pop(0)
        if reply == "<ERROR>":
            raise RuntimeError("connection reset by peer")
        return reply

    return ask


def test_the_six_task_modules_name_the_classes_timerbed_names():
    for module, labels in HARD["labels"].items():
        assert [c.lower() for c in options_of(module)] == [label.lower() for label in labels]


def test_hard_and_format_reward_of_every_task_module():
    compared, mismatches, refused = 0, [], 0
    for case in HARD["cases"]:
        module, options = case["module"], options_of(case["module"])
        w_fmt, w_hard = HARD["weights_format_hard"][module]
        settings = tm.TimeMasterReward(format_weight=w_fmt, hard_weight=w_hard)
        if named_option(case["gold"], options) is None:  # a gold outside the classes: no class to match
            assert reward(case["text"], case["gold"], options, settings=settings)["hard"] == 0.0
            refused += 1
            continue
        got = reward(case["text"], case["gold"], options, settings=settings)
        labels = HARD["labels"][module]
        predicted = labels[case["pred_id"]].lower() if case["fmt"] else None  # the modules fake an id otherwise
        compared += 1
        if (
            got["format"] != case["fmt"]
            or got["hard"] != case["acc"]
            or not close(got["total"], case["reward"])
            or (got["predicted"] or "").lower() != (predicted or "")
        ):
            mismatches.append((case, got))
    print(f"task modules: {compared} vectors compared, {len(mismatches)} mismatches, {refused} golds refused")
    assert not mismatches, mismatches[:3]
    assert compared > 1200 and refused < 80


@pytest.mark.parametrize("module", sorted(HARD["labels"]))
def test_timerbed_scorer_and_the_training_reward_read_replies_as_the_task_module(module):
    """TimerBed's eval score is the module's acc, its validity the module's format; the TRL reward
    functions of a composite run give the module's format, acc and weighted total."""
    timerbed, options = get_taskset("timerbed"), options_of(module)
    cases = [c for c in HARD["cases"] if c["module"] == module and named_option(c["gold"], options)]
    golds = [{"answer": named_option(c["gold"], options), "options": options} for c in cases]
    for case, gold in zip(cases, golds):
        scored = timerbed.score(module, gold, case["text"])
        assert (scored.score, scored.valid) == (case["acc"], bool(case["fmt"])), case
    w_fmt, w_hard = HARD["weights_format_hard"][module]
    config = RewardConfig(reward="composite", format_weight=w_fmt, hard_weight=w_hard)
    functions, weights = rw.reward_functions(config, timerbed)
    columns = {
        "final_message": [c["text"] for c in cases],
        "category": [module] * len(cases),
        "gold": [json.dumps(g) for g in golds],
        "score": [0.0] * len(cases),
        "judge_score": [None] * len(cases),
    }
    fmt, hard, soft = (fn(prompts=["k"] * len(cases), completions=None, **columns) for fn in functions)
    assert fmt == [c["fmt"] for c in cases] and hard == [c["acc"] for c in cases] and set(soft) <= {0.0}
    totals = rw.weighted_total(functions, weights, ["k"] * len(cases), columns)
    assert all(close(t, c["reward"]) for t, c in zip(totals, cases))


def test_soft_reward_module_with_its_judge():
    settings = tm.TimeMasterReward(soft_weight=0.5)  # emg_soft.py: 0.9 acc + 0.1 fmt + 0.5 soft
    compared, judged, mismatches = 0, 0, []
    for case in SOFT["cases"]:
        if named_option(case["gold"], EMG) is None:
            assert reward(case["text"], case["gold"], EMG, settings=settings)["hard"] == 0.0
            continue
        reading = tm.read(case["text"], lambda text: named_option(text, EMG), settings)
        hard = tm.hard_reward(reading, named_option(case["gold"], EMG))
        calls, soft = [0], None
        if tm.wants_judge(reading, hard):
            prompt = tm.judge_prompt(reading.tagged, "emg", settings)
            assert hashlib.sha256(prompt.encode()).hexdigest() == case["prompt_sha256"], case
            assert prompt == case.get("prompt", prompt) and case["temperature"] == settings.judge_temperature
            soft = tm.judged_score(scripted(case["replies"], calls), reading.tagged.extension, settings)
            judged += 1
        total = reward(case["text"], case["gold"], EMG, soft=soft, settings=settings)["total"]
        compared += 1
        if reading.format != case["fmt"] or calls[0] != case["calls"] or not close(total, case["reward"]):
            mismatches.append((case, reading, calls[0], total))
    print(f"soft module: {compared} vectors compared ({judged} judged), {len(mismatches)} mismatches")
    assert not mismatches, mismatches[:3]
    assert judged > 100 and sum("prompt" in c for c in SOFT["cases"]) >= 10


def test_judge_replies_read_as_float_of_the_reply():
    mismatches = []
    for case in JUDGE["cases"]:
        calls = [0]
        score = tm.judged_score(scripted(case["replies"], calls), case["extension"])
        if not close(score, case["score"]) or calls[0] != case["calls"]:
            mismatches.append((case, score, calls[0]))
    print(f"judge replies: {len(JUDGE['cases'])} vectors compared, {len(mismatches)} mismatches")
    assert not mismatches, mismatches[:3]


def test_the_ctu_prompt_is_the_public_data_scripts():
    public = json.loads((GOLDEN / "ctu_prompt.json").read_text())
    ours = question_text("ctu", ["electricity"], 720, options_of("ctu"))
    assert public["prompt"] == "<image> " + ours  # `<image> `: the public trainer's image placeholder
    assert public["answer"] in options_of("ctu")


def test_the_papers_reading_is_a_named_option():
    paper = tm.TimeMasterReward(format_rule="paper")
    inside = "<think>x <class>Desktop</class></think><class>Laptop</class>"
    assert reward(inside, "Desktop", ["Desktop", "Laptop"])["format"] == 1.0  # public: <think> unchecked
    assert reward(inside, "Desktop", ["Desktop", "Laptop"], settings=paper)["format"] == 0.0  # nested
    bare = "<class>Desktop</class>"
    assert reward(bare, "desktop", ["Desktop", "Laptop"])["total"] == pytest.approx(1.0)
    assert reward(bare, "desktop", ["Desktop", "Laptop"], settings=paper)["total"] == pytest.approx(0.9)
    with pytest.raises(ValueError, match="format_rule"):
        tm.TimeMasterReward(format_rule="strict")
    assert RewardConfig(reward="composite", format_rule="strict").problems() == [
        "format_rule (--format-rule) must be one of public, paper, got 'strict'"
    ]
    assert rw.composite_settings(RewardConfig(reward="composite", format_rule="paper")).format_rule == "paper"
