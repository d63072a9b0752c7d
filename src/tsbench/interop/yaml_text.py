"""Just enough YAML to write a dataset card's header: mappings, lists and scalars, block style.

Strings are written JSON-quoted, which YAML reads as double-quoted scalars, so no value can
change meaning (a model name like `no` or `1e3` stays a string). No PyYAML needed to write.
"""

from __future__ import annotations

import json
import math
from typing import Any


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return ".nan" if math.isnan(value) else repr(value)
    return json.dumps(str(value), ensure_ascii=False)


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return [pad + "{}"]
        out = []
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                out.append(f"{pad}{key}:")
                out += _lines(item, indent + (0 if isinstance(item, list) else 2))
            else:
                out.append(
                    f"{pad}{key}: {_scalar(item) if not isinstance(item, (dict, list)) else ('{}' if isinstance(item, dict) else '[]')}"
                )
        return out
    if isinstance(value, list):
        if not value:
            return [pad + "[]"]
        out = []
        for item in value:
            inner = _lines(item, indent + 2)
            out.append(pad + "- " + inner[0].lstrip())
            out += inner[1:]
        return out
    return [pad + _scalar(value)]


def dump(value: dict) -> str:
    """A mapping as block YAML, ending with a newline."""
    return "\n".join(_lines(value, 0)) + "\n"
