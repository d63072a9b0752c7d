"""Chat models behind the OpenAI chat-completions API: OpenAI itself or any compatible server (vLLM, ...).

Uses the official `openai` client with its own retries switched off: retries are ours (retry.py) so that
429 and 5xx are told apart, capped in count and time, and counted on the Completion.

A 200 that carries no answer is a server failure too, retried like a 500 and finally an error row,
never a reply scored 0: an empty `choices` list, a body that is not JSON, a choice without a
message, or empty content with no tool call. Empty content is kept as the model's reply only when
the server says why (finish_reason "length" or "content_filter", or a refusal): retrying would
not change it, and a truncated or refused reply is the model's own result.

Which key is sent where, and whose prices apply, is endpoint.py's rule; no redirect to another origin is
followed (http.py). A server's error body is kept in the error message (JSON `detail` or `error.message`,
else the first 500 characters).

Each attempt has one total deadline (`timeout_s`: connect, every read, the whole body), and all
attempts together the retry budget, both inside the caller's own deadlines (core/deadline.py):
a server that trickles its answer gets an error row in time, never a run that does not end.

What a server says is read, not trusted (server_numbers.py): token counts that are not finite
non-negative integers are unknown (counted by our own estimate and flagged), a `content` sent as a
list of parts is read as its text, and at most `MAX_TOOL_CALLS_KEPT` tool calls of one reply are kept.
"""

from __future__ import annotations

import base64
import email.utils
import json
import logging
import time
from typing import Any

import openai

from tsbench.core.deadline import tightest, within
from tsbench.core.unicode_text import ALTERED_ATTRIBUTE, valid_text
from tsbench.models.base import Agent, Completion, Message, ModelError, TaskInfo, ToolCall
from tsbench.models.context import server_context_tokens
from tsbench.models.endpoint import PLACEHOLDER_API_KEY, api_key_for, is_openai_endpoint, parse_price, resolve_base_url
from tsbench.models.http import REDIRECT_CODES, openai_client, redirect_note
from tsbench.models.pricing import endpoint_cost_usd
from tsbench.models.retry import DEFAULT_TIMEOUT_S, RetryPolicy, call_with_retries
from tsbench.models.server_numbers import (
    MAX_TOOL_CALLS_KEPT,
    content_text,
    estimate_tokens,
    non_negative_cost,
    read_usage,
)

log = logging.getLogger(__name__)

# Why a reply may honestly be empty: it ran out of tokens (reasoning models) or was filtered.
EMPTY_REPLY_REASONS = frozenset({"length", "content_filter"})
MAX_ERROR_BODY_CHARS = 500


def message_payload(message: Message) -> dict[str, Any]:
    """One chat message in wire format; PNG images become data-URL image parts after the text.

    Native function calling: an assistant message carries its `tool_calls`, a "tool" message the
    `tool_call_id` it answers (tool results are text only in this API).
    """
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content}
    if message.tool_calls:
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
        # "" rather than null: OpenAI takes either, llama.cpp's server rejects a null content.
        return {"role": message.role, "content": message.content or "", "tool_calls": calls}
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


def error_detail(error: openai.APIStatusError) -> str:
    """Why the server refused, in its own words: JSON `detail` or `error.message` (or `message`), else
    the first 500 characters of the body, else the client's message."""
    body = error.body
    if isinstance(body, dict):
        nested = body.get("error")
        for value in (
            body.get("detail"),
            nested.get("message") if isinstance(nested, dict) else nested,
            body.get("message"),
        ):
            if value:
                text = value if isinstance(value, str) else json.dumps(value, default=str)
                return text[:MAX_ERROR_BODY_CHARS]
    try:
        raw = error.response.text.strip()
    except Exception:  # a streamed or unreadable body
        raw = ""
    if raw:
        return raw[:MAX_ERROR_BODY_CHARS]
    if isinstance(body, str) and body.strip():
        return body.strip()[:MAX_ERROR_BODY_CHARS]
    return error.message


