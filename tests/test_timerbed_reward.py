"""TimeMaster's reward on the paper's own example outputs (Figure 2, Appendix I) under the public code's
reading (the default; golden vectors: test_golden_timemaster.py) and the paper's (`format_rule =
"paper"`), and the judge asked over a real HTTP server on 127.0.0.1.

Changed with the public reading (issue 36): a reply is well formed when a <class> span names a class,
whatever <think> does (the paper's nested/ordered check is the "paper" option); a class named inside
<think> counts (the public regex searches the whole reply); `Desktop.` names no class; a judge reply is
`float(reply)`, so "Score: 0.8" and a JSON object of the four criteria score 0."""

from __future__ import annotations

import json

import pytest

from composite_reward import reward
from tsbench.core.class_tags import named_option
from tsbench.models.registry import get_model
from tsbench.models.retry import RetryPolicy
from tsbench.tasks import get_taskset
from tsbench.tasks.timerbed.prompts import question_text
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
EMG = ["Healthy", "Myopathy", "Neuropathy"]
FAST = RetryPolicy(max_attempts=1, base_delay_s=0.01, max_delay_s=0.02, max_total_s=5.0, rate_limit_base_delay_s=0.01)


CLASSES = ["Desktop", "Laptop"]


def namer(options):
    return lambda text: named_option(text, options)


PAPER = tm.TimeMasterReward(format_rule="paper")


@pytest.mark.parametrize(
    "text, public, paper",
    [
        ("<think>x</think><class>Desktop</class>", True, True),  # the main-result format: no extension
        ("<think>x</think><class>Desktop</class><extension>check the PSU</extension>", True, True),
        ("<THINK>x</THINK>\n<Class>Desktop</Class>", True, True),  # tag names in any case
        ("<class>Desktop</class><think>x</think>", True, False),  # order: the public code never checks it
        ("<think>x <class>Desktop</class></think>", True, False),  # nested
        ("<think>x</think><class>Desktop</class><class>Laptop</class>", True, False),  # twice: the first counts
        ("<think> </think><class>Desktop</class>", True, False),  # empty reasoning
        ("<think>x</think><class> </class>", False, False),  # empty class
        ("<think>x</think><class>Desktop.</class>", False, True),  # names no class (the paper: non-empty)
        ("<think>x</think><extension>e</extension>", False, False),  # no class
        ("Desktop", False, False),
    ],
)
def test_format_reward_public_and_paper(text, public, paper):
    assert reward(text, "Desktop", CLASSES)["format"] == float(public)
    assert reward(text, "Desktop", CLASSES, settings=PAPER)["format"] == float(paper)


def test_format_reward_on_the_papers_figure_2():
    for settings in (tm.DEFAULT, PAPER):
        assert reward(FORMAT_ERROR, "Myopathy", EMG, settings=settings)["total"] == 0.0
        assert reward(PREDICTION_ERROR, "Myopathy", EMG, soft=0.9, settings=settings) == {
            "format": 1.0, "hard": 0.0, "soft": 0.0, "total": pytest.approx(0.1), "predicted": "Neuropathy",
        }  # fmt: skip  # no soft reward without the right class (eq. 4)
    strict = tm.TimeMasterReward(format_rule="paper", require_extension=True)
    assert tm.read("<think>x</think><class>Desktop</class>", namer(CLASSES), strict).format == 0.0


def test_hard_reward_is_a_case_insensitive_class_match():
    assert reward("<think>x</think><class>Desktop</class>", "Desktop", CLASSES) == {
        "format": 1.0, "hard": 1.0, "soft": 0.0, "total": pytest.approx(1.0), "predicted": "Desktop",
    }  # fmt: skip
    assert reward(HAR, "walking_downstairs", list(get_taskset("timerbed").columns()[5].options))["hard"] == 1.0
    assert reward("<class> desktop\n</class>", "DESKTOP", CLASSES)["hard"] == 1.0
    assert reward("<class>Desktop.</class>", "Desktop", CLASSES)["hard"] == 0.0  # punctuation names no class
    first = "<class>Laptop</class><class>Desktop</class>"
    assert reward(first, "Desktop", CLASSES)["predicted"] == "Laptop"  # the first span that names a class
    assert reward("<class>maybe</class><class>Desktop</class>", "Desktop", CLASSES)["hard"] == 1.0
    soft_module = tm.TimeMasterReward(soft_weight=0.5)  # emg_soft.py reads the first span only
    assert (
        reward("<class>maybe</class><class>Desktop</class>", "Desktop", CLASSES, settings=soft_module)["format"] == 0.0
    )
    assert reward(first, "Tablet", CLASSES)["hard"] == 0.0  # a gold outside the classes matches no reply


