"""A protocol test double: a real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions wire format.

Written for the tests (and reused by the runner's tests and a benchmark) so that the real `openai` client,
real sockets, timeouts and retries are exercised without any outside network. Each POST to
/v1/chat/completions takes the next behaviour from a script, falling back to a default:

    "ok:<text>"        200 with a chat.completion whose reply is <text> (usage counted in words)
    "429"              rate limited, with `Retry-After: 0` ("429:<seconds>" sends that hint instead)
    "<status>"         any other HTTP error status (e.g. "500", "400") with an OpenAI-style error body
    "sleep:<seconds>"  wait that long, then answer like the default (to trigger client timeouts)
    "hang"             never answer (until the server stops): a client timeout is the only way out
    "drop"             close the connection without sending a byte (a dropped connection)
    "empty_choices"    200 with a well-formed chat.completion whose `choices` list is empty
    "ok"               200 with empty content and no tool call ("ok:" with nothing after it)
    "bad_json"         200, Content-Type application/json, and a body cut off mid-object
    "tool:<name>:<json arguments>"
                       200 with an assistant message that makes one native function call (no text),
                       finish_reason "tool_calls"; the arguments text is sent as written
    "tools:<json list>"
                       the same with several calls: [{"name": ..., "arguments": {...} or "<text>"}, ...]
    "length:<text>"    200 whose reply <text> was stopped by the token cap (finish_reason "length")
    "nousage:<text>"   200 with reply <text> and no `usage` object (some servers omit it)
    "detail:<status>:<text>"
                       that HTTP error status with a FastAPI-style body {"detail": "<text>"}
    "raw:<status>:<text>"
                       that HTTP error status with <text> as a plain-text (non-JSON) body

Hostile shapes (a server that is slow on purpose, or whose numbers are not numbers):

    "trickle:<seconds>"     200 and JSON headers at once, then one byte of JSON whitespace every <seconds>,
                            never the body (slowloris: every read returns before a per-read timeout)
    "slowheaders:<seconds>" the status line and headers one byte every <seconds>, for ever
    "sse:<seconds>"         200 text/event-stream, then a ": keep-alive" comment every <seconds>, for ever
    "usage:<json>\n<text>"  200 with reply <text> and `usage` written as the raw <json> (NaN, -1, 1e18, "12")
    "parts:<json>"          200 whose message `content` is the raw <json> (a list of content parts)
    "manytools:<n>:<name>:<json arguments>"
                            200 with <n> native function calls of tool <name>, all with those arguments

It counts requests, keeps every request body and its headers (so a test can see which
Authorization a client sent), and tracks the most requests in flight.

POST /v1/embeddings answers every input with a deterministic unit vector of EMBEDDING_DIM floats
(hashed bag of lower-cased words), so texts sharing words get a positive cosine; those requests are
kept in `embedding_bodies` and do not consume the chat script.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
EMBEDDING_DIM = 32


def fake_embedding(text: str) -> list[float]:
    """A unit vector from the text's words hashed into EMBEDDING_DIM buckets (stable across runs)."""
    import hashlib
    import math

    vector = [0.0] * EMBEDDING_DIM
    for word in text.lower().split():
        digest = hashlib.sha256(word.encode()).digest()
        vector[digest[0] % EMBEDDING_DIM] += 1.0 if digest[1] % 2 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def _word_count(content: Any) -> int:
    if isinstance(content, str):
        return len(content.split())
    if isinstance(content, list):
        return sum(_word_count(part.get("text", "")) for part in content if isinstance(part, dict))
    return 0


