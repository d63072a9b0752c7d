"""TSRBench's own scoring, as its evaluation/evaluate.py does it (github.com/tianyi-lab/TSRBench), without
running the reply.

The official `evaluate_MCQ(label, reply)` calls Python's `eval()` on the stored reply, takes its
"answer" entry, removes commas, `$`, spaces, `*` and parentheses, strips it, and compares the first
character with the label, case aside (an empty answer scores 0). A reply that does not evaluate, has
no "answer", or whose answer is not text gives None, and the caller leaves it out of the accuracy.
Here the reply is parsed, never run: a Python literal (strings, bytes, numbers, True/False/None,
Ellipsis, tuples, lists, sets, dicts, f-strings of literals) and the bounded operations on literals
(unary operators, + and -, indexing and slicing, comparisons, and/or, a conditional, and the
constructors dict, list, tuple, set, frozenset) are built as eval would build them; anything else
(a name, another call, *, a comprehension) counts as not evaluating, where eval would run it. `text_inference.py` strips ```json fences before it stores a reply; `strip_fences`
does the same.
"""

from __future__ import annotations

import ast
import operator
import warnings
from typing import Any

_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Invert: operator.invert, ast.Not: operator.not_}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub}  # sizes stay within the reply's own
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_CONSTRUCTORS = {"dict": dict, "list": list, "tuple": tuple, "set": set, "frozenset": frozenset}
_NAMES = {"Ellipsis": Ellipsis, "NotImplemented": NotImplemented, "__debug__": True}


class NotLiteral(Exception):
    """The reply is not a Python literal (eval would fail on it, or would run code)."""


def strip_fences(reply: str) -> str:
    """What text_inference.py stores for a reply: code fences blanked out, then stripped."""
    return reply.replace("```json", " ").replace("```", " ").strip()


def python_literal(text: str) -> Any:
    """The value eval(text) gives for a Python literal; NotLiteral for anything else."""
    if not isinstance(text, str):
        raise NotLiteral("not text")
    try:  # eval() skips leading spaces and tabs; ast.parse would call them an indent
        with warnings.catch_warnings():  # "invalid escape sequence" and the like: a reply's, not ours
            warnings.simplefilter("ignore")
            tree = ast.parse(text.lstrip(" \t"), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise NotLiteral(type(exc).__name__) from None
    try:
        return _value(tree.body)
    except RecursionError:
        raise NotLiteral("too deep") from None


def _value(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        if any(isinstance(e, ast.Starred) for e in node.elts):
            raise NotLiteral("starred")
        items = [_value(e) for e in node.elts]
        return _apply({ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)], items)
    if isinstance(node, ast.Dict):
        built: dict = {}
        for key, value in zip(node.keys, node.values):
            if key is None:  # {**mapping}
                merged = _value(value)
                if not isinstance(merged, dict):
                    raise NotLiteral("** of a non-mapping")
                built.update(merged)
            else:
                _apply(built.__setitem__, _value(key), _value(value))
        return built
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _apply(_UNARY[type(node.op)], _value(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _apply(_BINARY[type(node.op)], _value(node.left), _value(node.right))
    if isinstance(node, ast.Compare):
        left = _value(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            right = _value(right_node)
            if not _apply(_COMPARE[type(op)], left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BoolOp):
        value = None
        for part in node.values:
            value = _value(part)
            if bool(value) == isinstance(node.op, ast.Or):
                return value
        return value
    if isinstance(node, ast.IfExp):
        return _value(node.body) if _value(node.test) else _value(node.orelse)
    if isinstance(node, ast.Subscript):
        return _apply(operator.getitem, _value(node.value), _value(node.slice))
    if isinstance(node, ast.Slice):
        return slice(*(None if p is None else _value(p) for p in (node.lower, node.upper, node.step)))
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CONSTRUCTORS:
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise NotLiteral("starred")
        args = [_value(a) for a in node.args]
        kwargs: dict = {}
        for keyword in node.keywords:
            value = _value(keyword.value)
            if keyword.arg is None:
                if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
                    raise NotLiteral("bad ** argument")
                kwargs.update(value)
            else:
                kwargs[keyword.arg] = value
        return _apply(_CONSTRUCTORS[node.func.id], *args, **kwargs)
    if isinstance(node, ast.JoinedStr):
        return "".join(_value(part) for part in node.values)
    if isinstance(node, ast.FormattedValue):
        value = _value(node.value)
        convert = {-1: lambda v: v, 115: str, 114: repr, 97: ascii}[node.conversion]
        spec = _value(node.format_spec) if node.format_spec is not None else ""
        try:
            return format(convert(value), spec)
        except (TypeError, ValueError):
            raise NotLiteral("bad format") from None
    raise NotLiteral(type(node).__name__)


def _apply(function, *args, **kwargs):
    try:
        return function(*args, **kwargs)
    except (TypeError, ValueError, IndexError, KeyError, ZeroDivisionError, OverflowError):
        raise NotLiteral("eval raises") from None  # -'a', ~1.5, (1,)[5]: eval raises too


def evaluate_mcq(label: Any, reply: Any) -> float | None:
    """The official score of one reply: 1.0 or 0.0, or None where the official caller skips it."""
    try:
        value = python_literal(reply)
    except NotLiteral:
        return None
    try:
        if "answer" not in value:
            return None
        answer = value["answer"]
    except (TypeError, KeyError, IndexError):  # `in` on a number, a str or list indexed by a str
        return None
    if not isinstance(answer, str):
        return None  # .replace on a non-str raises (bytes: a str argument), and the caller skips it
    for mark in (",", "$", " ", "*", "(", ")"):
        answer = answer.replace(mark, "")
    answer = answer.strip()
    if not answer:
        return 0.0
    return 1.0 if answer[0].lower() == str(label).lower() else 0.0
