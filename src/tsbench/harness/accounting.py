"""How an episode's model calls are accounted for, kept in one place.

- What an episode spent is kept when it fails: a model call that finally fails carries the
  episode's result so far (`spending`), so its error row keeps turns, tokens, cost and transcript.
  Where a harness kept nothing (the jail failed, a bug), `play` falls back to a `CallLedger`, which
  saw every call the agent answered and the conversation as it stood.
- A nested episode (sub_rlm) spends for its parent's row: `nested` adds its cost and its calls
  (marked "sub") to the parent, also when it fails.
- A reply stopped by the token cap (finish_reason "length") is never the final answer: it may have
  been cut inside a code block or mid-answer. While turns remain, the model is told and the episode
  goes on (the forced-final rule still governs the last turn); a cut-off last reply leaves the
  episode without an answer. The row counts such replies in `truncated_replies`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tsbench.core.episode import EpisodeError, EpisodeResult
from tsbench.models.base import Agent, Completion, Message, ModelError

CUT_OFF_NOTICE = (
    "Your last reply reached the token limit and was cut off, so it was not taken as your answer. "
    "Continue, more briefly."
)


def cut_off(completion: Any) -> bool:
    """The reply was stopped by the token cap."""
    return (getattr(completion, "extra", None) or {}).get("finish_reason") == "length"


def unfinished(completion: Any, cfg: Any) -> bool:
    """A reply the token cap cut off, which is therefore no final answer, unless the run's settings
    take cut replies as answers (`answer_cut_replies`, for rewards that read short capped replies)."""
    return cut_off(completion) and not cfg.answer_cut_replies


@contextmanager
def spending(result: EpisodeResult) -> Iterator[None]:
    """Around a model call: a ModelError leaving it carries `result` (the episode so far)."""
    try:
        yield
    except ModelError as exc:
        if exc.result is None:
            exc.result = result
        raise


def nested(parent: EpisodeResult, play_sub: Callable[[], EpisodeResult]) -> EpisodeResult:
    """Run a nested episode; its cost and calls join `parent`'s (its tokens are the caller's to count
    as sub-call tokens). A ModelError or EpisodeError (a cap) passes on, after what the sub-episode had
    spent is added."""
    try:
        sub = play_sub()
    except (ModelError, EpisodeError) as exc:
        spent = exc.result if isinstance(exc.result, EpisodeResult) else None
        if spent is not None:
            failed = [{"turn": spent.turns + 1, **exc.accounting()}] if isinstance(exc, ModelError) else []
            _absorb(parent, spent, failed)
            parent.sub_calls += 1 + spent.sub_calls
            parent.sub_call_tokens += spent.input_tokens + spent.output_tokens + spent.sub_call_tokens
        raise
    _absorb(parent, sub)
    return sub


def _absorb(parent: EpisodeResult, sub: EpisodeResult, extra_calls: list[dict[str, Any]] = ()) -> None:
    if sub.cost_usd is not None:
        parent.cost_usd = (parent.cost_usd or 0.0) + sub.cost_usd
    parent.calls += [{**call, "sub": True} for call in [*sub.calls, *extra_calls]]


class CallLedger(Agent):
    """The agent as the harness sees it: an Agent that answers as `agent` does, keeping every answered
    call (with the message list it was given, which the harness goes on extending)."""

    def __init__(self, agent: Agent):
        self.agent, self.name, self.plays = agent, agent.name, agent.plays
        self.completions: list[Completion] = []
        self._messages: list[Message] | None = None

    def generate(self, messages: list[Message], **kwargs: Any) -> Completion:
        self._messages = messages
        completion = self.agent.generate(messages, **kwargs)
        self.completions.append(completion)
        return completion

    def answer(self, task: Any) -> str:
        return self.agent.answer(task)

    def close(self) -> None:
        self.agent.close()

    # what fits the agent's context (models/context.py, harness/text_budget.py): the agent's, when it says
    @property
    def context_tokens(self) -> int | None:
        return getattr(self.agent, "context_tokens", None)

    @property
    def max_new_tokens(self) -> int | None:
        return getattr(self.agent, "max_new_tokens", None)

    @property
    def count_tokens(self) -> Callable[[list[Message]], int] | None:
        return getattr(self.agent, "count_tokens", None)

    def partial(self) -> EpisodeResult | None:
        """What the calls so far spent, as an EpisodeResult (None when no call was answered)."""
        if not self.completions:
            return None
        result = EpisodeResult()
        for completion in self.completions:
            result.add_completion(completion)
        result.transcript = [
            {"role": m.role, "content": m.content, **({"images": len(m.images)} if m.images else {})}
            for m in self._messages or []
        ]
        result.attributes["transcript_from"] = "messages"  # the harness kept no transcript of its own
        return result


# What the ledger can do is what its agent can (each asked of the agent, by name).
for _ask in ("chats", "native_tools", "sees_images", "reads_series", "wants_plot", "harnesses", "reference"):
    setattr(CallLedger, _ask, lambda self, _ask=_ask: getattr(self.agent, _ask)())
