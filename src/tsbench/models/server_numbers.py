"""What a server's reply says, read without trusting it.

The openai client builds its response objects without validation, so a reply carries whatever the
server wrote: usage counts of -1e6, NaN, Infinity, 2.5, 1e18 or "12"; `content` as a list of parts;
100,000 tool calls. Added as they came, a negative count lifted the episode's token cap and made a
cost of -$1,000,000, and a NaN or fractional count lost the row from samples.parquet (every resume
called the model again). So each number is checked before it is added: a token count is a finite
non-negative integer below `MAX_PLAUSIBLE_TOKENS`, else it is unknown; the caps then count our own
estimate (`estimate_tokens`), the call is flagged (`usage` "invalid" in its accounting, with what
the server sent) and its cost is unknown, never negative.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from tsbench.core.answers import as_integer

__all__ = [
    "MAX_PLAUSIBLE_TOKENS",
    "MAX_TOOL_CALLS_KEPT",
    "Usage",
    "content_text",
    "estimate_tokens",
    "non_negative_cost",
    "read_usage",
    "token_count",
]

# No model reads or writes 100M tokens in one call; a count above it is a server's error, not spend.
MAX_PLAUSIBLE_TOKENS = 100_000_000
# Tool calls of one reply kept at all: far above any harness's per-reply limit (tools: 8 by default).
MAX_TOOL_CALLS_KEPT = 256
_SHOWN_CHARS = 40  # of a rejected value, in the flag


def token_count(value: Any) -> int | None:
    """`value` as a token count, or None when it is not a finite non-negative integer (bools, strings,
    fractions, NaN, infinities, negatives and implausibly large numbers are all None)."""
    number = as_integer(value)
    return number if number is not None and 0 <= number <= MAX_PLAUSIBLE_TOKENS else None


def _shown(value: Any) -> str:
    return repr(value)[:_SHOWN_CHARS]


@dataclass
class Usage:
    """A reply's usage as far as it can be trusted: None counts are unknown."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # flags for Completion.extra

    @property
    def trusted(self) -> bool:
        return not self.extra.get("usage_missing") and not self.extra.get("usage_invalid")


def read_usage(usage: Any) -> Usage:
    """The usage object of a reply (None: the server sent none), each count checked."""
    if usage is None:
        return Usage(extra={"usage_missing": True})
    counts, rejected = {}, {}
    for name in ("prompt_tokens", "completion_tokens"):
        raw = getattr(usage, name, None) if not isinstance(usage, dict) else usage.get(name)
        counts[name] = token_count(raw)
        if counts[name] is None:
            rejected[name] = _shown(raw)
    extra: dict[str, Any] = {}
    if rejected:
        extra["usage_invalid"] = rejected
    details = getattr(usage, "completion_tokens_details", None) if not isinstance(usage, dict) else None
    reasoning = getattr(details, "reasoning_tokens", None) if details is not None else None
    if reasoning is not None and token_count(reasoning):
        extra["reasoning_tokens"] = token_count(reasoning)
    return Usage(counts["prompt_tokens"], counts["completion_tokens"], extra)


def estimate_tokens(texts: Any) -> int:
    """Our own rough count of the tokens in `texts` (strings, message dicts, content parts): a UTF-8
    byte is about a quarter of a token in the tokenizers of the chat models served today."""
    return max(1, math.ceil(_size(texts) / 4))


def _size(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "replace"))
    if isinstance(value, dict):
        return sum(_size(v) for k, v in value.items() if k in ("content", "text", "arguments", "tool_calls"))
    if isinstance(value, (list, tuple)):
        return sum(_size(item) for item in value)
    return 0


def content_text(content: Any) -> str:
    """A message's `content` as text: a string as it is; a list of parts (OpenAI content-part arrays,
    or plain strings) as their texts joined; a lone part dict as its text; anything else as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, (list, tuple)):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                text = part.get("text", part.get("refusal"))
                if isinstance(text, dict):  # {"type": "text", "text": {"value": ...}} (assistants-style)
                    text = text.get("value")
                if isinstance(text, str):
                    texts.append(text)
            else:
                text = getattr(part, "text", None)
                if isinstance(text, str):
                    texts.append(text)
        return "".join(texts)
    try:
        return json.dumps(content, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return ""


def non_negative_cost(cost: float | None) -> float | None:
    """A cost is finite and never negative; anything else is unknown."""
    if cost is None or not isinstance(cost, (int, float)) or not math.isfinite(cost) or cost < 0:
        return None
    return float(cost)