def to_model_error(error: openai.OpenAIError) -> ModelError:
    """Sort an openai exception into the ModelError kind that decides whether to retry it."""
    # APITimeoutError subclasses APIConnectionError, so it is checked first.
    if isinstance(error, openai.APITimeoutError):
        return ModelError("timeout", str(error))
    if isinstance(error, openai.APIConnectionError):
        cause = str(error.__cause__ or "")
        refused = cause if "; refused" in cause else ""  # an answer past models/http.py's bounds
        return ModelError("connection", f"{error}{f' ({refused})' if refused else ''}")
    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        message = f"HTTP {status}: {error_detail(error)}"
        if status in REDIRECT_CODES:  # handed back unfollowed: another origin (models/http.py)
            message = f"HTTP {status}: {redirect_note(error.response.headers.get('location'))}"
        if isinstance(error, openai.RateLimitError) or status == 429:
            kind = "rate_limit"
        elif status >= 500:
            kind = "server"
        elif status == 408:
            kind = "timeout"
        else:
            kind = "bad_request"
        return ModelError(kind, message, retry_after_s=_retry_after_seconds(error.response), status_code=status)
    if isinstance(error, openai.APIResponseValidationError):
        return ModelError("server", f"malformed response: {error}")
    return ModelError("bad_request", str(error))


DEADLINE_NAMES = {
    "client_timeout": "the call's total time",
    "retry_budget": "the call's retry budget",
    "wall_clock": "the episode's wall clock",
    "cell_timeout": "the time left to the cell that called sub_rlm",
}


def _deadline_note(bound: Any, timeout_s: float, endpoint: str) -> str:
    what = DEADLINE_NAMES.get(bound.budget, bound.budget)
    limit = f" of {timeout_s:g} s" if bound.budget == "client_timeout" else ""
    return f"no complete answer from {endpoint} within {what}{limit} (connect, every read and the whole body)"


