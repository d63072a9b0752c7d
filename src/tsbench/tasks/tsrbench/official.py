"""TSRBench's own scoring, as its evaluation/evaluate.py does it (github.com/tianyi-lab/TSRBench), without
running the reply.

The official `evaluate_MCQ(label, reply)` calls Python's `eval()` on the stored reply, takes its
"answer" entry, removes commas, `$`, spaces, `*` and parentheses, strips it, and compares the first
character with the label, case aside (an empty answer scores 0). A reply that does not evaluate, has
no "answer", or whose answer is not text gives None, and the caller leaves it out of the accuracy.

Here the reply is parsed, never run: an evaluator over the reply's syntax tree builds what eval would
build from constants alone -- literals (strings, bytes, numbers, True/False/None, Ellipsis, tuples,
lists, sets, dicts, f-strings), every operator on them (unary, binary: + - * / // % ** << >> | & ^ @,
comparisons, and/or, a conditional, indexing and slicing) and the constructors dict, list, tuple,
set, frozenset -- with Python's own operations, so the values, errors and scores are eval's. What
eval would compute without bound is refused before it is computed (`'a' * 10**9`, `2 ** 10**9`,
`'%999999999s' % x`): a value over `MAX_SIZE` units (a character, a byte, an item, 8 bits of an
integer) counts as unreadable. Anything else (a name, another call, an attribute, a comprehension,
a lambda, `:=`) counts as not evaluating, where eval would run code. `text_inference.py` strips
```json fences before it stores a reply; `strip_fences` does the same.
"""

from __future__ import annotations

import ast
import operator
import re
import warnings
from typing import Any

MAX_SIZE = 1 << 22  # about 4 million units: far above any reply, far below what would stall a scorer

_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Invert: operator.invert, ast.Not: operator.not_}
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.BitAnd: operator.and_,
    ast.BitXor: operator.xor,
    ast.MatMult: operator.matmul,
}
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
_SEQUENCES = (str, bytes, list, tuple)
_CONTAINERS = (list, tuple, set, frozenset)
# a printf-style conversion: %[(key)][flags][width][.precision][length]type
_PERCENT = re.compile(rb"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?(.)", re.S)
_SPEC_NUMBERS = re.compile(r"\d+")


class NotLiteral(Exception):
    """The reply is not a Python literal (eval would fail on it, or would run code)."""


class TooLarge(NotLiteral):
    """eval would build a value over MAX_SIZE (and might stall or exhaust memory doing it)."""


def strip_fences(reply: str) -> str:
    """What text_inference.py stores for a reply: code fences blanked out, then stripped."""
    return reply.replace("```json", " ").replace("```", " ").strip()


