"""Chat models behind the OpenAI chat-completions API: OpenAI itself or any compatible server (vLLM, ...).

Uses the official `openai` client with its own retries switched off: retries are ours (retry.py) so that
429 and 5xx are told apart, capped in count and time, and counted on the Completion.

A 200 that carries no answer is a server failure too, retried like a 500 and finally an error row,
never a reply scored 0: an empty `choices` list, a body that is not JSON, a choice without a
message, or empty content with no tool call. Empty content is kept as the model's reply only when
the server says why (finish_reason "length" or "content_filter", or a refusal): retrying would
not change it, and a truncated or refused reply is the model's own result.
"""

from __future__ import annotations

import base64
import email.utils
import json
import logging
import os
import time
from typing import Any

import openai

from tsbench.models.base import Completion, Message, ModelError, TaskInfo, ToolCall
from tsbench.models.pricing import cost_usd
from tsbench.models.retry import DEFAULT_TIMEOUT_S, RetryPolicy, call_with_retries

log = logging.getLogger(__name__)

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
# Why a reply may honestly be empty: it ran out of tokens (reasoning models) or was filtered.
EMPTY_REPLY_REASONS = frozenset({"length", "content_filter"})
# A placeholder key for OpenAI-compatible servers that don't check one (the client insists on a value).
PLACEHOLDER_API_KEY = "EMPTY"


def resolve_base_url(base_url: str | None) -> str:
    """The explicit URL, else OPENAI_BASE_URL, else OpenAI's own API."""
    return (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL).rstrip("/")


def is_openai_endpoint(base_url: str) -> bool:
    return base_url.rstrip("/") == DEFAULT_OPENAI_BASE_URL


def message_payload(message: Message) -> dict[str, Any]:
    """One chat message in wire format; PNG images become data-URL image parts after the text.

    Native function calling: an assistant message carries its `tool_calls`, a "tool" message the
    `tool_call_id` it answers (tool results are text only in this API).
    """
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content}
    if message.tool_calls:
        calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                 for c in message.tool_calls]
        return {"role": message.role, "content": message.content or None, "tool_calls": calls}
    if not message.images:
        return {"role": message.role, "content": message.content}
    parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
    for png in message.images:
        encoded = base64.b64encode(png).decode("ascii")
        parts.append({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}})
    return {"role": message.role, "content": parts}


def _retry_after_seconds(response: Any) -> float | None:
    """The server's Retry-After hint (retry-after-ms, or retry-after in seconds or as an HTTP date)."""
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def to_model_error(error: openai.OpenAIError) -> ModelError:
    """Sort an openai exception into the ModelError kind that decides whether to retry it."""
    # APITimeoutError subclasses APIConnectionError, so it is checked first.
    if isinstance(error, openai.APITimeoutError):
        return ModelError("timeout", str(error))
    if isinstance(error, openai.APIConnectionError):
        return ModelError("connection", str(error))
    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        message = f"HTTP {status}: {error.message}"
        if isinstance(error, openai.RateLimitError) or status == 429:
            kind = "rate_limit"
        elif status >= 500:
            kind = "server"
        elif status == 408:
            kind = "timeout"
        else:
            kind = "bad_request"
        return ModelError(kind, message, retry_after_s=_retry_after_seconds(error.response),
                          status_code=status)
    if isinstance(error, openai.APIResponseValidationError):
        return ModelError("server", f"malformed response: {error}")
    return ModelError("bad_request", str(error))


