"""The file agent in real kernels: sequential state and compaction, the skill library's
next-period registration and light check, and a period that never calls final_answer."""

from __future__ import annotations

import json
import time

import pytest

from tsbench.core.episode import EpisodeTask
from tsbench.harness.file_agent import FileAgentSettings, run_chain, run_file_agent
from tsbench.harness.file_agent_prompts import SKILLS_EMPTY
from tsbench.models.base import Completion
from tsbench.tasks.timesage.prompt import period_meta, period_question
from tsbench.tasks.timesage.sources.synthetic import materialize, plan_set


@pytest.fixture(scope="module")
def tasks() -> list[EpisodeTask]:
    scenario, periods = materialize(plan_set(42, 1, 3)[0])  # an easy scenario, three periods
    return [
        EpisodeTask(
            row_id=p.id,
            category=scenario.tier,
            regime=scenario.tier,
            question=period_question(scenario, p),
            files=p.files,
            meta=period_meta(scenario, p),
        )
        for p in periods
    ]


def code(*lines: str) -> str:
    return "```python\n" + "\n".join(lines) + "\n```"


FINISH = code("final_answer(answer={'status': 'ample', 'latest_value': 1.0, 'summary': 's'}, report='r')")


class ScriptPolicy:
    """A chat policy replying from `script(period, step, messages, meta)`; records every call."""

    harnesses = ("file-agent",)
    name = "test/script"

    def __init__(self, script, input_tokens: int = 0):
        self.script = script
        self.input_tokens = input_tokens
        self.calls: list[dict] = []

    def generate(self, messages, *, max_tokens=None, temperature=None, task=None) -> Completion:
        meta = task.meta
        period = meta.get("period_index")
        step = 1 + sum(1 for c in self.calls if c["period"] == period and c["phase"] == "period")
        self.calls.append(
            {
                "period": period,
                "phase": meta.get("phase"),
                "step": step,
                "messages": [(m.role, m.content) for m in messages],
                "skills": list(meta.get("skills", [])),
            }
        )
        text = "SUMMARY-XYZ of the past periods" if meta.get("phase") == "compaction" else self.script(period, step)
        return Completion(text=text, input_tokens=self.input_tokens, output_tokens=5)

    def close(self) -> None:
        pass


def first_call(policy: ScriptPolicy, period: int) -> dict:
    return next(c for c in policy.calls if c["period"] == period and c["phase"] == "period")


def test_sequential_mode_carries_state_and_compaction_replaces_it(tasks):
    def script(period, step):
        if period == 2:
            return code(
                "request_memory_compaction(reason='bloated')",
                "final_answer(answer={'status': 'ample'}, report='PERIOD-TWO-REPORT')",
            )
        return "Finishing now.\n" + FINISH

    policy = ScriptPolicy(script)
    outcomes = run_chain(
        policy,
        tasks,
        FileAgentSettings(mode="sequential", period_steps=3),
        after=lambda i, outcome: f"FEEDBACK-AFTER-{i}",
    )
    assert all(o.finished and o.result.final_message for o in outcomes)
    second = first_call(policy, 2)["messages"]
    assert second[0][0] == "system" and any("Finishing now." in text for role, text in second if role == "assistant")
    assert "FEEDBACK-AFTER-0" in second[-1][1] and "It is now" in second[-1][1]  # feedback, then the next period
    compaction = next(c for c in policy.calls if c["phase"] == "compaction")
    assert compaction["period"] == 3 and any("PERIOD-TWO-REPORT" in text for _, text in compaction["messages"])
    third = first_call(policy, 3)["messages"]
    assert [role for role, _ in third] == ["system", "user"]  # the conversation restarted from the summary
    assert "SUMMARY-XYZ" in third[1][1] and "FEEDBACK-AFTER-1" in third[1][1]
    assert not any("PERIOD-TWO-REPORT" in text or "Finishing now." in text for _, text in third)
    third_result = outcomes[2].result
    assert third_result.attributes["compacted"] == "1" and third_result.metrics["compactions"] == 1.0
    assert outcomes[0].result.attributes["compacted"] == "0"
    assert any(e["role"] == "compaction" for e in third_result.transcript)


def test_compaction_also_follows_the_input_token_threshold(tasks):
    policy = ScriptPolicy(lambda period, step: "Prose only: no kernel starts.", input_tokens=500)
    outcomes = run_chain(policy, tasks[:2], FileAgentSettings(mode="sequential", period_steps=2, compaction_tokens=100))
    assert [o.result.attributes["compacted"] for o in outcomes] == ["0", "1"]


def test_independent_mode_starts_every_period_fresh(tasks):
    policy = ScriptPolicy(lambda period, step: "Prose only: no kernel starts.")
    run_chain(policy, tasks[:2], FileAgentSettings(mode="independent", period_steps=2), after=lambda i, o: "FEEDBACK")
    second = first_call(policy, 2)["messages"]
    assert [role for role, _ in second] == ["system", "user"] and "FEEDBACK" not in second[1][1]


SKILL = (
    "def last_value(path='timeseries.csv'):\n"
    "    import csv\n"
    "    with open(path) as handle:\n"
    "        rows = list(csv.reader(handle))\n"
    "    return float(rows[-1][1])\n"
)


