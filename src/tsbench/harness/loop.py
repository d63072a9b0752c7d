"""One turn loop for every multi-turn harness (rlm, tools, the file agent), specialised by hooks.

As verifiers' MultiTurnEnv: the loop asks the agent, reads the actions in its reply, lets the
environment respond, and stops when a reply ends the episode. Written here once for all of them:

- the forced final turn: on the last allowed reply the loop appends the harness's notice and flags
  the episode `forced_final`; actions are withdrawn (unless the harness acts on its last reply, as
  the file agent's final_answer tool is code);
- the caps: `episode_token_cap` and `episode_wall_s` end the episode as an error (EpisodeError);
- spending: a model call that fails carries the episode so far (harness/accounting.py);
- the transcript's assistant and notice events;
- cut replies: a reply the token cap stopped with no action in it is never the final answer; while
  turns remain the agent is told and the loop goes on (harness/accounting.py).

A harness overrides `open` (its first messages), `actions` (what a reply asks the environment to
do), `respond` (the environment's response; True ends the episode) and, where it differs,
`ask`, `remember`, `reply_event`, `no_action`, `stopped` and `finish`.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, ClassVar

from tsbench.core.episode import EpisodeResult, EpisodeTask, TaskInfo
from tsbench.harness.accounting import CUT_OFF_NOTICE, spending, unfinished
from tsbench.harness.episode import EpisodeError
from tsbench.harness.prompts import FINAL_TURN_NOTICE
from tsbench.models.base import Completion, Message


def add_notice(messages: list[Message], text: str) -> None:
    """Append a notice to the last user message, or as a new user message after anything else."""
    last = messages[-1] if messages else None
    if last is not None and last.role == "user":
        messages[-1] = Message("user", f"{last.content}\n\n{text}", images=last.images)
    else:
        messages.append(Message("user", text))


class TurnLoop:
    """One conversation between an agent and a harness's environment (see the module doc)."""

    final_notice: ClassVar[str] = FINAL_TURN_NOTICE
    last_reply_acts: ClassVar[bool] = False  # the last reply's actions still run (the file agent's final_answer)
    unit: ClassVar[str] = "episode"  # what the caps' errors name

    def __init__(self, agent: Any, task: EpisodeTask, cfg: Any, *, replies: int | None = None):
        self.agent, self.task, self.cfg = agent, task, cfg
        self.replies = cfg.max_turns if replies is None else replies
        self.result = EpisodeResult()
        self.messages: list[Message] = []
        self.started = time.monotonic()

    # -- hooks ---------------------------------------------------------------------------------
    def environment(self) -> contextlib.AbstractContextManager:
        """What the episode runs inside (a sandbox), entered before `open` and left after the last turn."""
        return contextlib.nullcontext()

    def open(self) -> None:
        """The first messages (and their transcript events)."""

    def info(self) -> TaskInfo:
        return self.task.info()

    def ask(self, turn: int, last: bool) -> Completion:
        """One reply of the agent to the conversation so far."""
        return self.agent.generate(
            self.messages, max_tokens=self.cfg.max_tokens, temperature=self.cfg.temperature, task=self.info()
        )

    def actions(self, completion: Completion, turn: int) -> list:
        """What the reply asks the environment to do (code blocks, tool calls); [] ends or skips the turn."""
        return []

    def reply_event(self, completion: Completion, actions: list) -> dict[str, Any]:
        """Keys the reply's transcript event adds."""
        return {}

    def remember(self, completion: Completion, actions: list) -> None:
        """Put the reply into the conversation."""
        self.messages.append(Message("assistant", completion.text))

    def respond(self, completion: Completion, actions: list, turn: int) -> bool:
        """The environment's response to the actions, added to the conversation; True ends the episode."""
        raise NotImplementedError

    def no_action(self, completion: Completion, turn: int, last: bool) -> bool:
        """A whole reply without actions: by default it is the final message (True ends the episode)."""
        self.result.final_message = completion.text
        return True

    def stopped(self) -> bool:
        """Whether the episode ends before the next reply (a period's wall clock); default never."""
        return False

    def finish(self) -> None:
        """After the last turn, still inside the environment (the file agent's skill check)."""

    def notify(self, text: str) -> None:
        """Tell the agent something (the forced-final and cut-reply notices)."""
        add_notice(self.messages, text)
        self.result.transcript.append({"role": "notice", "content": text})

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> EpisodeResult:
        result = self.result
        with self.environment():
            self.open()
            for turn in range(1, self.replies + 1):
                if self.stopped():
                    break
                last = turn == self.replies
                if last:
                    result.forced_final = True
                    self.notify(self.final_notice)
                self.check_caps()
                with spending(result):
                    completion = self.ask(turn, last)
                result.add_completion(completion)
                actions = self.actions(completion, turn) if self.last_reply_acts or not last else []
                result.transcript.append(
                    {
                        "role": "assistant",
                        "turn": turn,
                        "content": completion.text,
                        **self.reply_event(completion, actions),
                        "input_tokens": completion.input_tokens,
                        "output_tokens": completion.output_tokens,
                        "latency_s": round(completion.latency_s, 3),
                        "finish_reason": completion.extra.get("finish_reason"),
                    }
                )
                self.remember(completion, actions)
                if not actions:
                    if unfinished(completion, self.cfg):  # never a final answer (harness/accounting.py)
                        if not last:
                            self.notify(CUT_OFF_NOTICE)
                        continue
                    if self.no_action(completion, turn, last):
                        break
                    continue
                if self.respond(completion, actions, turn):
                    break
                if not last:
                    self.check_caps()  # a spent wall clock ends the episode here, not after another reply
            self.finish()
        return result

    def check_caps(self) -> None:
        result, cfg = self.result, self.cfg
        used = result.input_tokens + result.output_tokens
        if cfg.episode_token_cap is not None and used >= cfg.episode_token_cap:
            raise EpisodeError("token_cap", f"{self.unit} used {used} tokens (cap {cfg.episode_token_cap})", result)
        if cfg.episode_wall_s is not None and time.monotonic() - self.started >= cfg.episode_wall_s:
            raise EpisodeError("wall_clock", f"{self.unit} ran past {cfg.episode_wall_s} s", result)

    def remaining_s(self) -> float | None:
        """Seconds left of the episode's wall clock (None: no cap); each cell's timeout is at most this."""
        if self.cfg.episode_wall_s is None:
            return None
        return self.cfg.episode_wall_s - (time.monotonic() - self.started)


__all__ = ["TurnLoop", "add_notice"]