def python_literal(text: str) -> Any:
    """The value eval(text) gives for an expression of constants; NotLiteral for anything else."""
    if not isinstance(text, str):
        raise NotLiteral("not text")
    try:  # eval() skips leading spaces and tabs; ast.parse would call them an indent
        with warnings.catch_warnings():  # "invalid escape sequence" and the like: a reply's, not ours
            warnings.simplefilter("ignore")
            tree = ast.parse(text.lstrip(" \t"), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise NotLiteral(type(exc).__name__) from None
    try:
        return _Evaluator().value(tree.body)
    except RecursionError:
        raise NotLiteral("too deep") from None


class _Evaluator:
    """One reply's evaluation: values are built bottom-up, each one's size known before a bigger one
    is built from it (sizes are cached by identity; the values are kept alive so ids stay unique)."""

    def __init__(self) -> None:
        self.sizes: dict[int, int] = {}
        self.kept: list[Any] = []

    def size(self, value: Any) -> int:
        """Units of a value: nested items counted each time they occur (as repr and % would print them)."""
        known = self.sizes.get(id(value))
        if known is not None:
            return known
        if isinstance(value, (str, bytes, bytearray)):
            found = len(value) + 1
        elif isinstance(value, int):
            found = value.bit_length() // 8 + 1
        elif isinstance(value, dict):
            found = 1 + sum(self.size(k) + self.size(v) for k, v in value.items())
        elif isinstance(value, _CONTAINERS):
            found = 1
            for item in value:
                found += self.size(item)
                if found > MAX_SIZE:
                    break
        else:  # float, complex, None, Ellipsis, slice
            found = 1
        return self._keep(value, found)

    def _keep(self, value: Any, size: int) -> int:
        if size > MAX_SIZE:
            raise TooLarge("value too large")
        self.sizes[id(value)] = size
        self.kept.append(value)
        return size

    def value(self, node: ast.AST) -> Any:
        """The node's value; a computed one over MAX_SIZE raises TooLarge (a literal is the reply's own)."""
        result = self._node(node)
        if not isinstance(node, ast.Constant):
            self.size(result)
        return result

    def _node(self, node: ast.AST) -> Any:  # noqa: C901 -- one branch per node kind, as eval's
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = []
            for element in node.elts:  # [*'ab']: unpacking a value is no code
                if isinstance(element, ast.Starred):
                    items.extend(_apply(list, self.value(element.value)))
                else:
                    items.append(self.value(element))
            self._bounded(sum(self.size(i) for i in items))
            return _apply({ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)], items)
        if isinstance(node, ast.Dict):
            built: dict = {}
            for key, value in zip(node.keys, node.values):
                if key is None:  # {**mapping}
                    merged = self.value(value)
                    if not isinstance(merged, dict):
                        raise NotLiteral("** of a non-mapping")
                    built.update(merged)
                else:
                    _apply(built.__setitem__, self.value(key), self.value(value))
            return built
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _apply(_UNARY[type(node.op)], self.value(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = self.value(node.left), self.value(node.right)
            self._check_binary(node.op, left, right)
            return _apply(_BINARY[type(node.op)], left, right)
        if isinstance(node, ast.Compare):
            left = self.value(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = self.value(right_node)
                if not _apply(_COMPARE[type(op)], left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BoolOp):
            value = None
            for part in node.values:
                value = self.value(part)
                if bool(value) == isinstance(node.op, ast.Or):
                    return value
            return value
        if isinstance(node, ast.IfExp):
            return self.value(node.body) if self.value(node.test) else self.value(node.orelse)
        if isinstance(node, ast.Subscript):
            return _apply(operator.getitem, self.value(node.value), self.value(node.slice))
        if isinstance(node, ast.Slice):
            return slice(*(None if p is None else self.value(p) for p in (node.lower, node.upper, node.step)))
        if isinstance(node, ast.Name) and node.id in _NAMES:
            return _NAMES[node.id]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CONSTRUCTORS:
            return self._construct(node)
        if isinstance(node, ast.JoinedStr):
            return "".join(self.value(part) for part in node.values)
        if isinstance(node, ast.FormattedValue):
            value = self.value(node.value)
            convert = {-1: lambda v: v, 115: str, 114: repr, 97: ascii}[node.conversion]
            spec = self.value(node.format_spec) if node.format_spec is not None else ""
            if isinstance(spec, str):
                self._bounded(sum(int(n) for n in _SPEC_NUMBERS.findall(spec)) + self.size(value))
            try:
                return format(convert(value), spec)
            except (TypeError, ValueError, OverflowError):
                raise NotLiteral("bad format") from None
        raise NotLiteral(type(node).__name__)

    def _construct(self, node: ast.Call) -> Any:
        args = []
        for argument in node.args:
            if isinstance(argument, ast.Starred):
                args.extend(_apply(list, self.value(argument.value)))
            else:
                args.append(self.value(argument))
        kwargs: dict = {}
        for keyword in node.keywords:
            value = self.value(keyword.value)
            if keyword.arg is None:
                if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
                    raise NotLiteral("bad ** argument")
                kwargs.update(value)
            else:
                kwargs[keyword.arg] = value
        return _apply(_CONSTRUCTORS[node.func.id], *args, **kwargs)  # no bigger than its arguments

    @staticmethod
    def _bounded(size: int) -> None:
        if size > MAX_SIZE:
            raise TooLarge("value too large")

    def _check_binary(self, op: ast.operator, left: Any, right: Any) -> None:
        """Refuse an operation whose result would be over MAX_SIZE, before it is computed."""
        if isinstance(op, (ast.Add, ast.BitOr)):  # concatenation, union: the two sizes at most
            self._bounded(self.size(left) + self.size(right))
        elif isinstance(op, ast.Mult):
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, _SEQUENCES) and isinstance(times, int):
                    self._bounded(self.size(seq) * max(times, 0))
            if isinstance(left, int) and isinstance(right, int):
                self._bounded(self.size(left) + self.size(right))
        elif isinstance(op, ast.Pow) and isinstance(left, int) and isinstance(right, int):
            if right > 0 and abs(left) > 1:
                self._bounded(left.bit_length() * min(right, MAX_SIZE * 8 + 1) // 8)
        elif isinstance(op, ast.LShift) and isinstance(left, int) and isinstance(right, int):
            if left and right > 0:
                self._bounded(self.size(left) + min(right, MAX_SIZE * 8 + 8) // 8)
        elif isinstance(op, ast.Mod) and isinstance(left, (str, bytes)):
            self._check_percent(left, right)

    def _check_percent(self, template: str | bytes, args: Any) -> None:
        """printf-style formatting: widths, precisions and each conversion's argument bound the output."""
        raw = template.encode("utf-8", "surrogatepass") if isinstance(template, str) else template
        conversions = _PERCENT.findall(raw)
        total, stars = len(raw), 0
        for width, precision, _ in conversions:
            for number in (width, precision):
                if number == b"*":
                    stars += 1
                elif number:
                    total += int(number)
        if stars:  # widths given as arguments: each at most the bound
            given = args if isinstance(args, tuple) else (args,)
            for item in given:
                if isinstance(item, int) and abs(item) > MAX_SIZE:
                    raise TooLarge("width too large")
            total += stars * MAX_SIZE // 8
        self._bounded(total + len(conversions) * 6 * self.size(args))  # repr writes a unit in at most 6


def _apply(function, *args, **kwargs):
    try:
        return function(*args, **kwargs)
    except (TypeError, ValueError, IndexError, KeyError, ZeroDivisionError, OverflowError):
        raise NotLiteral("eval raises") from None
    except MemoryError:  # a bound above was not enough (it should be): never a crash of the scorer
        raise TooLarge("out of memory") from None  # -'a', ~1.5, (1,)[5]: eval raises too


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
