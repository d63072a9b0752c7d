"""TimeMaster's reward on the paper's own example outputs (Figure 2, Appendix I), the public code's
choices (case-insensitive class, one-float judge at temperature 1.0, generic advice capped at 0.4,
soft weight 0.5), and the judge asked over a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import pytest

from tsbench.models.registry import get_model
from tsbench.models.retry import RetryPolicy
from tsbench.tasks import get_taskset
from tsbench.testing.fake_openai_server import FakeOpenAIServer
from tsbench.train import rewards as rw
from tsbench.train import timemaster_reward as tm
from tsbench.train.config import RewardConfig
from tsbench.train.timemaster_judge import soft_score

# Figure 2 (left): clinically sound reasoning, but the tags are missing.
FORMAT_ERROR = (
    "The waveform shows a relatively low amplitude, with the maximum amplitude reaching approximately 0.4 mV. "
    "Myopathy. Given the clinical presentation of the EMG signal, it is strongly recommended to conduct a "
    "detailed electromyography (EMG) study."
)
# Figure 2 (middle): well formed, reasoning points at myopathy, the class says Neuropathy.
PREDICTION_ERROR = (
    "<think>The waveform is polyphasic, meaning it has multiple peaks, a hallmark of myopathic units. The amplitude "
    "of the waveform is increased... suggest a neurogenic process.</think><class>Neuropathy</class>"
    "<extension>Given... of life.</extension>"
)
# Figure 2 (right): the right class with a generic and with a specific extension.
MYOPATHY = "<think>The EMG shows low-amplitude, short-duration polyphasic potentials: myopathic units.</think>"
GENERIC = MYOPATHY + "<class>Myopathy</class><extension>Clinical advice includes monitoring strength.</extension>"
SPECIFIC = (
    MYOPATHY + "<class>Myopathy</class><extension>Perform additional EMG studies to assess recruitment patterns; "
    "use MRI to evaluate muscle structure; order blood tests for muscle enzymes and troponin.</extension>"
)
# Appendix I (HAR): the class written as UCI HAR spells it, the gold as the paper's prompt lists it.
HAR = "<think>x ranges from -0.5 to 1.0 with periodic peaks.</think> <class>WALKING_DOWNSTAIRS</class>"
FAST = RetryPolicy(max_attempts=1, base_delay_s=0.01, max_delay_s=0.02, max_total_s=5.0, rate_limit_base_delay_s=0.01)


@pytest.mark.parametrize(
    "text, ok",
    [
        ("<think>x</think><class>Desktop</class>", True),  # the main-result format: no extension
        ("<think>x</think><class>Desktop</class><extension>check the PSU</extension>", True),
        ("<THINK>x</THINK>\n<Class>Desktop</Class>", True),  # tag names in any case
        (FORMAT_ERROR, False),
        (PREDICTION_ERROR, True),
        ("<class>Desktop</class><think>x</think>", False),  # order
        ("<think>x <class>Desktop</class></think>", False),  # nested
        ("<think>x</think><class>Desktop</class><class>Laptop</class>", False),  # twice
        ("<think> </think><class>Desktop</class>", False),  # empty reasoning
        ("<think>x</think><class> </class>", False),  # empty class
        ("<think>x</think><extension>e</extension>", False),  # no class
    ],
)
def test_format_reward_on_the_papers_outputs(text, ok):
    assert tm.format_reward(text) == float(ok)
    assert rw.format_reward(final_message=[text], score=[0.0]) == [float(ok)]  # what GRPO's TRL function sees


def test_extension_can_be_required_for_the_three_part_runs():
    strict = tm.TimeMasterReward(require_extension=True)
    assert tm.format_reward("<think>x</think><class>Desktop</class>", strict) == 0.0
    assert tm.format_reward("<think>x</think><class>Desktop</class><extension>e</extension>", strict) == 1.0


def test_hard_reward_is_a_case_insensitive_class_match():
    assert tm.reward("<think>x</think><class>Desktop</class>", "Desktop") == {
        "format": 1.0, "hard": 1.0, "soft": 0.0, "total": pytest.approx(1.0),
    }  # fmt: skip
    assert tm.hard_reward(tm.class_text(HAR), "walking_downstairs") == 1.0
    assert tm.hard_reward("desktop", "Desktop") == 1.0
    assert tm.hard_reward("desktop", "Desktop", tm.TimeMasterReward(case_sensitive=True)) == 0.0
    assert tm.reward(PREDICTION_ERROR, "Myopathy", soft=0.9) == {
        "format": 1.0, "hard": 0.0, "soft": 0.0, "total": pytest.approx(0.1),
    }  # fmt: skip  # no soft reward without the right class (eq. 4)
    assert tm.reward(FORMAT_ERROR, "Myopathy")["total"] == 0.0


def test_timerbed_answer_class_hook_is_what_the_composite_hard_reward_reads():
    timerbed = get_taskset("timerbed")
    gold = {"answer": "walking_downstairs", "options": ["walking", "walking_upstairs", "walking_downstairs"]}
    assert timerbed.answer_class("har", gold, "WALKING_DOWNSTAIRS") == "walking_downstairs"
    assert rw.class_matches(timerbed, "har", gold, HAR)
    assert not rw.class_matches(timerbed, "har", gold, "<think>x</think><class>walking</class>")
    assert timerbed.score("har", gold, HAR).score == 1.0
    inside = timerbed.score("har", gold, "<think>maybe <class>walking</class></think>WALKING_DOWNSTAIRS")
    assert inside.parsed == {"answer": "walking_downstairs"}  # a class named inside <think> does not count
    assert timerbed.score("har", gold, '{"answer": "Walking"}').score == 0.0  # JSON answers still read


def test_soft_reward_weights_generic_cap_and_the_papers_examples():
    settings = tm.DEFAULT
    assert (settings.format_weight, settings.hard_weight, settings.soft_weight) == (0.1, 0.9, 0.5)
    assert settings.judge_temperature == 1.0 and settings.generic_cap == 0.4
    assert RewardConfig(reward="composite").soft == 0.0 and RewardConfig(reward="composite", judge="j").soft == 0.5
    generic, specific = (tm.reward(t, "Myopathy", soft=s)["total"] for t, s in ((GENERIC, 0.2), (SPECIFIC, 0.8)))
    assert generic == pytest.approx(1.0 + 0.5 * 0.2) and specific == pytest.approx(1.0 + 0.5 * 0.8)
    assert tm.cap_generic("Order further diagnostic tests.", 0.9) == 0.4
    assert tm.cap_generic("Refer to a specialist.", 0.3) == 0.3
    assert tm.cap_generic("Order CK and troponin levels.", 0.9) == 0.9
    tagged = tm.parse_output(SPECIFIC)
    assert tm.wants_judge(tagged, 1.0) and not tm.wants_judge(tagged, 0.0)
    assert not tm.wants_judge(tm.parse_output("<think>x</think><class>Myopathy</class>"), 1.0)


def test_judge_prompt_and_reply_are_pure():
    tagged = tm.parse_output(SPECIFIC)
    prompt = tm.judge_prompt(tagged)
    assert "Prediction: Myopathy" in prompt and "troponin" in prompt and "single float" in prompt
    for criterion in ("Specificity", "Appropriateness", "Relevance", "Depth"):
        assert criterion in prompt
    assert tm.parse_judge_reply("0.625") == 0.625 and tm.parse_judge_reply(" Score: 0.8\n") == 0.8
    assert tm.parse_judge_reply("1") == 1.0 and tm.parse_judge_reply("7") is None
    assert tm.parse_judge_reply("0.5 or 0.7") is None and tm.parse_judge_reply("no idea") is None
    assert tm.parse_judge_reply('{"specificity": 1, "appropriateness": 0.5, "relevance": 0.5, "depth": 0}') == 0.5


def test_the_judge_is_asked_once_at_temperature_one_and_asked_again_on_a_bad_reply():
    tagged = tm.parse_output(SPECIFIC)
    with FakeOpenAIServer(["ok:I think it is good", "ok:0.8"]) as server:
        judge = get_model("openai/fake-model", base_url=server.base_url, retry=FAST)
        assert soft_score(judge, tagged) == pytest.approx(0.8)
        assert [b["temperature"] for b in server.bodies] == [1.0, 1.0]
        assert "Extension: Perform additional EMG studies" in server.bodies[0]["messages"][0]["content"]
        capped = tm.Tagged(tagged.think, tagged.cls, "Please confirm the diagnosis with further tests.")
        server.push("ok:0.9")
        assert soft_score(judge, capped) == pytest.approx(0.4)
        server.push("500")
        assert soft_score(judge, tagged) == 0.0  # an unreachable judge gives no soft reward, never an error
        assert soft_score(judge, tm.Tagged("x", "Myopathy", "")) == 0.0 and server.request_count == 4
