"""Text a model sent, made storable: a reply may hold a lone UTF-16 surrogate ("\\ud800" is valid
JSON), which no UTF-8 file, parquet column or terminal can take; writing one killed the eval.

`valid_text` keeps every character that has a UTF-8 form (NUL, escapes and all: other layers decide
what to show) and changes only what has none: a surrogate pair split into two code points is joined
into its character, a lone surrogate becomes U+FFFD. It says how many code points it changed, so the
row that stores the text can say it was altered (`ALTERED_ATTRIBUTE`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ALTERED_ATTRIBUTE", "valid_text"]

ALTERED_ATTRIBUTE = "text_made_valid"  # a row's attribute: code points changed to store its text


def _valid_string(text: str) -> tuple[str, int]:
    try:
        text.encode("utf-8")
        return text, 0
    except UnicodeEncodeError:
        pass
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    changed = sum(1 for c in text if "\ud800" <= c <= "\udfff")
    return fixed, changed


def valid_text(value: Any) -> tuple[Any, int]:
    """(`value` with every string in it (dict keys too) encodable as UTF-8, code points changed).
    Walks dicts, lists and tuples without recursion, so a deep value cannot stop it either."""
    if isinstance(value, str):
        return _valid_string(value)
    changed = 0
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]  # (container, key): a slot whose value may need fixing
    while stack:
        holder, key = stack.pop()
        item = holder[key]
        if isinstance(item, str):
            holder[key], n = _valid_string(item)
            changed += n
        elif isinstance(item, dict):
            fixed = {}
            for k, v in item.items():
                if isinstance(k, str):
                    k, n = _valid_string(k)
                    changed += n
                fixed[k] = v
            holder[key] = fixed
            stack.extend((fixed, k) for k in fixed)
        elif isinstance(item, (list, tuple)):
            copy = list(item)
            holder[key] = copy
            stack.extend((copy, i) for i in range(len(copy)))
    return root[0], changed
