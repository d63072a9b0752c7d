"""How many tokens a model's context holds and how long a prompt is in them, so budgets that must fit
the model (the single-pass text prompt) follow the model rather than a fixed character count.

A model says what it knows through two optional members: `context_tokens` (an int, or None when
unknown) and `count_tokens(messages)` (its own tokenizer's count, or None). Servers are asked once:
vLLM lists `max_model_len` and llama.cpp's server `meta.n_ctx_train` (or `n_ctx`) under /v1/models;
others (transformers serve, OpenAI) say nothing and take a declared `-M context_tokens=N`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from tsbench.models.base import Agent
from tsbench.models.http import http_client, http_errors
from tsbench.models.server_numbers import token_count

log = logging.getLogger(__name__)

# Characters per token assumed for serialized numbers when the tokenizer is unknown: Llama-style
# tokenizers split digits one by one (SmolLM2 measures 1.08), so 1.0 never overfills a context.
UNKNOWN_TOKENIZER_CHARS_PER_TOKEN = 1.0


def model_context_tokens(model: Agent) -> int | None:
    """The model's context in tokens, or None when neither declared nor discoverable."""
    value = getattr(model, "context_tokens", None)
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


def prompt_tokens(model: Agent, messages: list) -> int | None:
    """The prompt's length in the model's own tokens (chat template included), or None."""
    count = getattr(model, "count_tokens", None)
    return count(messages) if callable(count) else None


def _context_in(entry: dict[str, Any]) -> int | None:
    meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
    for value in (entry.get("max_model_len"), entry.get("context_length"), meta.get("n_ctx"), meta.get("n_ctx_train")):
        number = token_count(value)  # not True (a context of 1), nor a 4,000-digit int (no cap at all)
        if number:
            return number
    return None


def server_context_tokens(
    base_url: str, model_name: str, api_key: str | None = None, timeout_s: float = 5.0
) -> int | None:
    """What the server's /v1/models says this model's context is (None: it says nothing, or fails).
    Asked as the chat client asks (models/http.py): a redirect to another origin is not followed."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = f"{base_url.rstrip('/')}/models"
    try:
        with http_client(timeout=timeout_s) as client:
            response = client.get(url, headers=headers)
            if response.status_code != 200:
                log.debug("no context length from %s: HTTP %d", url, response.status_code)
                return None
            listing = json.loads(response.content.decode("utf-8", "replace"))
    except (OSError, ValueError, RecursionError, *http_errors()) as error:
        log.debug("no context length from %s: %s", url, error)
        return None
    entries = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(entries, list):
        return None
    entries = [e for e in entries if isinstance(e, dict)]
    mine = [e for e in entries if e.get("id") == model_name] or (entries if len(entries) == 1 else [])
    return _context_in(mine[0]) if mine else None
