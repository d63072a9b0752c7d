"""The primitive match rules (paper Table 11) and the composite rules (Table 7), as pure functions.

Each compares the agent's value `a` with the truth `b` and returns a score in [0, 1]. Where the
paper is silent the choices are stated here once:
- label: equal after str(), stripping and lower-casing (an enum answered "Cool_Watch" matches).
- boolean: bool(a) == bool(b), reading the strings "false", "no", "0", "" and "none" as False.
- text: stripped strings equal (case kept, as the paper says).
- numeric: pass when |a-b| <= abs_tol (plus 1e-9 of float slack), or |a-b|/|b| <= rel_tol (rel_tol set and b != 0); with no
  tolerance only exact equality passes. A value that does not parse as a finite number scores 0;
  numeric strings such as "1,234.5" or "12.5%" parse.
- set: Dice 2|A∩B|/(|A|+|B|) on normalised items (as for label); both empty 1, one empty 0. A
  string answer is split on commas and semicolons.
- joint: 1 only when every sub-field passes its own rule.
- a null truth (the field does not apply this period) is matched only by a null or "N/A" answer.
- itemwise: items keyed by name (a dict name -> value, a list of dicts keyed by `item_key`, or a
  list of names); the mean over the union of keys of the per-item score (missing on either side
  0; present on both: the value rule, or 1 when the rule compares presence only). Both empty 1.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from tsbench.tasks.timesage.contract import FieldSpec

_FALSE_STRINGS = {"false", "no", "0", "", "none", "null", "n"}
_SLACK = 1e-9  # float subtraction noise: |-0.31 - -0.30| is 0.0100000000000000089
_NOT_APPLICABLE = {"n/a", "na", "none", "null", ""}
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def norm(value: Any) -> str:
    return str(value).strip().lower()


def label_match(a: Any, b: Any) -> float:
    if a is None or b is None:
        return float(a is None and b is None)
    return float(norm(a) == norm(b))


def as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return norm(value) not in _FALSE_STRINGS
    return bool(value)


def boolean_match(a: Any, b: Any) -> float:
    return float(as_bool(a) == as_bool(b))


def text_match(a: Any, b: Any) -> float:
    if a is None or b is None:
        return float(a is None and b is None)
    return float(str(a).strip() == str(b).strip())


def as_number(value: Any) -> float | None:
    """A finite float from a number or a numeric string; None otherwise (booleans are not numbers)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip().replace(",", "").rstrip("%").strip()
        if not _NUMBER.match(text):
            return None
        number = float(text)
    else:
        return None
    return number if math.isfinite(number) else None


def numeric_check(a: Any, b: Any, abs_tol: float | None = None, rel_tol: float | None = None) -> float:
    x, y = as_number(a), as_number(b)
    if x is None or y is None:
        return 0.0
    diff = abs(x - y)
    if abs_tol is None and rel_tol is None:
        return float(x == y)
    if abs_tol is not None and diff <= abs_tol + _SLACK * max(1.0, abs(y)):
        return 1.0
    if rel_tol is not None and y != 0 and diff / abs(y) <= rel_tol + _SLACK:
        return 1.0
    return 0.0


def as_items(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, str):
        return [part for part in re.split(r"[;,]", value) if part.strip()]
    if isinstance(value, (dict, list, tuple, set)):  # a dict's items are its keys
        return list(value)
    return [value]


def set_overlap(a: Any, b: Any) -> float:
    first = {norm(x) for x in as_items(a)}
    second = {norm(x) for x in as_items(b)}
    if not first and not second:
        return 1.0
    if not first or not second:
        return 0.0
    return 2 * len(first & second) / (len(first) + len(second))


PRIMITIVES = {"label": label_match, "boolean": boolean_match, "text": text_match, "set": set_overlap}


def primitive(rule: str, a: Any, b: Any, abs_tol: float | None = None, rel_tol: float | None = None) -> float:
    if rule == "numeric":
        return numeric_check(a, b, abs_tol, rel_tol)
    if rule not in PRIMITIVES:
        raise ValueError(f"{rule!r} is not a primitive rule")
    return PRIMITIVES[rule](a, b)


def joint_score(a: Any, b: dict[str, Any], parts: dict[str, dict[str, Any]]) -> float:
    if not isinstance(a, dict):
        return 0.0
    for name, spec in parts.items():
        if primitive(spec["rule"], a.get(name), b.get(name), spec.get("abs_tol"), spec.get("rel_tol")) < 1.0:
            return 0.0
    return 1.0


def keyed_items(value: Any, item_key: str | None) -> dict[str, Any]:
    """{normalised name: value} from a dict, a list of dicts (keyed by item_key) or a list of names."""
    if isinstance(value, dict):
        return {norm(k): v for k, v in value.items()}
    out: dict[str, Any] = {}
    for item in as_items(value):
        if isinstance(item, dict):
            if item_key is not None and item_key in item:
                out[norm(item[item_key])] = item
        else:
            out[norm(item)] = None
    return out


def itemwise_score(a: Any, b: Any, item_key: str | None, value_rule: dict[str, Any] | None) -> float:
    first, second = keyed_items(a, item_key), keyed_items(b, item_key)
    keys = set(first) | set(second)
    if not keys:
        return 1.0
    total = 0.0
    for key in keys:
        if key not in first or key not in second:
            continue
        if value_rule is None:
            total += 1.0
            continue
        mine, theirs = first[key], second[key]
        if value_rule.get("field") is not None:  # list-of-dicts items: compare one member
            mine = mine.get(value_rule["field"]) if isinstance(mine, dict) else None
            theirs = theirs.get(value_rule["field"]) if isinstance(theirs, dict) else None
        total += primitive(value_rule["rule"], mine, theirs, value_rule.get("abs_tol"), value_rule.get("rel_tol"))
    return total / len(keys)


JudgeField = Callable[[FieldSpec, Any, Any], float]


def field_score(spec: FieldSpec, answer: Any, truth: Any, judge_field: JudgeField | None = None) -> float | None:
    """The field's match score, or None when it is not scored (a judged field with no truth, or
    no judge to ask)."""
    if spec.rule == "joint":
        return joint_score(answer, truth or {}, spec.parts)
    if spec.rule == "itemwise":
        return itemwise_score(answer, truth, spec.item_key, spec.value_rule)
    if spec.rule == "judge":
        if truth is None or judge_field is None:
            return None
        return judge_field(spec, answer, truth)
    if truth is None and spec.rule != "set":  # "not applicable this period": only a null answer matches
        return float(answer is None or norm(answer) in _NOT_APPLICABLE)
    return primitive(spec.rule, answer, truth, spec.abs_tol, spec.rel_tol)