class OpenAIChatModel(Agent):
    """A ChatModel that sends each conversation to a chat-completions endpoint."""

    @classmethod
    def native_tools(cls) -> bool:
        """generate() takes tools= / tool_choice= and returns Completion.tool_calls."""
        return True

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
        api_key_env: str | None = None,
        price: str | tuple[float, float] | None = None,
        context_tokens: int | None = None,
    ):
        self.model_name = model_name
        self.name = name or f"openai/{model_name}"
        self.base_url = resolve_base_url(base_url)
        self.retry = retry or RetryPolicy()
        self.extra_body = dict(extra_body or {})
        self.timeout_s = timeout_s
        self.price = parse_price(price)  # the user's ($/1M in, $/1M out); else list prices at OpenAI only
        self.endpoint = f"{self.base_url}/chat/completions"
        self._context_tokens = int(context_tokens) if context_tokens else None
        self._context_asked = self._context_tokens is not None or is_openai_endpoint(self.base_url)
        key = api_key_for(self.base_url, api_key=api_key, api_key_env=api_key_env)
        self._sent_no_key = key == PLACEHOLDER_API_KEY
        self._client = openai_client(key, self.base_url, timeout=timeout_s, max_retries=0)

    @property
    def context_tokens(self) -> int | None:
        """Declared (`-M context_tokens=N`), else what the server's /v1/models says (asked once), else None."""
        if not self._context_asked:
            self._context_asked = True
            self._context_tokens = server_context_tokens(self.base_url, self.model_name, self._client.api_key)
        return self._context_tokens

    def _request(
        self,
        messages: list[Message],
        max_tokens: int | None,
        temperature: float | None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        response_format: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model_name,
            "messages": [message_payload(m) for m in messages],
        }
        if response_format is not None:  # structured output (a judge's declared reply); servers without it ignore it
            request["response_format"] = response_format
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
            with within(self.timeout_s, "client_timeout"):
                bound = tightest()  # what ends this attempt: its own total time or a caller's deadline
                response = self._client.chat.completions.create(**request)
        except openai.OpenAIError as error:
            failure = to_model_error(error)
            if failure.kind == "timeout" and bound is not None and bound.left() <= 0.0:
                failure = ModelError("timeout", _deadline_note(bound, self.timeout_s, self.endpoint))
                failure.budget = bound.budget
            if failure.status_code in (401, 403) and self._sent_no_key:
                failure = ModelError(
                    failure.kind,
                    f"{str(failure).split(': ', 1)[1]} (no API key was sent to "
                    f"{self.base_url}: name the variable holding its key with --api-key-env)",
                    status_code=failure.status_code,
                )
            raise failure from error
        # ValueError: JSONDecodeError, or an integer of over 4,300 digits (Python's int-string limit)
        except (ValueError, UnicodeDecodeError, RecursionError) as error:  # the client parses the body
            raise ModelError("server", f"malformed JSON body from {self.endpoint}: {error}") from error
        latency = time.perf_counter() - started
        try:
            return self._completion(response, latency, request)
        except (AttributeError, TypeError, IndexError, KeyError) as error:  # a JSON body of the wrong shape
            raise ModelError("server", f"malformed response from {self.endpoint}: {error}") from error

    def _completion(self, response: Any, latency_s: float, request: dict[str, Any]) -> Completion:
        response_id = getattr(response, "id", None)  # a server's label: kept only as a short string
        extra: dict[str, Any] = {
            "response_id": response_id if isinstance(response_id, str) and len(response_id) <= 200 else None
        }
        choices = getattr(response, "choices", None)
        if not choices or not isinstance(choices, list):  # {"choices": {"a": 1}} is no list of choices
            raise ModelError("server", f"the response from {self.endpoint} has no choices")
        choice = response.choices[0]
        if getattr(choice, "message", None) is None:
            raise ModelError("server", f"the first choice from {self.endpoint} has no message")
        # A lone surrogate ("\ud800" is valid JSON) has no UTF-8 form: it could not go back to the
        # server in the next request, nor to a kernel or a file, so it is made valid here, and counted.
        text, altered = valid_text(content_text(choice.message.content))
        # A finish reason is a short word: anything else (a list, a number, 100 KB of text) is unknown.
        reason = choice.finish_reason
        extra["finish_reason"] = reason if isinstance(reason, str) and len(reason) <= 64 else None
        tool_calls: list[ToolCall] = []
        sent = getattr(choice.message, "tool_calls", None) or []
        sent = sent if isinstance(sent, list) else []
        for call in sent[:MAX_TOOL_CALLS_KEPT]:
            function = getattr(call, "function", None)
            if function is not None:  # custom (non-function) tool calls are not ours
                (name, arguments), changed = valid_text([str(function.name), content_text(function.arguments)])
                altered += changed
                tool_calls.append(ToolCall(id=str(call.id), name=name, arguments=arguments))
        if len(sent) > MAX_TOOL_CALLS_KEPT:
            extra["tool_calls_dropped"] = len(sent) - MAX_TOOL_CALLS_KEPT
        if altered:
            extra[ALTERED_ATTRIBUTE] = altered
        refusal = getattr(choice.message, "refusal", None)
        refusal = refusal if isinstance(refusal, str) else None  # a number or object says no reason
        if refusal:
            extra["refusal"] = refusal
        if not text and not tool_calls and not refusal and extra["finish_reason"] not in EMPTY_REPLY_REASONS:
            raise ModelError(
                "server",
                f"empty reply from {self.endpoint} (no content, no tool call, finish_reason {reason!r:.80})",
            )
        usage = read_usage(getattr(response, "usage", None))
        extra.update(usage.extra)
        input_tokens, output_tokens = usage.input_tokens, usage.output_tokens
        if input_tokens is None:  # unknown: the caps count our own estimate
            input_tokens = estimate_tokens(request.get("messages"))
        if output_tokens is None:
            output_tokens = estimate_tokens([text, *(c.arguments for c in tool_calls)])
        return Completion(
            text=text,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            latency_s=latency_s,
            # No usage (or none to trust), no count: the cost is unknown rather than the price of a guess.
            cost_usd=non_negative_cost(
                endpoint_cost_usd(self.model_name, self.base_url, input_tokens, output_tokens, self.price)
            )
            if usage.trusted
            else None,
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
        response_format: dict[str, Any] | None = None,
    ) -> Completion:
        """One chat completion, retried on transient failures; raises ModelError when they run out.

        `tools` (OpenAI function specs) turns on native function calling; the calls come back in
        `Completion.tool_calls`. `tool_choice` ("auto", "none", ...) is sent only with tools.
        `response_format` (an OpenAI json_schema format) asks for structured output.
        """
        request = self._request(messages, max_tokens, temperature, tools, tool_choice, response_format)
        started = time.perf_counter()
        with within(self.retry.budget_s(self.timeout_s), "retry_budget"):  # all attempts, back-offs included
            completion = call_with_retries(
                lambda: self._call_once(request),
                self.retry,
                label=f"{self.model_name} at {self.endpoint}",
                call_timeout_s=self.timeout_s,
            )
        completion.extra["wall_s"] = time.perf_counter() - started
        return completion

    def close(self) -> None:
        self._client.close()
