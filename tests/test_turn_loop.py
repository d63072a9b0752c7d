"""The one turn loop (harness/loop.py) that rlm, tools and the file agent specialise: the forced final
turn, the caps, spending on a failed call and cut replies, written once and checked here on a toy
environment with no kernel (milliseconds)."""

from __future__ import annotations

import pytest

from tsbench.core.episode import EpisodeError, EpisodeTask
from tsbench.harness.accounting import CUT_OFF_NOTICE
from tsbench.harness.file_agent import Period
from tsbench.harness.loop import TurnLoop
from tsbench.harness.prompts import FINAL_TURN_NOTICE
from tsbench.harness.rlm import RLMEpisode
from tsbench.harness.settings import HarnessSettings
from tsbench.harness.tools import ToolsEpisode
from tsbench.models.base import Agent, Completion, Message, ModelError


class Scripted(Agent):
    """Replies in order; a reply written "CUT:..." is stopped by the token cap; "FAIL" raises."""

    name = "scripted/loop"

    def __init__(self, replies: list[str], tokens: int = 1):
        self.replies, self.tokens, self.seen = list(replies), tokens, []

    def generate(self, messages, **kwargs):
        self.seen.append([m.content for m in messages])
        text = self.replies.pop(0)
        if text == "FAIL":
            raise ModelError("server", "down")
        cut = text.startswith("CUT:")
        extra = {"finish_reason": "length" if cut else "stop"}
        return Completion(text.removeprefix("CUT:"), input_tokens=self.tokens, output_tokens=self.tokens, extra=extra)


class Echo(TurnLoop):
    """Lines starting with ACT are the actions; the environment answers each with 'done'."""

    def open(self) -> None:
        self.messages = [Message("user", self.task.question)]

    def actions(self, completion, turn):
        return [line for line in completion.text.splitlines() if line.startswith("ACT")]

    def respond(self, completion, actions, turn):
        self.messages.append(Message("user", "done " + ",".join(actions)))
        return False


TASK = EpisodeTask("r", "c", "all", "What is it?")


def test_the_last_reply_is_forced_and_its_actions_withdrawn():
    agent = Scripted(["ACT 1", "ACT 2", "ACT 3"])
    result = Echo(agent, TASK, HarnessSettings(max_turns=3)).run()
    assert result.forced_final and result.turns == 3 and result.final_message == "ACT 3"
    assert agent.seen[-1][-1].endswith(FINAL_TURN_NOTICE) and "done ACT 2" in agent.seen[-1][-1]
    roles = [event["role"] for event in result.transcript]
    assert roles == ["assistant", "assistant", "notice", "assistant"]
    assert [e["finish_reason"] for e in result.transcript if e["role"] == "assistant"] == ["stop"] * 3


def test_a_cut_reply_is_no_answer_unless_the_settings_take_it():
    agent = Scripted(["CUT:half an ans", "the answer"])
    result = Echo(agent, TASK, HarnessSettings(max_turns=3)).run()
    assert result.final_message == "the answer" and not result.forced_final
    assert agent.seen[1][-1] == CUT_OFF_NOTICE
    assert {"role": "notice", "content": CUT_OFF_NOTICE} in result.transcript
    taken = Echo(Scripted(["CUT:half an ans"]), TASK, HarnessSettings(answer_cut_replies=True)).run()
    assert taken.final_message == "half an ans" and taken.turns == 1
    last = Echo(Scripted(["ACT", "CUT:cut at the end"]), TASK, HarnessSettings(max_turns=2)).run()
    assert last.final_message == "" and last.forced_final  # a cut last reply leaves no answer


def test_the_caps_end_the_episode_as_an_error_with_what_it_spent():
    with pytest.raises(EpisodeError) as caught:
        Echo(Scripted(["ACT"] * 5, tokens=3), TASK, HarnessSettings(max_turns=5, episode_token_cap=10)).run()
    assert caught.value.kind == "token_cap" and "episode used 12 tokens (cap 10)" in str(caught.value)
    assert caught.value.result.turns == 2
    with pytest.raises(ModelError) as failed:
        Echo(Scripted(["ACT", "FAIL"]), TASK, HarnessSettings(max_turns=3)).run()
    assert failed.value.result.turns == 1  # the failing call's row keeps the turn before it


def test_rlm_tools_and_the_file_agent_are_the_one_loop_specialised():
    for episode in (RLMEpisode, ToolsEpisode, Period):
        assert issubclass(episode, TurnLoop)
        assert "check_caps" not in vars(episode) and "notify" not in vars(episode)
    assert "run" not in vars(RLMEpisode) and "run" not in vars(ToolsEpisode)
    assert Period.last_reply_acts and not RLMEpisode.last_reply_acts  # final_answer is code in the file agent
