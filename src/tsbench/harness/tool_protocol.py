"""How a model asks for tools: native function calling, or a plain JSON text protocol.

* native: for models whose `native_tools()` says so (the OpenAI client). The tool specs go with every
  request as OpenAI `tools`; calls come back as `Completion.tool_calls`; each result goes back as a
  "tool" message answering its call id. On the forced last turn the specs are still sent (the
  history holds tool calls) with `tool_choice="none"`.
* json: for models without function calling (local transformers models, vLLM without a tool
  parser). The system prompt lists every tool's signature; the model writes one
  `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` per call, and the results come back in
  one user message of `<tool_result name=... id=...>{json}</tool_result>` blocks. A reply without
  tags is also searched for bare `{"name": <a known tool>, "arguments": {...}}` objects.

Either way a reply with no tool call is the final message.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tsbench.core.text import balanced_end, json_object_spans, strip_reasoning
from tsbench.harness.toolset import Observation, Toolset
from tsbench.models.base import ChatModel, Completion, Message, TaskInfo

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
PROTOCOLS = ("auto", "native", "json")


_SPACE = re.compile(r"\s*")


@dataclass
class ParsedCall:
    """One tool call as the model wrote it; `error` says why it cannot run (bad JSON, no name)."""

    id: str
    name: str
    arguments: Any
    error: str | None = None


def _decode_arguments(raw: Any) -> tuple[Any, str | None]:
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, str):
        try:
            return json.loads(raw), None
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply to parse
            return None, f"the arguments are not valid JSON ({exc})"
    return raw, None


class ToolProtocol:
    name = ""

    def system_section(self, toolset: Toolset) -> str:
        raise NotImplementedError

    def generate(
        self,
        model: ChatModel,
        messages: list[Message],
        toolset: Toolset,
        *,
        final: bool,
        max_tokens: int | None,
        temperature: float | None,
        task: TaskInfo,
    ) -> Completion:
        options = self.request_options(toolset, final)
        return model.generate(messages, max_tokens=max_tokens, temperature=temperature, task=task, **options)

    def request_options(self, toolset: Toolset, final: bool) -> dict[str, Any]:
        """What a request carries besides the messages (json: nothing, the system prompt lists the tools)."""
        return {}

    def calls(self, completion: Completion, toolset: Toolset, turn: int) -> list[ParsedCall]:
        raise NotImplementedError

    def assistant_message(self, completion: Completion) -> Message:
        return Message("assistant", completion.text)

    def result_messages(self, results: list[tuple[ParsedCall, Observation]], images: list[bytes]) -> list[Message]:
        raise NotImplementedError

    @staticmethod
    def add_notice(messages: list[Message], notice: str) -> None:
        """Append a notice to the last user message, or as a new user message after tool results."""
        last = messages[-1]
        if last.role == "user":
            messages[-1] = Message("user", f"{last.content}\n\n{notice}", images=last.images)
        else:
            messages.append(Message("user", notice))


class NativeProtocol(ToolProtocol):
    name = "native"

    def system_section(self, toolset: Toolset) -> str:
        return (
            "Call the tools through function calling; you may make several calls in one reply. "
            f"Tools: {', '.join(toolset.names)}."
        )

    def request_options(self, toolset, final):
        return {"tools": toolset.openai_tools(), "tool_choice": "none" if final else "auto"}

    def calls(self, completion, toolset, turn):
        parsed = []
        for index, call in enumerate(completion.tool_calls):
            arguments, error = _decode_arguments(call.arguments)
            parsed.append(ParsedCall(call.id or f"call_{turn}_{index}", call.name, arguments, error))
        return parsed

    def assistant_message(self, completion):
        return Message("assistant", completion.text, tool_calls=list(completion.tool_calls))

    def result_messages(self, results, images):
        messages = [Message("tool", observation.text, tool_call_id=call.id) for call, observation in results]
        if images:
            messages.append(
                Message("user", f"[{len(images)} image(s) returned by the tool calls above]", images=images)
            )
        return messages


class JsonTextProtocol(ToolProtocol):
    name = "json"

    def system_section(self, toolset: Toolset) -> str:
        return (
            "Tools (name(arguments): what it returns):\n"
            f"{toolset.catalog()}\n\n"
            "To call a tool, write one line per call, exactly like this:\n"
            f'{TOOL_CALL_OPEN}{{"name": "channel_stats", "arguments": {{"channel": "ch_00"}}}}{TOOL_CALL_CLOSE}\n'
            "You may write several such lines in one reply; the results come back in <tool_result> blocks."
        )

    def calls(self, completion, toolset, turn):
        return [
            ParsedCall(f"call_{turn}_{index}", name, arguments, error)
            for index, (name, arguments, error) in enumerate(parse_json_calls(completion.text, toolset.names))
        ]

    def result_messages(self, results, images):
        blocks = [
            f'<tool_result name="{call.name}" id="{call.id}">{observation.text}</tool_result>'
            for call, observation in results
        ]
        note = f"\n[{len(images)} image(s) attached]" if images else ""
        return [Message("user", "Tool results:\n" + "\n".join(blocks) + note, images=images)]


def parse_json_calls(text: str, known_names: list[str] | tuple[str, ...] = ()) -> list[tuple[str, Any, str | None]]:
    """(name, arguments, error) of each tool call in a text reply, in order."""
    text = strip_reasoning(text)
    found: list[tuple[str, Any, str | None]] = []
    # Each call is parsed alone from its balanced span (copying the rest of the reply per tag, or a
    # parse error that counts the lines before it, was quadratic in the tags); what the parses read is
    # charged against a budget linear in the reply, past which tags go unread.
    budget = 4 * len(text) + 65536
    closes: dict[int, int | None] = {}
    position = text.find(TOOL_CALL_OPEN)
    while position >= 0 and budget > 0:
        start = _SPACE.match(text, position + len(TOOL_CALL_OPEN)).end()
        end = balanced_end(text, start, closes) if text.startswith(("{", "["), start) else None
        if end is None:
            budget -= 1
            found.append(("", None, "the tool call is not valid JSON (no balanced object after the tag)"))
        else:
            budget -= end + 1 - start
            try:
                found.append(_call_from_object(json.loads(text[start : end + 1])))
            except (ValueError, RecursionError) as exc:
                found.append(("", None, f"the tool call is not valid JSON ({type(exc).__name__}: {str(exc)[:80]})"))
        position = text.find(TOOL_CALL_OPEN, position + len(TOOL_CALL_OPEN))
    if found:
        return found
    for start, end in json_object_spans(text):  # no tags: bare call objects naming a known tool
        try:
            obj = json.loads(text[start:end])
        except (ValueError, RecursionError):
            continue
        keys = {"name", "arguments", "args", "parameters"}
        if isinstance(obj, dict) and obj.get("name") in known_names and set(obj) <= keys:
            found.append(_call_from_object(obj))
    return found


def _call_from_object(obj: Any) -> tuple[str, Any, str | None]:
    if not isinstance(obj, dict):
        return "", None, "a tool call must be a JSON object with a name and arguments"
    name = obj.get("name", obj.get("tool"))
    if not isinstance(name, str) or not name:
        return "", None, 'the tool call has no "name"'
    raw = obj.get("arguments", obj.get("args", obj.get("parameters", {})))
    arguments, error = _decode_arguments(raw)
    return name, arguments, error


def choose_protocol(model: ChatModel, wanted: str = "auto") -> ToolProtocol:
    """ "native" for models whose `native_tools()` says so, else "json" (or what `wanted` says)."""
    if wanted not in PROTOCOLS:
        raise ValueError(f"tool protocol must be one of {', '.join(PROTOCOLS)} (got {wanted!r})")
    if wanted == "auto":
        wanted = "native" if model.native_tools() else "json"
    if wanted == "native" and not model.native_tools():
        raise ValueError(f"{model.name} has no native function calling; use the json tool protocol")
    return NativeProtocol() if wanted == "native" else JsonTextProtocol()