def _hard(taskset, category: str, gold: dict, message: str) -> bool:
    """The composite reward's live hard reward (what train-grpo's TRL calls) on one reply."""
    (_, hard, _), _ = rw.reward_functions(RewardConfig(reward="composite"), taskset)
    return hard(final_message=[message], category=[category], gold=[json.dumps(gold)], score=[0.0])[0] > 0


def test_timerbed_answer_class_hook_is_what_the_composite_hard_reward_reads():
    timerbed = get_taskset("timerbed")
    gold = {"answer": "walking_downstairs", "options": ["walking", "walking_upstairs", "walking_downstairs"]}
    assert timerbed.answer_class("har", gold, " WALKING_DOWNSTAIRS ") == "walking_downstairs"
    assert timerbed.answer_class("har", gold, "walking_downstairs.") is None  # one matcher: as the reward
    assert _hard(timerbed, "har", gold, HAR)
    assert not _hard(timerbed, "har", gold, "<think>x</think><class>walking</class>")
    assert timerbed.score("har", gold, HAR).score == 1.0
    inside = timerbed.score("har", gold, "<think>maybe <class>walking</class></think>WALKING_DOWNSTAIRS")
    assert inside.parsed == {"answer": "walking"}  # the public code searches the whole reply, <think> too
    unread = timerbed.score("har", gold, "<think>x</think><class>downstairs</class>")
    assert (unread.score, unread.valid, unread.error) == (0.0, False, "no <class> span names one of the classes")
    # A JSON final message (TimeClaw's harnesses) is read only when the reply has no <class> span at all,
    # and the row says so: the public code would score it 0 (docs/fidelity.md).
    json_reply = timerbed.score("har", gold, '{"answer": "walking_downstairs", "report": "x"}')
    assert (json_reply.score, json_reply.parsed) == (1.0, {"answer": "walking_downstairs", "from": "json"})
    assert timerbed.score("har", gold, '<class>x</class>{"answer": "walking_downstairs"}').score == 0.0
    assert not _hard(timerbed, "har", gold, '{"answer": "walking_downstairs"}')  # the reward: tags only


def test_soft_reward_weights_generic_cap_and_the_papers_examples():
    settings = tm.TimeMasterReward(soft_weight=0.5)
    assert (tm.DEFAULT.format_weight, tm.DEFAULT.hard_weight, tm.DEFAULT.soft_weight) == (0.1, 0.9, 0.0)
    assert settings.judge_temperature == 1.0 and settings.generic_cap == 0.4
    assert RewardConfig(reward="composite").soft == 0.0 and RewardConfig(reward="composite", judge="j").soft == 0.5
    generic, specific = (
        reward(t, "Myopathy", EMG, soft=s, settings=settings)["total"] for t, s in ((GENERIC, 0.2), (SPECIFIC, 0.8))
    )
    assert generic == pytest.approx(1.0 + 0.5 * 0.2) and specific == pytest.approx(1.0 + 0.5 * 0.8)
    assert tm.cap_generic("Order further diagnostic tests.", 0.9) == 0.4
    assert tm.cap_generic("Refer to specialist.", 0.9) == 0.4
    assert tm.cap_generic("Refer to a specialist.", 0.9) == 0.9  # the public pattern has no article
    assert tm.cap_generic("Order CK and troponin levels.", 0.9) == 0.9
    reading = tm.read(SPECIFIC, namer(EMG), settings)
    assert tm.wants_judge(reading, 1.0) and not tm.wants_judge(reading, 0.0)
    bare = tm.read("<think>x</think><class>Myopathy</class>", namer(EMG), settings)
    assert not tm.wants_judge(bare, 1.0)


