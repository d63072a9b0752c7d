"""inspect_ai's model as our ChatModel, so our harnesses run inside `inspect eval`.

A harness is synchronous and runs in a worker thread; each `generate` hands the call back to
inspect's event loop (anyio.from_thread), so inspect does the provider call, its retries, caching,
limits and usage accounting as for any of its own solvers.
"""

from __future__ import annotations

import base64
import functools
import time

import anyio.from_thread
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    ContentImage,
    ContentText,
    GenerateConfig,
    Model,
)

from tsbench.models.base import Agent, Completion, Message, TaskInfo


def _content(message: Message):
    if not message.images:
        return message.content
    images = [ContentImage(image="data:image/png;base64," + base64.b64encode(png).decode()) for png in message.images]
    return [ContentText(text=message.content), *images]


def to_inspect(messages: list[Message]) -> list[ChatMessage]:
    """Our messages (system, user, assistant; tools go through the JSON text protocol) in inspect's types."""
    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    return [kinds.get(m.role, ChatMessageUser)(content=_content(m)) for m in messages]


class InspectChatModel(Agent):
    """Our chat interface over an inspect Model; call `generate` from a worker thread only (no
    native function calling: the tools harness speaks its JSON text protocol through inspect)."""

    def __init__(self, model: Model):
        self.model = model
        self.name = str(model)

    def generate(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        task: TaskInfo | None = None,
    ) -> Completion:
        config = GenerateConfig(max_tokens=max_tokens, temperature=temperature)
        started = time.perf_counter()
        output = anyio.from_thread.run(functools.partial(self.model.generate, to_inspect(messages), config=config))
        usage = output.usage
        return Completion(
            text=output.completion,
            input_tokens=int(usage.input_tokens) if usage else 0,
            output_tokens=int(usage.output_tokens) if usage else 0,
            latency_s=time.perf_counter() - started,
            cost_usd=usage.total_cost if usage else None,
        )
