"""The cap on a model's final answer: a 100 MB answer must not reach the scorer or the row whole.

`cap_final_answer` keeps the first `max_chars` characters, ends them with a marker saying how many were
cut, records the count in the row's attributes (`final_answer_cut_chars`), and cuts the transcript's
copy of the answer the same way (the row builder then stores it once: results/records.py).
"""

from __future__ import annotations

from tsbench.core.episode import EpisodeResult

CUT_ATTRIBUTE = "final_answer_cut_chars"


def answer_marker(count: int) -> str:
    return f"\n[... final answer cut: {count} more characters ...]"


def cap_final_answer(result: EpisodeResult, max_chars: int) -> EpisodeResult:
    """`result` with its final message (and the transcript's copy of it) cut to `max_chars`."""
    message = result.final_message
    if len(message) <= max_chars:
        return result
    cut = message[:max_chars] + answer_marker(len(message) - max_chars)
    for event in reversed(result.transcript):
        if event.get("content") is message or event.get("content") == message:
            event["content"] = cut
            break
    result.final_message = cut
    result.attributes[CUT_ATTRIBUTE] = str(len(message) - max_chars)
    return result