def test_a_skill_induced_in_period_k_is_callable_from_k_plus_1_only(tasks):
    def script(period, step):
        if period == 1 and step == 1:
            return code(
                f"induct_skill(name='last_value', description='Return the last value of the first numeric "
                f"column of timeseries.csv', notes='no arguments needed', code={SKILL!r})",
                "print('SAME PERIOD', last_value())",
            )
        if period == 2 and step == 1:
            return code("print('NEXT PERIOD', last_value())", "print(retrieve_skill('last_value'))")
        return FINISH

    policy = ScriptPolicy(script)
    outcomes = run_chain(policy, tasks[:2], FileAgentSettings(mode="independent", skills=True, period_steps=3))
    first, second = (o.result for o in outcomes)
    observation = next(e for e in first.transcript if e["role"] == "tool")["observation"]
    assert "NameError" in observation and "last_value" in observation  # not callable in the period that induced it
    assert first.attributes["skills_induced"] == "last_value" and first.attributes["skills_rejected"] == ""
    assert SKILLS_EMPTY[:40] in first_call(policy, 1)["messages"][-1][1]
    assert first_call(policy, 2)["skills"] == ["last_value"]
    assert "- last_value -- Return the last value" in first_call(policy, 2)["messages"][-1][1]
    observation = next(e for e in second.transcript if e["role"] == "tool")["observation"]
    last_row = tasks[1].files["timeseries.csv"].decode().strip().splitlines()[-1].split(",")
    assert f"NEXT PERIOD {float(last_row[1])}" in observation and "def last_value" in observation
    assert second.attributes["skills_invoked"] == "last_value" and second.metrics["skill_calls"] == 1.0
    assert second.metrics["skills_retrieved"] == 1.0


def test_the_literal_answer_dict_is_refused_as_a_skill(tasks):
    literal = "def answer_now():\n    return {'status': 'ample', 'latest_value': 1.0}\n"
    spelled = "def answer_again():\n    out = {}\n    out['status'] = 'ample'\n    out['latest_value'] = 1.0\n    return out\n"
    computed = (
        "def band_now(path='timeseries.csv'):\n    import csv\n    rows = list(csv.reader(open(path)))\n"
        "    value = float(rows[-1][1])\n    return {'status': 'ample' if value > 0 else 'tight', "
        "'latest_value': value}\n"
    )
    induct = (
        "induct_skill(name={!r}, description='Return the status and the latest value of the period', "
        "notes='', code={!r})"
    )

    def script(period, step):
        return code(
            induct.format("answer_now", literal),
            induct.format("answer_again", spelled),
            induct.format("band_now", computed),
            induct.format("band_now", computed),
            "final_answer(answer={'status': 'ample', 'latest_value': 1.0, 'summary': 's'}, report='r')",
        )

    result = run_file_agent(ScriptPolicy(script), tasks[0], FileAgentSettings(skills=True, period_steps=2))
    rejected = json.loads(result.attributes["skills_rejected"])
    assert rejected["answer_now"] == "returns the literal answer dict"  # a literal dict of constants
    assert rejected["answer_again"] == "returns the literal answer dict"  # its value equals the answer, spelled out
    assert "duplicate" in rejected["band_now"]
    assert result.attributes["skills_induced"] == "band_now"  # computed from the files: admitted once


def test_a_period_without_final_answer_is_a_failure_not_an_error(tasks):
    policy = ScriptPolicy(lambda period, step: "I think the status is ample.")
    result = run_file_agent(policy, tasks[0], FileAgentSettings(period_steps=2))
    assert result.final_message == "" and result.forced_final and result.turns == 2 and result.code_cells == 0
    assert result.attributes["final_answer"] == "no"
    assert "No code block found" in policy.calls[-1]["messages"][-1][1]
    assert "LAST STEP" in policy.calls[-1]["messages"][-1][1]


def test_the_period_wall_clock_cuts_a_running_cell_and_a_late_answer_does_not_count(tasks):
    slow = code("import time", "time.sleep(30)", FINISH.split("\n")[1])  # sleeps past the 2 s period, then answers
    result = run_file_agent(ScriptPolicy(lambda period, step: slow), tasks[0], FileAgentSettings(period_wall_s=2))
    assert result.final_message == "" and result.attributes["final_answer"] == "no"
    assert result.latency_s < 20  # the cell was cut at the period's end, not at the 300 s cell timeout
    assert [c["timed_out"] for e in result.transcript if e["role"] == "tool" for c in e["cells"]] == [True]

    class SlowModel(ScriptPolicy):  # thinks past the period's end, then answers at once
        def generate(self, messages, **kwargs) -> Completion:
            time.sleep(2.5)
            return super().generate(messages, **kwargs)

    late = run_file_agent(SlowModel(lambda period, step: FINISH), tasks[0], FileAgentSettings(period_wall_s=2))
    assert late.final_message == "" and late.attributes["final_answer"] == "no"
    notices = " ".join(e["content"] for e in late.transcript if e["role"] == "notice")
    assert "wall clock" in notices and "the period ended without final_answer" in notices