class FakeOpenAIServer:
    """Start with `with FakeOpenAIServer(["429", "ok:hi"]) as server:`; point a client at `server.base_url`."""

    def __init__(
        self,
        script: Iterable[str] = (),
        *,
        default: str = "ok:hello",
        latency_s: float = 0.0,
        model_ids: Iterable[str] = ("fake-model",),
    ):
        self.default = default
        self.latency_s = latency_s
        self.model_ids = list(model_ids)
        self.bodies: list[dict[str, Any]] = []
        self.embedding_bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.request_count = 0
        self.max_in_flight = 0
        self._in_flight = 0
        self._script: deque[str] = deque(script)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        # A short poll interval lets stop() return promptly.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping on "sleep:" or latency
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- addresses and script -------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as base_url."""
        return f"{self.url}/v1"

    def push(self, *behaviours: str) -> None:
        with self._lock:
            self._script.extend(behaviours)

    # -- used by the handler --------------------------------------------------------------------
    def _next_behaviour(self, body: dict[str, Any], headers: dict[str, str]) -> str:
        with self._lock:
            self.request_count += 1
            self.bodies.append(body)
            self.headers.append(headers)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            return self._script.popleft() if self._script else self.default

    def _finished(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)


def _tool_calls(behaviour: str, serial: int) -> list[dict[str, Any]]:
    """The tool_calls of a "tool:" or "tools:" behaviour, in wire format."""
    if behaviour.startswith("tools:"):
        wanted = json.loads(behaviour[len("tools:") :])
    else:
        name, _, arguments = behaviour[len("tool:") :].partition(":")
        wanted = [{"name": name, "arguments": arguments or "{}"}]
    calls = []
    for index, call in enumerate(wanted):
        arguments = call.get("arguments", {})
        calls.append(
            {
                "id": f"call_{serial}_{index}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
        )
    return calls


def _completion_json(
    body: dict[str, Any], text: str, serial: int, tool_calls: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    prompt_tokens = sum(_word_count(m.get("content")) for m in body.get("messages", []))
    completion_tokens = len(text.split()) + sum(len(c["function"]["arguments"].split()) + 1 for c in tool_calls or [])
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message = {"role": "assistant", "content": text or None, "tool_calls": tool_calls}
    return {
        "id": f"chatcmpl-fake-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _make_handler(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # one request per connection: nothing lingers at shutdown

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout); nothing to tell it

        def _send_raw(self, status: int, data: bytes, content_type: str = "application/json") -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _drop(self) -> None:
            """Close the socket with no status line: the client sees the connection die."""
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.close_connection = True

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send_json(200, {"status": "ok"})
            elif self.path == "/v1/models":
                models = [{"id": m, "object": "model", "owned_by": "fake"} for m in server.model_ids]
                self._send_json(200, {"object": "list", "data": models})
            else:
                self._send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

        def do_POST(self) -> None:
            if self.path == EMBEDDINGS_PATH:
                self._embeddings()
                return
            if self.path != CHAT_PATH:
                self._send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
                return
            length = int(self.headers.get("Content-Length", 0))
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self._send_json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
                return
            behaviour = server._next_behaviour(body, {k.lower(): v for k, v in self.headers.items()})
            try:
                server._wait(server.latency_s)
                self._respond(behaviour, body)
            finally:
                server._finished()

        def _embeddings(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self._send_json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
                return
            with server._lock:
                server.embedding_bodies.append(body)
            texts = body.get("input", [])
            texts = [texts] if isinstance(texts, str) else list(texts)
            data = [
                {"object": "embedding", "index": i, "embedding": fake_embedding(str(t))} for i, t in enumerate(texts)
            ]
            tokens = sum(len(str(t).split()) for t in texts)
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model", "fake-embedding"),
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                },
            )

        def _trickle(self, head: bytes, unit: bytes, seconds: float) -> None:
            """Send `head`, then `unit` every `seconds` until the client leaves or the server stops."""
            try:
                self.wfile.write(head)
                self.wfile.flush()
                while not server._stopping.wait(seconds):
                    self.wfile.write(unit)
                    self.wfile.flush()
            except OSError:  # the client gave up: the point of the exercise
                pass
            self.close_connection = True

        def _raw_json(self, payload: dict[str, Any], field: str, raw: str) -> None:
            """`payload` with one field's value replaced by the raw JSON text `raw` (NaN and all)."""
            marker = "__tsbench_raw__"
            if field == "usage":
                payload["usage"] = marker
            else:
                payload["choices"][0]["message"][field] = marker
            self._send_raw(200, json.dumps(payload).replace(json.dumps(marker), raw).encode())

        def _hostile(self, behaviour: str, body: dict[str, Any]) -> bool:
            """The hostile shapes of the module doc; False when `behaviour` is none of them."""
            kind, _, rest = behaviour.partition(":")
            serial = server.request_count
            if kind == "trickle":
                head = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n"
                self._trickle(head, b" ", float(rest))
            elif kind == "slowheaders":
                self._trickle(b"", b"H", float(rest))
            elif kind == "sse":
                head = b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
                self._trickle(head, b": keep-alive\n\n", float(rest))
            elif kind == "usage":
                raw, _, text = rest.partition("\n")
                self._raw_json(_completion_json(body, text, serial), "usage", raw)
            elif kind == "parts":
                self._raw_json(_completion_json(body, "", serial), "content", rest)
            elif kind == "manytools":
                count, _, call = rest.partition(":")
                name, _, arguments = call.partition(":")
                calls = [{"name": name, "arguments": arguments or "{}"}] * int(count)
                self._send_json(
                    200, _completion_json(body, "", serial, _tool_calls("tools:" + json.dumps(calls), serial))
                )
            else:
                return False
            return True

        def _respond(self, behaviour: str, body: dict[str, Any]) -> None:
            if behaviour == "hang":
                server._stopping.wait()
                return
            if self._hostile(behaviour, body):
                return
            if behaviour.startswith("sleep:"):
                server._wait(float(behaviour.split(":", 1)[1]))
                behaviour = server.default
            if behaviour == "drop":
                self._drop()
                return
            if behaviour == "bad_json":
                self._send_raw(
                    200, b'{"id": "chatcmpl-cut", "object": "chat.completion", "choices": [{"index": 0, "mess'
                )
                return
            if behaviour == "empty_choices":
                payload = _completion_json(body, "", server.request_count)
                payload["choices"] = []
                self._send_json(200, payload)
                return
            if behaviour.startswith(("tool:", "tools:")):
                calls = _tool_calls(behaviour, server.request_count)
                self._send_json(200, _completion_json(body, "", server.request_count, calls))
                return
            if behaviour.startswith(("length:", "nousage:")):
                kind, _, text = behaviour.partition(":")
                payload = _completion_json(body, text, server.request_count)
                if kind == "length":
                    payload["choices"][0]["finish_reason"] = "length"
                else:
                    del payload["usage"]
                self._send_json(200, payload)
                return
            if behaviour.startswith(("detail:", "raw:")):
                kind, _, rest = behaviour.partition(":")
                code, _, text = rest.partition(":")
                if kind == "detail":
                    self._send_json(int(code), {"detail": text})
                else:
                    self._send_raw(int(code), text.encode(), content_type="text/plain")
                return
            if behaviour.startswith("ok:") or behaviour == "ok":
                text = behaviour[3:] if behaviour.startswith("ok:") else ""
                self._send_json(200, _completion_json(body, text, server.request_count))
                return
            code, _, retry_after = behaviour.partition(":")
            status = int(code)
            headers = {"Retry-After": retry_after or "0"} if status == 429 else {}
            kind = (
                "rate_limit_exceeded"
                if status == 429
                else ("server_error" if status >= 500 else "invalid_request_error")
            )
            error = {"error": {"message": f"scripted {status}", "type": kind, "code": str(status)}}
            self._send_json(status, error, headers)

    return Handler
