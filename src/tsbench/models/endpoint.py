"""Which server a chat model talks to, which key it may send there, and whose price list applies.

A key belongs to its endpoint: OPENAI_API_KEY goes only to OpenAI's own API (https on
api.openai.com), never to a `--base-url` (a local server, a colleague's proxy) that happens to speak
the same protocol. Another server gets the key from the variable the user names (`--api-key-env`),
or a placeholder the client library insists on. OPENAI_BASE_URL counts as a base URL like any other.
The same rule decides pricing: OpenAI's list prices apply at OpenAI only; elsewhere cost is unknown
unless the user states a price.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
OPENAI_HOST = "api.openai.com"
# A placeholder key for OpenAI-compatible servers that don't check one (the client insists on a value).
PLACEHOLDER_API_KEY = "EMPTY"


def resolve_base_url(base_url: str | None) -> str:
    """The explicit URL, else OPENAI_BASE_URL, else OpenAI's own API."""
    return (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL).rstrip("/")


def is_openai_endpoint(base_url: str) -> bool:
    """True for OpenAI's own API only: https on api.openai.com (any path, e.g. /v1)."""
    parts = urlsplit(base_url.strip())
    return parts.scheme == "https" and (parts.hostname or "").lower() == OPENAI_HOST


def same_origin(first: str, second: str) -> bool:
    """Whether two URLs share scheme, host and port (a port left out is the scheme's default)."""
    a, b = urlsplit(first.strip()), urlsplit(second.strip())
    try:
        ports = [u.port or {"http": 80, "https": 443}.get(u.scheme) for u in (a, b)]
    except ValueError:  # a port that is no number
        return False
    return (a.scheme, (a.hostname or "").lower(), ports[0]) == (b.scheme, (b.hostname or "").lower(), ports[1])


def api_key_for(
    base_url: str, *, api_key: str | None = None, api_key_env: str | None = None, fallback_env: str | None = None
) -> str:
    """The key to send to `base_url`.

    An explicit `api_key` (Python callers) wins; then the variable named by `api_key_env` (it must be
    set); then OPENAI_API_KEY, but only for OpenAI's own API (where it is required); then
    `fallback_env` (e.g. VLLM_API_KEY for vllm/ servers); else the placeholder. Raises ValueError
    (one line) when a required key is missing.
    """
    if api_key:
        return api_key
    if api_key_env:
        value = os.environ.get(api_key_env)
        if not value:
            raise ValueError(f"--api-key-env names {api_key_env}, which is not set (or empty) in the environment")
        return value
    if is_openai_endpoint(base_url):
        value = os.environ.get("OPENAI_API_KEY")
        if not value:
            raise ValueError("OPENAI_API_KEY is not set: export it, or pass --base-url for an OpenAI-compatible server")
        return value
    if fallback_env and os.environ.get(fallback_env):
        return os.environ[fallback_env]
    return PLACEHOLDER_API_KEY


def parse_price(price: str | tuple[float, float] | list[float] | None) -> tuple[float, float] | None:
    """A user's price, "IN,OUT" US dollars per million input and output tokens, as two numbers."""
    if price is None or price == "":
        return None
    parts = price.split(",") if isinstance(price, str) else list(price)
    try:
        numbers = tuple(float(p) for p in parts)
    except (TypeError, ValueError):
        numbers = ()
    if len(numbers) != 2 or any(n < 0 or n != n for n in numbers):
        raise ValueError(
            f"--price must be IN,OUT dollars per million input and output tokens, e.g. 0.4,1.6 (got {price!r})"
        )
    return numbers[0], numbers[1]
