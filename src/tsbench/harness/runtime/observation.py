"""What a code cell produced, and how it is cut down to what the model is shown.

Output is cut at several places (the host keeps a bounded buffer per cell, a cell's observation is
cut, then a turn's observation), and every cut leaves one marker, `[... truncated N characters ...]`.
When a later cut removes an earlier marker, the new marker adds the earlier count to its own, so
the marker the model finally sees counts every character of real output that it does not see.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field

from tsbench.harness.runtime.message_bound import refusal_marker

__all__ = ["OBSERVATION_MAX_CHARS", "CellOutput", "CellResult", "dropped_characters", "truncate_observation"]

OBSERVATION_MAX_CHARS = 8192
KEEP_CHARS = 256 * 1024  # per stream in the host's buffer, far above what an observation shows

_MARKER = "\n[... truncated {} characters ...]\n"
# A marker as written, or inside a JSON string (a tool's observation), where its newlines are escaped.
_MARKER_PATTERN = re.compile(r"(?:\n|\\n)\[\.\.\. truncated (\d+) characters \.\.\.\](?:\n|\\n)")
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


def marker(count: int) -> str:
    return _MARKER.format(count)


def dropped_characters(text: str) -> int:
    """Characters of real output that the markers in `text` stand for."""
    return sum(int(match.group(1)) for match in _MARKER_PATTERN.finditer(text))


def truncate_observation(text: str, max_chars: int = OBSERVATION_MAX_CHARS) -> str:
    """Cut `text` to at most `max_chars`, with one marker saying how many characters were cut.

    Keeps the head and the tail (a quarter of the room): a traceback at the end of a long output is
    usually what the model most needs to see. Markers of earlier cuts that fall in the removed
    middle are folded into the new one (never split), so the count stays the real one.
    """
    if len(text) <= max_chars:
        return text
    upper_bound = len(text) + dropped_characters(text)
    room = max_chars - len(marker(upper_bound))
    if room <= 0:
        return text[:max_chars]
    tail_chars = room // 4
    head_end, tail_start = room - tail_chars, len(text) - tail_chars
    # Never split an earlier marker: move the cut to its edges (the kept parts only shrink).
    for match in _MARKER_PATTERN.finditer(text):
        if match.start() < head_end < match.end():
            head_end = match.start()
        if match.start() < tail_start < match.end():
            tail_start = match.end()
    removed = text[head_end:tail_start]
    inner = list(_MARKER_PATTERN.finditer(removed))
    real = len(removed) - sum(len(m.group(0)) for m in inner) + sum(int(m.group(1)) for m in inner)
    return text[:head_end] + marker(real) + text[tail_start:]


@dataclass
class CellResult:
    """What one code cell produced, as the harness shows it to the model."""

    stdout: str = ""  # stdout and stderr, interleaved as they arrived
    result_repr: str = ""  # text/plain of the last expression's value
    error: str = ""  # traceback without colour codes, or a short reason from the sandbox
    images: list[bytes] = field(default_factory=list)  # PNG bytes, at most max_figures
    timed_out: bool = False
    restarted: bool = False
    seconds: float = 0.0

    def observation(self, max_chars: int = OBSERVATION_MAX_CHARS) -> str:
        """stdout, the result and the error, joined and truncated for the model."""
        parts = [self.stdout.rstrip("\n"), self.result_repr, self.error.rstrip("\n")]
        return truncate_observation("\n".join(part for part in parts if part), max_chars)


class CellOutput:
    """Gathers one cell's iopub messages with bounded memory: a cell that prints for minutes must
    not fill the host. Past `keep_chars` of stdout the middle is dropped and counted; the head and
    the latest output are kept."""

    def __init__(self, max_figures: int, keep_chars: int = KEEP_CHARS) -> None:
        self.max_figures = max_figures
        self.keep_chars = keep_chars
        self.result_repr = ""
        self.error = ""
        self.images: list[bytes] = []
        self._head = ""
        self._tail: list[str] = []
        self._tail_chars = 0
        self._dropped_chars = 0
        self.refused_messages = 0  # oversized messages of this cell the host refused (message_bound.py)

    def add(self, message: dict) -> bool:
        """Fold one iopub message in; True when the kernel went idle."""
        kind, content = message["msg_type"], message["content"]
        if kind == "stream":
            self._add_text(content["text"])
        elif kind == "execute_result":
            self.result_repr = truncate_observation(content["data"].get("text/plain", ""), self.keep_chars)
        elif kind == "display_data":
            data = content["data"]
            if "image/png" in data:
                if len(self.images) < self.max_figures:
                    self.images.append(base64.b64decode(data["image/png"]))
            elif "text/plain" in data:
                self._add_text(data["text/plain"] + "\n")
        elif kind == "error":
            traceback = _ANSI_ESCAPE.sub("", "\n".join(content["traceback"]))
            self.error = truncate_observation(traceback, self.keep_chars)
        elif kind == "status":
            return content["execution_state"] == "idle"
        return False

    def _add_text(self, text: str) -> None:
        room = max(0, self.keep_chars - len(self._head))
        if room:
            self._head += text[:room]
        rest_chars = len(text) - room
        if rest_chars <= 0:
            return
        if rest_chars >= self.keep_chars:  # this text alone fills the tail: never copy more of it than that
            self._dropped_chars += self._tail_chars + rest_chars - self.keep_chars
            self._tail = [text[-self.keep_chars :]]
            self._tail_chars = self.keep_chars
            return
        rest = text[room:]
        self._tail.append(rest)
        self._tail_chars += len(rest)
        if self._tail_chars > 2 * self.keep_chars:  # trim rarely, so appends stay cheap
            tail = "".join(self._tail)
            self._dropped_chars += len(tail) - self.keep_chars
            self._tail = [tail[-self.keep_chars :]]
            self._tail_chars = self.keep_chars

    def result(self) -> CellResult:
        cut = marker(self._dropped_chars) if self._dropped_chars else ""
        refused = refusal_marker(self.refused_messages) if self.refused_messages else ""
        stdout = self._head + cut + "".join(self._tail) + refused
        return CellResult(stdout=stdout, result_repr=self.result_repr, error=self.error, images=self.images)


def strip_ansi(text: str) -> str:
    return _ANSI_ESCAPE.sub("", text)
