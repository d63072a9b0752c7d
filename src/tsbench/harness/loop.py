"""One turn loop for every multi-turn harness (rlm, tools, the file agent), specialised by hooks.

As verifiers' MultiTurnEnv: the loop asks the agent, reads the actions in its reply, lets the
environment respond, and stops when a reply ends the episode. Written here once for all of them:

- the forced final turn: on the last allowed reply the loop appends the harness's notice and flags
  the episode `forced_final`; actions are withdrawn (unless the harness acts on its last reply, as
  the file agent's final_answer tool is code);
- the caps: `episode_token_cap` and `episode_wall_s` end the episode as an error (EpisodeError) that
  names the cap. They hold while work is in flight, not only between turns: the wall clock is a
  deadline (core/deadline.py) that bounds every model call, cell and sub_rlm episode under it, and
  one `EpisodeBudget` is shared by an episode and all its sub_rlm episodes, so their tokens, time and
  sub_rlm calls count against the row's caps;
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
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tsbench.core.deadline import remaining, tightest, within
from tsbench.core.episode import EpisodeError, EpisodeResult, EpisodeTask, TaskInfo
from tsbench.harness.accounting import CUT_OFF_NOTICE, spending, unfinished
from tsbench.harness.prompts import FINAL_TURN_NOTICE
from tsbench.models.base import Agent, Completion, Message, ModelError

# What an error row says ended it, per deadline (core/deadline.py).
BUDGET_NAMES = {
    "wall_clock": "ran out of its wall clock",
    "cell_timeout": "ran out of the time left to the cell that called sub_rlm",
}


@dataclass
class EpisodeBudget:
    """What one row may spend: shared by its episode and every sub_rlm episode under it."""

    token_cap: int | None = None
    wall_s: float | None = None
    started: float = field(default_factory=time.monotonic)
    tokens: int = 0  # in + out, every call of every episode of the row (our estimate where a server's was no count)
    sub_rlm_calls: int = 0

    @classmethod
    def of(cls, cfg: Any) -> EpisodeBudget:
        return cls(token_cap=cfg.episode_token_cap, wall_s=cfg.episode_wall_s)

    def wall_left(self) -> float | None:
        return None if self.wall_s is None else self.wall_s - (time.monotonic() - self.started)


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

    def __init__(
        self,
        agent: Agent,
        task: EpisodeTask,
        cfg: Any,
        *,
        replies: int | None = None,
        budget: EpisodeBudget | None = None,
    ):
        self.agent, self.task, self.cfg = agent, task, cfg
        self.replies = cfg.max_turns if replies is None else replies
        self.result = EpisodeResult()
        self.messages: list[Message] = []
        self.started = time.monotonic()
        self.budget = budget or EpisodeBudget.of(cfg)  # a sub_rlm episode is given its parent's

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
        with within(self.budget.wall_left(), "wall_clock"):
            return self._run()

    def _run(self) -> EpisodeResult:
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
                    try:
                        completion = self.ask(turn, last)
                    except ModelError as error:
                        self.check_caps(cause=error)  # a call a budget's deadline cut ends as that budget
                        if error.budget in BUDGET_NAMES:  # ... or whose retries it left no time for
                            what = BUDGET_NAMES[error.budget]
                            raise EpisodeError(error.budget, f"{self.unit} {what} ({error})", result) from error
                        raise
                result.add_completion(completion)
                self.budget.tokens += completion.input_tokens + completion.output_tokens
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

    def check_caps(self, cause: BaseException | None = None) -> None:
        """End the episode (EpisodeError naming the cap) when the row's tokens or a deadline over it are spent."""
        result, budget = self.result, self.budget
        if budget.token_cap is not None and budget.tokens >= budget.token_cap:
            raise EpisodeError(
                "token_cap", f"{self.unit} used {budget.tokens} tokens (cap {budget.token_cap})", result
            ) from cause
        deadline = tightest()
        if deadline is not None and deadline.left() <= 0.0 and deadline.budget in BUDGET_NAMES:
            wall = f" of {budget.wall_s:g} s" if deadline.budget == "wall_clock" else ""
            raise EpisodeError(deadline.budget, f"{self.unit} {BUDGET_NAMES[deadline.budget]}{wall}", result) from cause

    def remaining_s(self) -> float | None:
        """Seconds left before the tightest deadline over this episode (its wall clock, or the cell that
        called it as a sub_rlm; None: no bound); each cell's timeout is at most this."""
        return remaining()


__all__ = ["EpisodeBudget", "TurnLoop", "add_notice"]
