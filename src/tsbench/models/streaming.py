"""Tokens counted as they are generated, so a progress line moves before a row ends.

In-process models (`local/`) add each call's prompt when it starts and each new token as `generate`
yields it to one process-wide meter; `tsbench eval` shows the meter's tokens beside those of the
finished rows. A model that cannot stream (an API call) adds nothing, and the line moves per row.
"""

from __future__ import annotations

import threading


class TokenMeter:
    """Running totals of the tokens in-process models read and wrote (thread-safe, never reset)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.input_tokens = 0
        self.output_tokens = 0

    def add(self, *, input_tokens: int = 0, output_tokens: int = 0) -> None:
        with self._lock:
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens

    def total(self) -> int:
        with self._lock:
            return self.input_tokens + self.output_tokens


METER = TokenMeter()


class MeterStreamer:
    """A transformers streamer (`generate(streamer=...)`: put() per step, end() at the end) that adds
    the prompt once and every generated token to `meter`; batch rows count each."""

    def __init__(self, meter: TokenMeter = METER) -> None:
        self.meter = meter
        self._prompt_seen = False

    def put(self, value) -> None:
        count = int(value.numel())
        if not self._prompt_seen:  # generate's first put is the prompt
            self._prompt_seen = True
            self.meter.add(input_tokens=count)
        else:
            self.meter.add(output_tokens=count)

    def end(self) -> None:
        self._prompt_seen = False