class OpenAIChatModel:
    """A ChatModel that sends each conversation to a chat-completions endpoint."""

    native_tools = True  # generate() takes tools= / tool_choice= and returns Completion.tool_calls

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        extra_body: dict[str, Any] | None = None,
        *,
        name: str | None = None,
    ):
        self.model_name = model_name
        self.name = name or f"openai/{model_name}"
        self.base_url = resolve_base_url(base_url)
        self.retry = retry or RetryPolicy()
        self.extra_body = dict(extra_body or {})
        self.timeout_s = timeout_s
        self.endpoint = f"{self.base_url}/chat/completions"
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if is_openai_endpoint(self.base_url):
                raise ValueError(
                    "OPENAI_API_KEY is not set: export it, or pass --base-url for an OpenAI-compatible server"
                )
            key = PLACEHOLDER_API_KEY
        self._client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=timeout_s, max_retries=0)

    def _request(self, messages: list[Message], max_tokens: int | None,
                 temperature: float | None, tools: list[dict[str, Any]] | None = None,
                 tool_choice: Any = None) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model_name,
            "messages": [message_payload(m) for m in messages],
        }
        if tools:
            request["tools"] = tools
            if tool_choice is not None:
                request["tool_choice"] = tool_choice
        if max_tokens is not None:
            # OpenAI's newer models accept only max_completion_tokens; compatible servers universally
            # understand max_tokens, while some don't know the newer name.
            field = "max_completion_tokens" if is_openai_endpoint(self.base_url) else "max_tokens"
            request[field] = max_tokens
        if temperature is not None:
            request["temperature"] = temperature
        if self.extra_body:
            request["extra_body"] = self.extra_body
        return request

    def _call_once(self, request: dict[str, Any]) -> Completion:
        started = time.perf_counter()
        try:
            response = self._client.chat.completions.create(**request)
        except openai.OpenAIError as error:
            raise to_model_error(error) from error
        except (json.JSONDecodeError, UnicodeDecodeError) as error:  # the client parses the body itself
            raise ModelError("server", f"malformed JSON body from {self.endpoint}: {error}") from error
        latency = time.perf_counter() - started
        try:
            return self._completion(response, latency)
        except (AttributeError, TypeError, IndexError) as error:  # a JSON body of the wrong shape
            raise ModelError("server", f"malformed response from {self.endpoint}: {error}") from error

    def _completion(self, response: Any, latency_s: float) -> Completion:
        extra: dict[str, Any] = {"response_id": getattr(response, "id", None)}
        if not getattr(response, "choices", None):
            raise ModelError("server", f"the response from {self.endpoint} has no choices")
        choice = response.choices[0]
        if getattr(choice, "message", None) is None:
            raise ModelError("server", f"the first choice from {self.endpoint} has no message")
        text = choice.message.content or ""
        extra["finish_reason"] = choice.finish_reason
        tool_calls: list[ToolCall] = []
        for call in getattr(choice.message, "tool_calls", None) or []:
            function = getattr(call, "function", None)
            if function is not None:  # custom (non-function) tool calls are not ours
                tool_calls.append(ToolCall(id=call.id, name=function.name, arguments=function.arguments or ""))
        refusal = getattr(choice.message, "refusal", None)
        if refusal:
            extra["refusal"] = refusal
        if not text and not tool_calls and not refusal and choice.finish_reason not in EMPTY_REPLY_REASONS:
            raise ModelError("server", f"empty reply from {self.endpoint} (no content, no tool call, "
                                       f"finish_reason {choice.finish_reason!r})")
        usage = response.usage
        input_tokens = output_tokens = 0
        if usage is None:
            extra["usage_missing"] = True
        else:
            input_tokens = usage.prompt_tokens or 0
            output_tokens = usage.completion_tokens or 0
            details = getattr(usage, "completion_tokens_details", None)
            reasoning = getattr(details, "reasoning_tokens", None) if details else None
            if reasoning:
                extra["reasoning_tokens"] = reasoning
        return Completion(
            text=text,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            latency_s=latency_s,
            cost_usd=cost_usd(self.model_name, input_tokens, output_tokens),
            extra=extra,
            tool_calls=tool_calls,
        )

    def generate(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        task: TaskInfo | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
    ) -> Completion:
        """One chat completion, retried on transient failures; raises ModelError when they run out.

        `tools` (OpenAI function specs) turns on native function calling; the calls come back in
        `Completion.tool_calls`. `tool_choice` ("auto", "none", ...) is sent only with tools.
        """
        request = self._request(messages, max_tokens, temperature, tools, tool_choice)
        started = time.perf_counter()
        completion = call_with_retries(lambda: self._call_once(request), self.retry,
                                       label=f"{self.model_name} at {self.endpoint}")
        completion.extra["wall_s"] = time.perf_counter() - started
        return completion

    def close(self) -> None:
        self._client.close()