def test_judge_prompt_and_reply_are_pure():
    tagged = tm.read(SPECIFIC, namer(EMG)).tagged
    clinical = tm.judge_prompt(tagged, "emg")
    assert clinical.startswith("You are a clinical evaluation assistant.") and "Prediction: Myopathy" in clinical
    general = tm.judge_prompt(tagged, "ctu")
    assert general.startswith("You are an expert assistant") and "troponin" in general and "single float" in general
    assert tm.judge_prompt(tagged, "emg", tm.TimeMasterReward(judge_prompt="paper")) == general
    for criterion in ("Specificity", "Appropriateness", "Relevance", "Depth"):
        assert criterion in clinical and criterion in general
    assert tm.judge_value("0.625", "") == 0.625 and tm.judge_value(" 1\n", "") == 1.0
    assert tm.judge_value("Score: 0.8", "") == 0.0 and tm.judge_value("no idea", "") == 0.0  # not a float: 0
    assert tm.judge_value("7", "") is None and tm.judge_value("nan", "") is None  # outside [0, 1]: ask again
    assert tm.judge_value("7", "Order further tests.") == 0.4  # capped first, as the public code does


def test_the_judge_is_asked_at_temperature_one_and_again_on_a_value_out_of_range():
    tagged = tm.read(SPECIFIC, namer(EMG)).tagged
    with FakeOpenAIServer(["ok:1.5", "ok:0.8"]) as server:
        judge = get_model("openai/fake-model", base_url=server.base_url, retry=FAST)
        assert soft_score(judge, tagged, "emg") == pytest.approx(0.8)
        assert [b["temperature"] for b in server.bodies] == [1.0, 1.0]
        content = server.bodies[0]["messages"][0]["content"]
        assert "Extension (clinical recommendation): Perform additional EMG studies" in content
        capped = tm.Tagged(tagged.think, tagged.cls, "Please confirm the diagnosis with further tests.")
        server.push("ok:0.9")
        assert soft_score(judge, capped, "emg") == pytest.approx(0.4)
        server.push("ok:I think it is good")
        assert soft_score(judge, tagged, "emg") == 0.0  # not a float: no soft reward, not asked again
        server.push("500")
        assert soft_score(judge, tagged, "emg") == 0.0  # an unreachable judge gives no soft reward, never an error
        assert soft_score(judge, tm.Tagged("x", "Myopathy", ""), "emg") == 0.0 and server.request_count == 5


def test_training_asks_the_papers_prompt_and_nothing_more():
    """TimerBed's rows already end with the paper's instruction (H.2): the composite reward appends no
    second one; a judged run adds the paper's extension sentence, as the three-part form has it. Other
    families get the trainer's tag instructions."""
    timerbed = get_taskset("timerbed")
    classes = ["Healthy", "Myopathy", "Neuropathy"]
    question = question_text("emg", ["EMG"], 1500, classes)
    assert rw.composite_question(timerbed, RewardConfig(reward="composite"), question) == question
    judged = rw.composite_question(timerbed, RewardConfig(reward="composite", judge="j"), question)
    assert judged == question_text("emg", ["EMG"], 1500, classes, extension=True)
    assert judged.count("<think> </think>") == 1 and judged.endswith("within <extension> </extension> tags.")
    ctu = question_text("ctu", ["electricity"], 720, CLASSES)
    assert rw.composite_question(timerbed, RewardConfig(reward="composite", judge="j"), ctu).count("\n\n") == 1
    trend = rw.composite_question(get_taskset("trend"), RewardConfig(reward="composite"), "Rising or falling?")
    assert trend == f"Rising or falling?\n\n{rw.FORMAT_INSTRUCTIONS}"
    assert rw.composite_question(timerbed, RewardConfig(), question) == question
