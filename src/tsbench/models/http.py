"""HTTP clients that keep a credential with the origin it was meant for.

A server can answer 307 or 308 to send a client elsewhere with the request as it was: its Authorization
header, OpenAI's organisation and project headers, the prompt. httpx drops Authorization on a redirect to
another origin but keeps every other header; urllib keeps them all (the context-length probe sent the key
on). Every client tsbench opens to a model server (chat, embeddings, /v1/models) is built here: it follows
a redirect only within its origin (scheme, host and port) and hands a redirect elsewhere back unfollowed,
as the HTTP error it then is. OpenAI's organisation and project headers go to OpenAI's own API only.

A server's answer is bounded too: a body is read up to `MAX_RESPONSE_BYTES` (far above any chat
completion, embedding or model listing) and refused past it, as a read error, before more is held; and
bodies come uncompressed (`Accept-Encoding: identity`; a compressed answer anyway is refused), since
httpx inflates a gzip body whole: 1 MB on the wire took the host to 3 GiB as a 1 GiB reply.

A server's time is bounded as a whole, not per read: httpx's timeouts hold for each read, so a server
that trickles a byte of whitespace every two seconds held one request for ever. A client's timeout is
here the total time of one request (connect, headers, the whole body), and every socket operation
(connect, each write, each read) waits at most what is left of the thread's tightest deadline
(core/deadline.py: that total, a call's retry budget, the episode's wall clock, the cell that asked);
one past it fails as a timeout at once.

The HTTP library is the one the installed openai client is built on (httpx2 from openai 3, httpx before),
so the chat client and the probe share one transport.
"""

from __future__ import annotations

import functools
import importlib
import logging
import time
from types import ModuleType
from typing import Any

from tsbench.core.deadline import remaining, within
from tsbench.models.endpoint import is_openai_endpoint

log = logging.getLogger(__name__)

__all__ = [
    "MAX_RESPONSE_BYTES",
    "REDIRECT_CODES",
    "http_client",
    "http_errors",
    "http_library",
    "openai_client",
    "redirect_note",
]

REDIRECT_CODES = (301, 302, 303, 307, 308)
_MAX_REDIRECTS = 5
MAX_RESPONSE_BYTES = 64 * 2**20  # a long chat completion is well under 1 MiB
_LIMITS = {"max_connections": 1000, "max_keepalive_connections": 100}  # openai's own defaults


@functools.cache
def http_library() -> ModuleType:
    """httpx2 or httpx: whichever `openai.DefaultHttpxClient` derives from."""
    import openai

    for cls in openai.DefaultHttpxClient.__mro__:
        root = cls.__module__.split(".")[0]
        if root.startswith("httpx"):
            return importlib.import_module(root)
    return importlib.import_module("httpx")


def _origin(url) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, (url.host or "").lower(), url.port or default


@functools.cache
def _bounded_class(lib: ModuleType) -> type:
    class BoundedBody(lib.SyncByteStream):
        """A response body that raises (a read error) once more than `limit` bytes have come, and whose
        reads stay within the request's total time (`ends`, on the monotonic clock)."""

        def __init__(self, inner, limit: int, ends: float | None) -> None:
            self.inner, self.limit, self.ends = inner, limit, ends

        def __iter__(self):
            seen = 0
            chunks = iter(self.inner)
            while True:
                # The deadline is pushed around each read only, never across a yield to the caller.
                with within(None if self.ends is None else self.ends - time.monotonic(), "client_timeout"):
                    chunk = next(chunks, None)
                if chunk is None:
                    return
                seen += len(chunk)
                if seen > self.limit:
                    raise lib.ReadError(f"the server's answer is over {self.limit:,} bytes; refused")
                yield chunk

        def close(self) -> None:
            self.inner.close()

    return BoundedBody


def _bounded(lib: ModuleType, response, ends: float | None = None):
    """`response` with its body bounded; a compressed or declared-oversized one refused before it is read."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    declared = response.headers.get("content-length", "")
    problem = None
    if encoding not in ("", "identity"):
        problem = f"the server's answer is compressed ({encoding}) though it was asked for none; refused"
    elif declared.isdigit() and int(declared) > MAX_RESPONSE_BYTES:
        problem = f"the server's answer declares {int(declared):,} bytes, over {MAX_RESPONSE_BYTES:,}; refused"
    if problem:
        response.close()
        raise lib.ReadError(problem)
    response.stream = _bounded_class(lib)(response.stream, MAX_RESPONSE_BYTES, ends)
    return response


@functools.cache
def _transport_class(lib: ModuleType) -> type:
    class SameOriginRedirects(lib.BaseTransport):
        """Follows redirects that stay on the request's origin; returns any other redirect as it came.
        Every answer's body is bounded (`_bounded`)."""

        def __init__(self, inner) -> None:
            self.inner = inner

        def handle_request(self, request):
            request.headers["Accept-Encoding"] = "identity"
            total = _total_s(request)
            ends = None if total is None else time.monotonic() + total
            with within(total, "client_timeout"):
                return self._send(request, ends)

        def _send(self, request, ends: float | None):
            for _ in range(_MAX_REDIRECTS):
                response = _bounded(lib, self.inner.handle_request(request), ends)
                location = response.headers.get("location")
                if response.status_code not in REDIRECT_CODES or not location:
                    return response
                try:
                    target = request.url.join(location)
                except Exception:  # an unparsable Location: the caller sees the redirect itself
                    return response
                if _origin(target) != _origin(request.url):
                    return response
                response.read()
                response.close()
                request = _follow(lib, request, response.status_code, target)
            return _bounded(lib, self.inner.handle_request(request), ends)

        def close(self) -> None:
            self.inner.close()

    return SameOriginRedirects


