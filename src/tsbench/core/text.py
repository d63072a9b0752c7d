"""Text utilities every family and harness shares: reasoning stripping and JSON object spans.

Scoring is only as fair as extraction, so the rules are explicit. ``<think>...</think>`` blocks go;
an orphan ``</think>`` (chat templates often put the opening tag in the prompt) means everything
before it was reasoning; an unclosed ``<think>`` means everything after it is reasoning, so a
message cut off mid-thought has no answer. Brace matching respects JSON strings and escapes.
"""

from __future__ import annotations

import bisect
import json
import re

_THINK_TAG = re.compile(r"<(/?)think\s*>", re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """Remove ``<think>`` reasoning so JSON or answer lines inside it never count."""
    kept: list[str] = []
    position = 0
    inside = False
    for tag in _THINK_TAG.finditer(text):
        closing = tag.group(1) == "/"
        if inside:
            if closing:  # the first close ends the block; a later one is an orphan
                inside = False
                position = tag.end()
        elif closing:  # orphan close: all text so far was reasoning
            kept = []
            position = tag.end()
        else:
            kept.append(text[position : tag.start()])
            inside = True
    if not inside:
        kept.append(text[position:])
    return "".join(kept)


def json_object_spans(text: str) -> list[tuple[int, int]]:
    """Half-open spans of the balanced top-level ``{...}`` blocks of ``text``, in order."""
    closes: dict[int, int | None] = {}
    spans: list[tuple[int, int]] = []
    i = text.find("{")
    while i >= 0:
        end = balanced_end(text, i, closes, _BRACES)
        if end is None:
            i = text.find("{", i + 1)
        else:
            spans.append((i, end + 1))
            i = text.find("{", end + 1)
    return spans


def short_model_name(spec: str) -> str:
    """A model spec as run dirs and boards name it: a server that names its model by a local path
    (`transformers serve DIR`, vLLM on a folder) makes `openai//root/.cache/x/smollm2-135m`, shown
    as `openai/smollm2-135m`; hub ids (`vllm/Qwen/Qwen3.5-4B`) and relative paths stay whole."""
    provider, sep, name = spec.partition("/")
    if not sep or not name.startswith(("/", "~")):
        return spec
    tail = name.rstrip("/").rsplit("/", 1)[-1]
    return f"{provider}/{tail}" if tail and tail != "~" else spec


# -- linear scans over replies -----------------------------------------------------------------------
# A reply is up to a megabyte a model chooses: a lazy regex tried at every opening (```json ... ```,
# <tag> ... </tag>) rescans the rest of the text per opening, and `raw_decode` tried at every bracket
# reparses it, so a reply of unclosed openings cost quadratic time (240 KB of "```json\n{": 39 s).
# The scans below give the same matches in one pass; `json_values` bounds its failed parses.

_FENCE = "```"


def _fence_starts(text: str) -> list[int]:
    """Every index where ``` starts (overlapping: "````" has two)."""
    found, i = [], text.find(_FENCE)
    while i >= 0:
        found.append(i)
        i = text.find(_FENCE, i + 1)
    return found


def fenced_json_blocks(text: str) -> list[str]:
    """What ``re.findall(r"```(?:json)?\\s*(\\{.*?\\}|\\[.*?\\])\\s*```", text, re.DOTALL)`` returns, in
    linear time: the text from a fence's first ``{`` (or ``[``) to the nearest ``}`` (or ``]``) that is
    followed by nothing but white space and a closing fence."""
    fences = _fence_starts(text)
    if len(fences) < 2:
        return []
    # before[j]: the last non-space character before fence j (a block's closer sits there)
    before = []
    for k in fences:
        e = k - 1
        while e >= 0 and text[e].isspace():
            e -= 1
        before.append(e)
    # next_closing[c][j]: the first fence at or after j that a `c` ends a block at
    next_closing = {}
    for closer in "}]":
        nxt = [len(fences)] * (len(fences) + 1)
        for j in range(len(fences) - 1, -1, -1):
            nxt[j] = j if before[j] >= 0 and text[before[j]] == closer else nxt[j + 1]
        next_closing[closer] = nxt
    blocks: list[str] = []
    failed: set[str] = set()  # a kind of block with no closing for one opening has none for any later one
    position, j = 0, 0

    for start in fences:
        if start < position:
            continue
        q = start + 3
        if text.startswith("json", q):
            q += 4
        while q < len(text) and text[q].isspace():
            q += 1
        if q >= len(text) or text[q] not in "{[":
            continue
        closer = "}" if text[q] == "{" else "]"
        if closer in failed:
            continue
        j = next_closing[closer][bisect.bisect_right(fences, q)]
        while j < len(fences) and before[j] <= q:  # only white space between the opening and this fence
            j = next_closing[closer][j + 1]
        if j == len(fences):
            failed.add(closer)
            continue
        blocks.append(text[q : before[j] + 1])
        position = fences[j] + 3
    return blocks


_CODE_LANGUAGES = ("python3", "python", "py", "ipython", "")


def fenced_code_blocks(text: str) -> list[str]:
    """What ``re.findall(r"```[ \\t]*(?:python3?|py|ipython)?[ \\t]*\\n(.*?)```", text, re.DOTALL |
    re.IGNORECASE)`` returns, in linear time: the body of each fence opened by ``` with a Python tag
    or none, up to the next ```."""
    blocks: list[str] = []
    start = text.find(_FENCE)
    while start >= 0:
        i = start + 3
        while i < len(text) and text[i] in " \t":
            i += 1
        body = -1
        for language in _CODE_LANGUAGES:
            if text[i : i + len(language)].lower() == language:
                k = i + len(language)
                while k < len(text) and text[k] in " \t":
                    k += 1
                if text.startswith("\n", k):
                    body = k + 1
                    break
        if body < 0:
            start = text.find(_FENCE, start + 1)
            continue
        end = text.find(_FENCE, body)
        if end < 0:  # no later opening has a closing either
            break
        blocks.append(text[body:end])
        start = text.find(_FENCE, end + 3)
    return blocks


_OPENERS = re.compile(r"[\[{]")
_PAIRS = {"}": "{", "]": "["}
_BRACES = {"}": "{"}  # objects only: a `[` or `]` is text to them
RECURSION_COST = 4096  # what a parse that ran out of stack is charged (its work is bounded by the depth)


def _scan(text: str, start: int, closes: dict[int, int | None], pairs: dict[str, str]) -> None:
    """Match the opening at ``start`` as JSON would, recording in ``closes`` where each bracket it opens
    ends (None: unclosed, or closed by the other kind). A bracket met outside a string behaves the same
    whichever scan meets it, so results already in ``closes`` are reused: a known value is jumped over, a
    known unclosed one ends the scan. That keeps all scans over one text linear together."""
    openers = "".join(pairs.values())
    stack = [start]
    closes[start] = None
    in_string = escaped = False
    i, n = start + 1, len(text)
    while i < n:
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in openers:
            if i in closes:
                known_end = closes[i]
                if known_end is None:
                    return  # everything still open encloses a bracket that never closes
                i = known_end + 1
                continue
            closes[i] = None
            stack.append(i)
        elif ch in pairs:
            if text[stack[-1]] != pairs[ch]:
                return  # "[ }": no value ends here, nor does any bracket still open
            closes[stack.pop()] = i
            if not stack:
                return
        i += 1


def balanced_end(text: str, start: int, closes: dict[int, int | None], pairs: dict[str, str] = _PAIRS) -> int | None:
    """Where the ``{`` or ``[`` at `start` closes (None: it does not); `closes` is shared by the calls
    over one text (with the same `pairs`), which keeps them linear together."""
    if start not in closes:
        _scan(text, start, closes, pairs)
    return closes[start]


def json_values(text: str, budget: int | None = None) -> list[tuple[int, int, object]]:
    """(start, end, value) of every top-level JSON object or list of the text, in order: the value
    that starts at the first ``{`` or ``[`` where one starts, the scan going on after it; a value
    nested in another is not one (what ``raw_decode`` tried at every bracket finds, without its cost:
    a failed parse's error counts the lines before it, quadratic over a text of openings). The only
    value a bracket can start is its balanced span, which is parsed alone; spans that are not JSON
    are charged their length against `budget` (default: four times the text and 64 KiB), and once it
    is spent the scan stops, so the cost stays linear whatever the text holds. Never raises."""
    budget = 4 * len(text) + 65536 if budget is None else budget
    closes: dict[int, int | None] = {}
    found: list[tuple[int, int, object]] = []
    opening = _OPENERS.search(text)
    while opening is not None and budget > 0:
        i = opening.start()
        end = balanced_end(text, i, closes)
        if end is not None:
            try:
                found.append((i, end + 1, json.loads(text[i : end + 1])))
                opening = _OPENERS.search(text, end + 1)
                continue
            except RecursionError:
                budget -= RECURSION_COST + end + 1 - i
            except ValueError:  # not JSON inside (a nested value may still be); past the digit limit
                budget -= end + 1 - i
        opening = _OPENERS.search(text, i + 1)
    return found
