"""Text utilities every family and harness shares: reasoning stripping and JSON object spans.

Scoring is only as fair as extraction, so the rules are explicit. ``<think>...</think>`` blocks go;
an orphan ``</think>`` (chat templates often put the opening tag in the prompt) means everything
before it was reasoning; an unclosed ``<think>`` means everything after it is reasoning, so a
message cut off mid-thought has no answer. Brace matching respects JSON strings and escapes.
"""

from __future__ import annotations

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


def _scan_object(text: str, start: int, closes: dict[int, int | None]) -> None:
    """Match the ``{`` at ``start``, recording in ``closes`` where each ``{`` it opens ends.

    A ``{`` met outside a string behaves the same whichever scan meets it, so results already in
    ``closes`` are reused: a known object is jumped over, a known unclosed one ends the scan.
    That keeps the search linear for ordinary text.
    """
    stack = [start]
    closes[start] = None
    in_string = escaped = False
    i = start + 1
    n = len(text)
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
        elif ch == "{":
            if i in closes:
                known_end = closes[i]
                if known_end is None:
                    return  # everything still open encloses an unclosed brace
                i = known_end + 1
                continue
            closes[i] = None
            stack.append(i)
        elif ch == "}":
            closes[stack.pop()] = i
            if not stack:
                return
        i += 1


def json_object_spans(text: str) -> list[tuple[int, int]]:
    """Half-open spans of the balanced top-level ``{...}`` blocks of ``text``, in order."""
    closes: dict[int, int | None] = {}
    spans: list[tuple[int, int]] = []
    i = text.find("{")
    while i >= 0:
        if i not in closes:
            _scan_object(text, i, closes)
        end = closes[i]
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
