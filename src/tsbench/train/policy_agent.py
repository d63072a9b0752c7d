"""The live policy as an Agent, so rollouts run through the real harness (`tsbench.harness.play`).

`PolicyAgent` is one episode's Agent: it keeps that episode's turns (ids as generated) for the loss.
With `rendered=True` (reasoning_history as-rendered) every prompt is instead the template's render of the
whole conversation, exactly as eval's local model renders it, so a template that drops earlier reasoning
shows the policy in training what it shows it in eval; each turn then trains as its own row. A
vision-language policy keeps the first prompt's `Encoded` (images, conversation, pixels), which ride on
every request of the episode and which TRL re-renders for the loss forward.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tsbench.models.base import Agent, Completion, Message, ModelError, TaskInfo
from tsbench.train.backends import Request
from tsbench.train.batcher import Batcher
from tsbench.train.chat_tokens import ChatTokens

if TYPE_CHECKING:
    from tsbench.models.local_vlm import Encoded


@dataclass
class Turn:
    prompt_ids: list[int]
    output_ids: list[int]
    logprobs: list[float] | None
    limit: int = 0  # the most tokens the reply could take (its cap, or what was left of max_seq_len)

    def clipped(self, eos_ids: set[int]) -> bool:
        """The reply stopped at its cap, not at an end token."""
        return len(self.output_ids) >= self.limit and not (self.output_ids and self.output_ids[-1] in eos_ids)


@dataclass
class PolicyAgent(Agent):
    """The live policy for ONE episode; `turns` keeps every reply's ids as generated."""

    batcher: Batcher
    chat: ChatTokens
    max_new_tokens: int = 4096
    max_seq_len: int = 65536
    temperature: float = 1.0
    seed: int = 0
    name: str = "policy"
    turns: list[Turn] = field(default_factory=list)
    vision: Encoded | None = None  # the first prompt's (a vision-language policy): images, conversation, pixels
    rendered: bool = False  # every prompt re-rendered through the chat template, as eval renders it
    _history: list[tuple[str, str]] = field(default_factory=list)

    def generate(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        task: TaskInfo | None = None,
        **kwargs: object,
    ) -> Completion:
        started = time.perf_counter()
        if not self.turns:
            prompt, self.vision = self.chat.first_prompt_vision(messages)
        elif self.rendered:  # eval's context: the template decides what of the earlier replies stays
            prompt = self.chat.first_prompt(messages)
        else:
            if [(m.role, m.content) for m in messages[: len(self._history)]] != self._history:
                raise RuntimeError("the conversation changed between turns; its token ids would no longer match")
            last = self.turns[-1]
            prompt = (
                last.prompt_ids
                + last.output_ids
                + self.chat.continuation(last.output_ids, messages[len(self._history) :])
            )
        limit = min(max_tokens or self.max_new_tokens, self.max_seq_len - len(prompt))
        if limit < 1:
            raise ModelError(
                "bad_request",
                f"context full: a prompt of {len(prompt)} tokens leaves no room under max_seq_len {self.max_seq_len}",
            )
        temp = self.temperature if temperature is None else temperature
        seed = (self.seed + 7919 * len(self.turns)) % 2**31
        pixels = self.vision.inputs if self.vision is not None else {}
        images = list(self.vision.images) if self.vision is not None else []
        reply = self.batcher.generate(Request(prompt, limit, temp, seed, pixels, images))
        text = self.chat.decode(reply.ids)
        self.turns.append(Turn(prompt, list(reply.ids), reply.logprobs, limit))
        self._history = [(m.role, m.content) for m in messages] + [("assistant", text)]
        stopped = bool(reply.ids) and reply.ids[-1] in self.chat.eos_ids
        return Completion(
            text=text,
            input_tokens=len(prompt),
            output_tokens=len(reply.ids),
            latency_s=time.perf_counter() - started,
            prompt_token_ids=list(prompt),
            output_token_ids=list(reply.ids),
            extra={"finish_reason": "stop" if stopped else "length"},
        )

    def close(self) -> None:
        """The backend outlives the episode."""


def assemble(turns: Sequence[Turn]) -> tuple[list[int], list[int], list[int], list[float] | None]:
    """One episode as TRL wants it: (first prompt ids, completion ids, env mask, sampler logprobs).

    Turn k's prompt must begin with every id of the turns before it; the ids it adds (template
    glue, observation, next generation prompt) get mask 0, the model's outputs mask 1. Logprobs
    are given only when every turn has them (0.0 on masked ids)."""
    if not turns:
        return [], [], [], None
    prompt = list(turns[0].prompt_ids)
    ids, mask = list(prompt), []
    logprobs: list[float] | None = []
    for number, turn in enumerate(turns, 1):
        if turn.prompt_ids[: len(ids)] != ids:
            raise ValueError(f"turn {number}'s prompt does not extend the ids of the turns before it")
        shown = turn.prompt_ids[len(ids) :]
        ids += shown + turn.output_ids
        mask += [0] * len(shown) + [1] * len(turn.output_ids)
        if logprobs is not None and turn.logprobs is not None and len(turn.logprobs) == len(turn.output_ids):
            logprobs += [0.0] * len(shown) + list(turn.logprobs)
        else:
            logprobs = None
    return prompt, ids[len(prompt) :], mask, logprobs
