"""The recursive-LM harness: the model writes Python into a persistent kernel that holds the series.

One episode = one fresh sandbox. Each reply's fenced code blocks run in order and their output comes
back as the next message; the first reply without code is the final message. On the last allowed
reply code is withdrawn and a notice demands the answer (the episode is flagged forced_final).
With depth N > 0 the kernel gets `sub_rlm(...)`, which runs a nested episode at depth N - 1.

A sub_rlm episode spends the row's budgets, not fresh ones: it shares its parent's EpisodeBudget
(tokens, the wall clock, `max_sub_rlm_calls`) and runs inside the deadline of the cell that called it,
whose clock keeps running while it is served. A cap spent inside one ends the row as that cap; the
cell's own time running out ends only the sub episode (the cell is then interrupted as any other).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tsbench.core.episode import EpisodeError, EpisodeResult, EpisodeTask, end_if_kernel_lost
from tsbench.core.settings import setting
from tsbench.core.text import fenced_code_blocks, strip_reasoning
from tsbench.harness.accounting import nested
from tsbench.harness.base import Harness
from tsbench.harness.loop import EpisodeBudget, TurnLoop
from tsbench.harness.prompts import observation_message, rlm_system_prompt
from tsbench.harness.runtime.behind import started_behind
from tsbench.harness.runtime.sandbox import Sandbox, truncate_observation
from tsbench.harness.settings import HarnessSettings
from tsbench.models.base import Agent, Completion, Message


@dataclass
class RLMSettings(HarnessSettings):
    """[rlm]: the recursive language model harness's own settings."""

    SECTION: ClassVar[str] = "rlm"

    depth: int = setting(0, "sub_rlm recursion depth.", ge=0)
    # The spec runs all blocks of a reply; a bound keeps one reply from holding the kernel for hours.
    max_blocks_per_reply: int = setting(
        16, "Code blocks run per model reply; the rest are skipped with a note in the observation.", ge=1
    )
    max_sub_rlm_calls: int = setting(
        64, "sub_rlm calls per episode, nested ones included; past it sub_rlm raises in the cell.", ge=0
    )

    @property
    def recursion_depth(self) -> int:
        return self.depth

    def name_suffix(self) -> str:
        return f"__d{self.depth}" if self.depth else ""


SUB_NOTE = " (in a sub_rlm episode)"


def extract_code(reply: str) -> list[str]:
    """Fenced code blocks outside reasoning, in order; empty blocks are dropped (a linear scan: the
    regex it replaces rescanned the reply per unclosed fence)."""
    return [block for block in fenced_code_blocks(strip_reasoning(reply)) if block.strip()]


def _sub_task(parent: EpisodeTask, question: str, data: dict | None) -> EpisodeTask:
    if data is None:
        names, values = parent.channel_names, parent.values
    else:
        names = [str(k) for k in data]
        arrays = [np.asarray(v, dtype=np.float32).ravel() for v in data.values()]
        if not arrays or len({len(a) for a in arrays}) != 1 or len(arrays[0]) == 0:
            raise ValueError("sub_rlm data must be a non-empty dict of equal-length 1-D arrays")
        values = np.stack(arrays)
    return EpisodeTask(
        row_id=f"{parent.row_id}/sub",
        category=parent.category,
        regime=parent.regime,
        question=question,
        channel_names=list(names),
        values=values,
    )


