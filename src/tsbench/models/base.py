"""One chat interface for every model: messages (+ optional PNG images) in, text and usage out.

Providers live in sibling modules and are chosen by a `provider/name` string (see registry.py).
Everything is synchronous; the eval runner gets concurrency from a thread pool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tsbench.core.episode import TaskInfo
from tsbench.core.unicode_text import ALTERED_ATTRIBUTE


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
        """What this call is accounted by in a results row: why it stopped, its usage ("missing" when the
        server sent none, "invalid" when a count was no finite non-negative integer: the tokens are then
        our estimate and `usage_rejected` what the server sent), tokens, cost, attempts and time."""
        extra = self.extra
        usage = "missing" if extra.get("usage_missing") else "invalid" if extra.get("usage_invalid") else "reported"
        flags: dict[str, Any] = {}
        if usage == "invalid":
            flags["usage_rejected"] = dict(extra["usage_invalid"])
        if extra.get("tool_calls_dropped"):
            flags["tool_calls_dropped"] = extra["tool_calls_dropped"]
        return {
            "finish_reason": extra.get("finish_reason"),
            "usage": usage,
            **flags,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "attempts": extra.get("attempts", 1),
            "failed_attempts": list(extra.get("failed_attempts") or []),
            "latency_s": round(float(self.latency_s), 3),
            "wall_s": round(float(extra.get("wall_s", self.latency_s)), 3),
            **({ALTERED_ATTRIBUTE: extra[ALTERED_ATTRIBUTE]} if extra.get(ALTERED_ATTRIBUTE) else {}),
        }


# The transient kinds of ModelError, retried (see retry.py); bad_request is not.
RETRYABLE_KINDS = frozenset({"rate_limit", "server", "timeout", "connection"})


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
        self.budget: str | None = None  # the deadline that ended it (core/deadline.py), when one did
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


class Agent:
    """Whatever plays an episode: a chat model (models/) or a reference policy (baselines/).

    What it can do is asked through the methods below, each with its default (as inspect_ai's
    ModelAPI declares its models' abilities), so callers never probe. The class-level facts are
    classmethods, so a provider can answer them before it builds a model (models/registry.py:
    refusing a pairing before a server starts or weights load)."""

    name: str = ""  # the spec string it was built from (provider/name)
    plays: tuple[str, ...] | None = None  # the only harnesses it can play (None: any its capabilities allow)

    def generate(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        task: TaskInfo | None = None,
        **kwargs: Any,
    ) -> Completion:
        """One reply to `messages`. With `native_tools()` it also takes `tools` (OpenAI function specs)
        and `tool_choice` and reports its calls in `Completion.tool_calls`; with `reads_series()` it
        takes `series` (channels x L) beside the messages."""
        raise NotImplementedError(f"{self.name} reads no messages")

    def answer(self, task: Any) -> str:
        """The final message from the task itself, series included (agents that do not `chats()`)."""
        raise NotImplementedError(f"{self.name} does not answer from the task itself")

    def close(self) -> None:
        """Release what it holds (clients, servers, weights). Default: nothing."""

    # -- what it can do --------------------------------------------------------------------------
    @classmethod
    def chats(cls) -> bool:
        """Reads messages and replies (False: it answers from the task under a reference harness)."""
        return True

    @classmethod
    def native_tools(cls) -> bool:
        """Takes `tools=` / `tool_choice=` in `generate` (native function calling)."""
        return False

    @classmethod
    def sees_images(cls) -> bool:
        """Image parts of a message reach it (False: a text-only model drops them)."""
        return True

    @classmethod
    def reads_series(cls) -> bool:
        """Takes the series beside the messages (a time-series language model)."""
        return False

    @classmethod
    def wants_plot(cls) -> bool:
        """Wants the rendered plot of the series on the user turn as well (with `reads_series`)."""
        return False

    def harnesses(self) -> tuple[str, ...] | None:
        """The only harnesses it can play (None: any harness its capabilities allow)."""
        return self.plays

    def default_harness(self) -> str:
        """The harness a run uses when neither the command nor the family names one."""
        return (self.harnesses() or ("rlm",))[0]

    def reference(self) -> str | None:
        """What a reference policy knows that a model does not, shown beside every number (None: nothing)."""
        return None


ChatModel = Agent  # the interface harnesses talk to


class ForeignAgent(Agent):
    """An object that plays episodes without subclassing Agent (a plugin's model, a test double): its
    old-style attributes (`native_tools`, `harnesses`, `reference`, `wants_plot`) read once, here."""

    def __init__(self, agent: Any):
        self.inner = agent
        self.name = str(getattr(agent, "name", type(agent).__name__))
        self._chats = callable(getattr(agent, "generate", None))
        self._native = bool(getattr(agent, "native_tools", False))
        self._plays = getattr(agent, "harnesses", None)
        self._reference = getattr(agent, "reference", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def generate(self, messages, **kwargs):
        return self.inner.generate(messages, **kwargs)

    def answer(self, task):
        return self.inner.answer(task)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def chats(self) -> bool:  # type: ignore[override]
        return self._chats

    def native_tools(self) -> bool:  # type: ignore[override]
        return self._native

    def harnesses(self) -> tuple[str, ...] | None:
        return tuple(self._plays) if self._plays is not None else None

    def reference(self) -> str | None:
        return self._reference


def as_agent(agent: Any) -> Agent:
    """`agent` as an Agent (anything else is read through ForeignAgent)."""
    return agent if isinstance(agent, Agent) else ForeignAgent(agent)
