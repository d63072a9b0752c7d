"""One chat interface for every model: messages (+ optional PNG images) in, text and usage out.

Providers live in sibling modules and are chosen by a `provider/name` string (see registry.py).
Everything is synchronous; the eval runner gets concurrency from a thread pool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tsbench.core.episode import TaskInfo


@dataclass
class ToolCall:
    """One native function call a model asked for: `arguments` is the JSON text it wrote (maybe invalid)."""

    id: str
    name: str
    arguments: str = "{}"


@dataclass
class Message:
    role: str  # "system" | "user" | "assistant" | "tool" (a native tool result)
    content: str
    images: list[bytes] = field(default_factory=list)  # PNG bytes, sent as image parts
    # Native function calling only (models with `native_tools = True`): the calls an assistant
    # message made, and on a "tool" message the id of the call it answers.
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None


@dataclass
class Completion:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float | None = None
    # Token ids as generated (local models only); training keeps them and never re-tokenises.
    prompt_token_ids: list[int] | None = None
    output_token_ids: list[int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[ToolCall] = field(default_factory=list)  # native function calls (see ChatModel)

    def accounting(self) -> dict[str, Any]:
        """What this call is accounted by in a results row: why it stopped, its usage (or "missing"
        when the server sent none), tokens, cost, attempts and time."""
        extra = self.extra
        return {
            "finish_reason": extra.get("finish_reason"),
            "usage": "missing" if extra.get("usage_missing") else "reported",
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "attempts": extra.get("attempts", 1),
            "failed_attempts": list(extra.get("failed_attempts") or []),
            "latency_s": round(float(self.latency_s), 3),
            "wall_s": round(float(extra.get("wall_s", self.latency_s)), 3),
        }


# The kinds of ModelError; the first four are transient and retried (see retry.py).
RETRYABLE_KINDS = frozenset({"rate_limit", "server", "timeout", "connection"})
ERROR_KINDS = RETRYABLE_KINDS | {"bad_request"}


class ModelError(Exception):
    """A failed model call. `kind` drives retry policy: rate_limit, server, timeout, connection, bad_request.

    `retry_after_s` carries a server's Retry-After hint, `status_code` the HTTP status when there was one,
    and `attempts` and `elapsed_s` are set by the retry loop so an error row can say how hard we tried.
    A harness may attach the episode's partial result (`result`) so the error row keeps what was spent.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        retry_after_s: float | None = None,
        status_code: int | None = None,
    ):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.retry_after_s = retry_after_s
        self.status_code = status_code
        self.attempts = 1
        self.elapsed_s: float | None = None
        self.result: Any = None  # the episode's EpisodeResult so far, attached by the harness

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS

    def accounting(self) -> dict[str, Any]:
        """The call an episode died on: error kind, HTTP status, attempts and the time its retries took."""
        return {
            "error": self.kind,
            "status_code": self.status_code,
            "attempts": self.attempts,
            "wall_s": None if self.elapsed_s is None else round(self.elapsed_s, 3),
        }


class ModelUnavailableError(ValueError):
    """A model that can't be built on this machine (an optional package is missing): a one-line user error."""


@runtime_checkable
class ChatModel(Protocol):
    """`generate` as below. A model whose `native_tools` attribute is True also accepts the keywords
    `tools` (OpenAI function specs: [{"type": "function", "function": {...}}]) and `tool_choice`, and
    reports the calls it made in `Completion.tool_calls`; harnesses pass them to no other model."""

    name: str  # the provider/name string it was built from

    def generate(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        task: TaskInfo | None = None,
    ) -> Completion: ...

    def close(self) -> None: ...
