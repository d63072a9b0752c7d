"""Every reader of model output is total and linear-time (issue 44): it never raises on any text, and
its cost grows linearly. Before: CiK's fenced-answer regex took 39 s on 240 KB of unclosed fences,
"[" * 5000 raised RecursionError out of CiK's read_reply, "answer" + spaces took TimeClaw's letter
reader cubic time (TSAIA, TSRBench), and <class>, <tool_call> and code fences were quadratic.

The readers and the attacks are listed in reader_cases.py (scripts/reader_timings.py times the same
ones at any size). Linearity is checked as a ratio, not a clock: CPU time on 4n characters against n,
the best of two tries each, so a loaded machine slows both sides alike."""

from __future__ import annotations

import json
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reader_cases import ATTACKS, readers
from tsbench.core.text import fenced_code_blocks, fenced_json_blocks, json_values

READERS = readers()
FRAGMENTS = [
    "{", "}", "[", "]", '"', "\\", ":", ",", " ", "\n", "```", "```json\n", "```python\n", "<think>",
    "</think>", "<class>", "</class>", "<tool_call>", "answer:", "Answer is ", "final answer", "1", "-2.5e3",
    '{"answer": "A"}', '{"forecast": [1, 2, 3]}', "\x00", "\ud800", "\udfff", "\x1b[2J", "\x1b]0;t\x07", "é",
]  # fmt: skip
TEXTS = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join),
    st.tuples(st.sampled_from(FRAGMENTS), st.integers(1, 3000)).map(lambda pair: pair[0] * pair[1]),
)
FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.mark.parametrize("name", sorted(READERS))
def test_reader_never_raises(name):
    reader = READERS[name]

    @FUZZ
    @given(TEXTS)
    def check(text):
        reader(text)

    check()
    for attack in ATTACKS.values():  # the known attacks at a size that broke them (deep nesting included)
        reader(attack(20_000))


def _cpu_seconds(reader, text: str) -> float:
    best = float("inf")
    for _ in range(2):
        began = time.process_time()
        reader(text)
        best = min(best, time.process_time() - began)
    return best


@pytest.mark.parametrize("name", sorted(READERS))
def test_reader_cost_grows_linearly(name):
    reader = READERS[name]
    slow = []
    for attack, make in ATTACKS.items():
        small, large = _cpu_seconds(reader, make(5_000)), _cpu_seconds(reader, make(20_000))
        if large > 8 * small + 0.03:  # linear: about 4x; quadratic: 16x
            slow.append(f"{attack}: {small:.4f}s -> {large:.4f}s")
    assert not slow, slow


# The one-pass scans find exactly what the regexes they replace found.
_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\}|\[.*?\])\s*```", re.DOTALL)
_CODE = re.compile(r"```[ \t]*(?:python3?|py|ipython)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_PIECES = st.lists(
    st.sampled_from(["`", "```", "json", "{", "}", "[", "]", " ", "\n", "\t", "x", "python", "Py", "ipython", "3"]),
    max_size=16,
).map("".join)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(_PIECES)
def test_fence_scans_match_the_regexes(text):
    assert fenced_json_blocks(text) == _FENCED.findall(text)
    assert fenced_code_blocks(text) == _CODE.findall(text)


def _raw_decode_scan(text: str) -> list:
    decoder, found, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = decoder.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            found.append((i, end, value))
            i = end
        else:
            i += 1
    return found


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(["{", "}", "[", "]", '"', "\\", ":", ",", "1", " ", '"a"', "null", "\n"]), max_size=16))
def test_json_values_match_raw_decode_at_every_bracket(pieces):
    text = "".join(pieces)
    assert json_values(text) == _raw_decode_scan(text)


_TAGS = ["<think>", "</think>", "<class>", "</class>", "<extension>", "</extension>", " ", "\n", "a", "</Class>"]


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_TAGS), max_size=12))
def test_is_trace_matches_the_trace_regex(pieces):
    from tsbench.train.sft_timemaster import TRACE, is_trace

    text = "".join(pieces)
    assert is_trace(text) == bool(TRACE.match(text))