def _total_s(request) -> float | None:
    """The client's timeout, held for the whole answer (headers and body), not per read."""
    timeouts = request.extensions.get("timeout") or {}
    values = [v for v in timeouts.values() if isinstance(v, (int, float))] if isinstance(timeouts, dict) else []
    return max(values) if values else None


def _follow(lib: ModuleType, request, status: int, target):
    """The request a browser would send for a same-origin redirect: 307/308 keep method and body."""
    method = request.method
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method = "GET"
    headers = lib.Headers(request.headers)
    content = None
    if method == request.method:
        content = request.read()
    else:
        for name in ("Content-Length", "Transfer-Encoding", "Content-Type"):
            headers.pop(name, None)
    return lib.Request(method, target, headers=headers, content=content, extensions=request.extensions)


def _core_library(lib: ModuleType) -> ModuleType:
    """httpcore2 under httpx2, httpcore under httpx."""
    return importlib.import_module("httpcore2" if lib.__name__ == "httpx2" else "httpcore")


def _clamped(timeout: float | None, expired: type[Exception]) -> float | None:
    """`timeout` shortened to what the thread's deadlines leave; `expired` raised when nothing is left."""
    left = remaining(timeout)
    if left is not None and left <= 0.0:
        raise expired("the request's deadline passed while the server was still answering")
    return left


@functools.cache
def _deadline_backend_class(core: ModuleType) -> type:
    class DeadlineStream:
        """A network stream whose every read and write waits no longer than the thread's deadlines allow."""

        def __init__(self, inner) -> None:
            self.inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self.inner.read(max_bytes, _clamped(timeout, core.ReadTimeout))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self.inner.write(buffer, _clamped(timeout, core.WriteTimeout))

        def start_tls(self, ssl_context, server_hostname=None, timeout=None):
            inner = self.inner.start_tls(ssl_context, server_hostname, _clamped(timeout, core.ConnectTimeout))
            return DeadlineStream(inner)

        def close(self) -> None:
            self.inner.close()

        def get_extra_info(self, info: str):
            return self.inner.get_extra_info(info)

    class DeadlineBackend:
        """Opens connections within the thread's deadlines; their streams stay within them."""

        def __init__(self, inner) -> None:
            self.inner = inner

        def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            stream = self.inner.connect_tcp(
                host,
                port,
                timeout=_clamped(timeout, core.ConnectTimeout),
                local_address=local_address,
                socket_options=socket_options,
            )
            return DeadlineStream(stream)

        def connect_unix_socket(self, path, timeout=None, socket_options=None):
            stream = self.inner.connect_unix_socket(
                path, timeout=_clamped(timeout, core.ConnectTimeout), socket_options=socket_options
            )
            return DeadlineStream(stream)

        def sleep(self, seconds: float) -> None:
            self.inner.sleep(seconds)

    return DeadlineBackend


def _within_deadlines(lib: ModuleType, transport):
    """`transport` with its connection pool's sockets bound by the thread's deadlines (see the module doc)."""
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if backend is None:  # a library layout this was not written for: per-read timeouts only
        log.warning(
            "%s's transport has no connection pool to bound: a call's deadline holds per read only", lib.__name__
        )
        return transport
    pool._network_backend = _deadline_backend_class(_core_library(lib))(backend)
    return transport


def http_errors() -> tuple[type[Exception], ...]:
    """What a request of `http_client()` raises when it fails (connection, timeout, protocol, bad URL)."""
    lib = http_library()
    return (lib.HTTPError, lib.InvalidURL, lib.StreamError)


def http_client(**kwargs: Any):
    """A client of `http_library()` with the redirect policy above (extra arguments go to the client)."""
    lib = http_library()
    inner = _within_deadlines(lib, lib.HTTPTransport(limits=lib.Limits(**_LIMITS)))
    transport = _transport_class(lib)(inner)
    return lib.Client(transport=transport, follow_redirects=False, **kwargs)


def openai_client(api_key: str, base_url: str, **kwargs: Any):
    """`openai.OpenAI` on `http_client()`; OPENAI_ORG_ID / OPENAI_PROJECT_ID (which the library reads from the
    environment) are sent to OpenAI's own API only."""
    import openai

    client = openai.OpenAI(api_key=api_key, base_url=base_url, http_client=http_client(), **kwargs)
    if not is_openai_endpoint(base_url):
        client.organization = client.project = None
    return client


def redirect_note(location: str | None) -> str:
    """Why a redirect came back unfollowed, for the error a user reads."""
    where = f" to {location}" if location else ""
    return f"the server redirected{where}, another origin: not followed, so no credential goes there"
