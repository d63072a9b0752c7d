"""What a call to a known OpenAI model costs, so every row of a run can carry its price.

The numbers are approximate list prices (standard tier, no batch or cached-input discount) in US
dollars per million tokens, as published by OpenAI (mid-2025; gpt-5.5 as listed at its April 2026
release). They change: check them before quoting a cost. A model not listed here costs None
(unknown), never 0. Some models bill a whole request at higher rates once its prompt passes a
threshold (LONG_CONTEXT); a call is priced by its own prompt size, as the API bills it.

These are OpenAI's prices, so they apply only at OpenAI's own endpoint (`endpoint_cost_usd`): the
same model name behind another server (a proxy, a local one) costs what its owner says (`--price`),
or is unknown.
"""

from __future__ import annotations

import re

from tsbench.models.endpoint import is_openai_endpoint

# model -> (input $/1M tokens, output $/1M tokens); approximate list prices, mid-2025.
PRICES_PER_MILLION: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-5.5": (5.00, 30.00),
}

# model -> (prompt tokens above which the whole request is billed higher, input $/1M, output $/1M).
LONG_CONTEXT: dict[str, tuple[int, float, float]] = {
    "gpt-5.5": (272_000, 10.00, 45.00),
}

# Dated snapshots ("gpt-4.1-mini-2025-04-14") are priced like the model they pin.
_SNAPSHOT_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def _base_name(model: str) -> str:
    name = model.removeprefix("openai/")
    return name if name in PRICES_PER_MILLION else _SNAPSHOT_SUFFIX.sub("", name)


def price_for(model: str, input_tokens: int = 0) -> tuple[float, float] | None:
    """(input, output) dollars per million tokens for `model` on a call with `input_tokens` prompt
    tokens, or None if the model is not in the table."""
    name = _base_name(model)
    price = PRICES_PER_MILLION.get(name)
    if price is not None and name in LONG_CONTEXT and input_tokens > LONG_CONTEXT[name][0]:
        return LONG_CONTEXT[name][1:]
    return price


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """Dollar cost of one call, or None when the model's price is unknown."""
    price = price_for(model, input_tokens)
    if price is None:
        return None
    input_price, output_price = price
    return (input_tokens * input_price + output_tokens * output_price) / 1_000_000


def endpoint_cost_usd(
    model: str, base_url: str, input_tokens: int, output_tokens: int, price: tuple[float, float] | None = None
) -> float | None:
    """One call's cost at `base_url`: the user's `price` (input, output $/1M tokens) when given, else
    the list price at OpenAI's own API only, else None (unknown, never 0)."""
    if price is not None:
        return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
    if not is_openai_endpoint(base_url):
        return None
    return cost_usd(model, input_tokens, output_tokens)
