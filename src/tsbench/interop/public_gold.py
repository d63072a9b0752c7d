"""A gold answer as another tool shows it: the family's own bookkeeping keys (a leading underscore,
such as AnomalyXL's `_L`, the series length its metrics normalise by) are left out of what a
reader sees as the target; the scorer keeps the full gold."""

from __future__ import annotations

import json


def has_private_keys(gold: str | None) -> bool:
    """Whether a gold JSON object holds an underscore key public_gold would leave out."""
    try:
        value = json.loads(gold) if gold is not None else None
    except (TypeError, ValueError):
        return False
    return isinstance(value, dict) and any(str(k).startswith("_") for k in value)


def public_gold(gold: str) -> str:
    """The gold JSON text without underscore keys; text that is not a JSON object is returned as is."""
    try:
        value = json.loads(gold)
    except (TypeError, ValueError):
        return gold
    if not isinstance(value, dict):
        return gold
    return json.dumps({k: v for k, v in value.items() if not str(k).startswith("_")}, sort_keys=True, default=str)