class RLMEpisode(TurnLoop):
    """The rlm turn loop: code blocks are the actions, the kernel's output the environment's response."""

    def __init__(
        self,
        agent: Agent,
        task: EpisodeTask,
        cfg: RLMSettings,
        *,
        image: bool,
        depth: int,
        budget: EpisodeBudget | None = None,
    ):
        super().__init__(agent, task, cfg, budget=budget)
        self.image, self.depth = image, depth
        self.sandbox = Sandbox(
            task.series,
            capture_figures=image,
            max_figures=cfg.max_figures,
            sub_rlm_handler=self.sub_rlm if depth > 0 else None,
            files=task.files,
            **cfg.kernel_limits(),
        )

    def sub_rlm(self, question: str, data: dict | None) -> str:
        """A nested episode at depth - 1 in its own kernel; its cost, calls and time are this row's."""
        result, budget = self.result, self.budget
        if budget.sub_rlm_calls >= self.cfg.max_sub_rlm_calls:
            result.attributes["sub_rlm_refused"] = str(int(result.attributes.get("sub_rlm_refused", 0)) + 1)
            raise RuntimeError(f"refused: this episode's {self.cfg.max_sub_rlm_calls} sub_rlm calls are spent")
        budget.sub_rlm_calls += 1
        sub_task = _sub_task(self.task, question, data)
        try:
            self.check_caps()  # a spent cap ends the row here, before another kernel starts
            sub = nested(
                result,
                lambda: RLMEpisode(
                    self.agent, sub_task, self.cfg, image=self.image, depth=self.depth - 1, budget=budget
                ).run(),
            )
        except EpisodeError as exc:
            if exc.kind == "cell_timeout":  # only the calling cell's time is spent: the cell is cut as usual
                raise RuntimeError(f"sub_rlm stopped: {exc}") from None
            where = "" if exc.detail.endswith(SUB_NOTE) else SUB_NOTE
            raise EpisodeError(exc.kind, f"{exc.detail}{where}", result) from exc
        result.sub_calls += 1 + sub.sub_calls
        result.sub_call_tokens += sub.input_tokens + sub.output_tokens + sub.sub_call_tokens
        result.transcript.append(
            {"role": "sub_rlm", "question": question, "final": sub.final_message, "turns": sub.turns}
        )
        return sub.final_message

    def environment(self):
        return started_behind(self.sandbox)  # the first reply needs no kernel: it is asked while the jail starts

    def open(self) -> None:
        cfg = self.cfg
        system = rlm_system_prompt(
            image=self.image, depth=self.depth, max_turns=cfg.max_turns, obs_chars=cfg.observation_chars
        )
        self.messages = [Message("system", system), Message("user", self.task.question)]
        self.result.transcript += [
            {"role": "system", "content": system},
            {"role": "user", "content": self.task.question},
        ]

    def info(self):
        return self.task.info(code_execution=True)

    def actions(self, completion: Completion, turn: int) -> list[str]:
        return extract_code(completion.text)

    def respond(self, completion: Completion, actions: list[str], turn: int) -> bool:
        cfg = self.cfg
        outputs, images, events = [], [], []
        skipped, blocks = max(0, len(actions) - cfg.max_blocks_per_reply), actions[: cfg.max_blocks_per_reply]
        for code in blocks:
            remaining = self.remaining_s()
            if remaining is not None and remaining <= 0:
                break  # the episode's wall clock is spent: the check after this turn ends it
            cell = self.sandbox.run(code, timeout_s=remaining)
            self.result.code_cells += 1
            outputs.append(cell.observation(max_chars=10 * cfg.observation_chars))
            images.extend(cell.images)
            events.append(
                {
                    "code": code,
                    "timed_out": cell.timed_out,
                    "restarted": cell.restarted,
                    "seconds": round(cell.seconds, 3),
                }
            )
            if cell.restarted:  # the row is an error (the cell is kept in its transcript)
                self.result.transcript.append({"role": "tool", "turn": turn, "cells": events})
                end_if_kernel_lost(cell, self.result)
        if skipped:
            outputs.append(f"[{skipped} more code block(s) not run: at most {cfg.max_blocks_per_reply} per reply]")
        images = images[: cfg.max_figures] if self.image else []
        observation = truncate_observation(observation_message(outputs, len(images)), cfg.observation_chars)
        self.messages.append(Message("user", observation, images=images))
        self.result.transcript.append(
            {
                "role": "tool",
                "turn": turn,
                "cells": events,
                "observation": observation,
                "images": [hashlib.sha256(png).hexdigest()[:16] for png in images],
            }
        )
        return False


def run_rlm(
    model: Agent, task: EpisodeTask, cfg: RLMSettings, *, image: bool, depth: int | None = None
) -> EpisodeResult:
    return RLMEpisode(model, task, cfg, image=image, depth=cfg.depth if depth is None else depth).run()


class RLM(Harness[RLMSettings]):
    """`rlm`: the model writes Python into a jailed kernel that holds the series (spec/harness.md)."""

    kernel = True
    turn_rows = True

    def run(self, agent: Agent, task: EpisodeTask, cfg: RLMSettings) -> EpisodeResult:
        return run_rlm(agent, task, cfg, image=bool(self.images))


class RLMImage(RLM):
    """`rlm-image`: figures the code draws come back with the observation."""

    images = "observations"
