"""Our transcripts as inspect_ai chat messages: what the model saw and said, in inspect's types.

A transcript (results/schema.py `transcript`) is a list of events. They map to messages as the
model met them: the rlm harness sends kernel output back as a user message, the tools harness as
tool results answering the assistant's tool calls. Events that are not messages (a tool list, a
nested sub_rlm episode) stay out; their counts are in the sample's metadata.
"""

from __future__ import annotations

import json
from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser
from inspect_ai.tool import ToolCall, ToolCallError


def _arguments(text: Any) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments as a dict; text that is not a JSON object is kept with its parse error."""
    if isinstance(text, dict):
        return text, None
    try:
        value = json.loads(text or "{}")
    except (TypeError, ValueError, RecursionError) as exc:  # a 5,000-digit int, or nested too deep
        return {"raw": str(text)}, f"arguments are not JSON: {exc}"
    return (value, None) if isinstance(value, dict) else ({"value": value}, "arguments are not a JSON object")


def _observation(event: dict) -> str:
    text = str(event.get("observation", ""))
    if event.get("images"):
        text += f"\n[{len(event['images'])} image(s): {', '.join(map(str, event['images']))}]"
    return text


def to_messages(transcript: list[dict], model: str | None = None) -> list[ChatMessage]:
    """Chat messages in order. `model` names the assistant on its messages."""
    messages: list[ChatMessage] = []
    for event in transcript:
        role = event.get("role")
        if role == "system":
            messages.append(ChatMessageSystem(content=str(event.get("content", ""))))
        elif role in ("user", "notice"):
            messages.append(ChatMessageUser(content=str(event.get("content", ""))))
        elif role in ("assistant", "policy"):
            calls = []
            for call in event.get("tool_calls") or []:
                arguments, problem = _arguments(call.get("arguments"))
                calls.append(
                    ToolCall(
                        id=str(call.get("id")), function=str(call.get("name")), arguments=arguments, parse_error=problem
                    )
                )
            messages.append(
                ChatMessageAssistant(content=str(event.get("content", "")), tool_calls=calls or None, model=model)
            )
        elif role == "tool" and event.get("name"):  # a native or JSON-protocol tool call's result
            error = ToolCallError("unknown", str(event["error"])) if event.get("error") else None
            messages.append(
                ChatMessageTool(
                    content=_observation(event),
                    tool_call_id=str(event.get("id")),
                    function=str(event["name"]),
                    error=error,
                )
            )
        elif role == "tool":  # rlm: the kernel's output went back as the next user message
            messages.append(ChatMessageUser(content=_observation(event)))
    return messages


def first_user_text(transcript: list[dict]) -> str:
    """The question as the model first read it (the sample's input)."""
    return next((str(e.get("content", "")) for e in transcript if e.get("role") == "user"), "")
