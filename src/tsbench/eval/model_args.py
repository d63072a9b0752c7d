"""`-M key=value` (model) and `-T key=value` (task) arguments, the spelling inspect and lm-eval users
type. Model values are read as JSON where they parse (numbers, true/false) and kept as text else;
task values stay text, converted and checked by the settings reader like any flag.

The shell list arrives comma-split by the settings reader, so a piece without "=" continues the value
before it (`-M price=0.4,1.6` stays one pair).
"""

from __future__ import annotations

import json
from typing import Any

from tsbench.core.errors import UserError


def _pairs(items: list[str] | None, flag: str) -> dict[str, str]:
    """KEY=VALUE pieces -> {key: raw value}; a first piece without "=" is one line naming the flag."""
    out: dict[str, str] = {}
    last: str | None = None
    for item in items or []:
        key, eq, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if eq and key.isidentifier():
            last = key
            out[key] = value.strip()
        elif last is not None:
            out[last] += f",{item.strip()}"
        else:
            raise UserError(f"{flag} takes KEY=VALUE (e.g. {flag} context_tokens=8192), got {item!r}")
    return out


def _value(text: str) -> Any:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (int, float, bool)) else text


def parse_model_args(items: list[str] | None) -> dict[str, Any]:
    """-M pairs as provider options; `price` stays the IN,OUT text the providers parse."""
    args = {key: _value(raw) for key, raw in _pairs(items, "-M").items()}
    if "price" in args:
        args["price"] = str(args["price"])
    return args


def task_settings(items: list[str] | None) -> dict[str, str]:
    """-T pairs as settings by name (regime, categories, lengths, split, data, ...), as typed text."""
    return _pairs(items, "-T")


def harness_args(items: list[str] | None) -> dict[str, str]:
    """-H pairs: the chosen harness's settings by name, as typed text."""
    return _pairs(items, "-H")
