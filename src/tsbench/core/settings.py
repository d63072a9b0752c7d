"""Each setting declared once: a dataclass field with its default, a docstring and its bounds.

`setting(default, "doc", gt=0, ...)` declares a field; `specs(cls)` reads the fields back (names,
types, defaults, docs, bounds, nested sections flattened) so the CLI flags, the TOML keys, the
checks and the resume comparison all derive from the one declaration. A value from a flag (text)
or a TOML file (typed) goes through `convert`, which says in one line what is wrong with it.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import inspect
import itertools
import textwrap
import types
import typing
from dataclasses import dataclass
from typing import Any

from tsbench.core.errors import UserError

_MISSING = dataclasses.MISSING


def setting(
    default: Any = _MISSING,
    doc: str = "",
    *,
    factory: Any = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: tuple | None = None,
    answers: bool = True,
    aliases: tuple[str, ...] = (),
) -> Any:
    """A dataclass field with its docstring and bounds. `answers=False` marks a setting that
    cannot change what a row's answer is (where results go, how many run at once, which rows):
    resume ignores it. `aliases` are old flag spellings, accepted but not shown. The harness section
    a setting belongs to ([eval.rlm] in TOML, its own group in --help) is its class's SECTION."""
    meta = dict(doc=doc, ge=ge, gt=gt, le=le, lt=lt, choices=choices, answers=answers, aliases=aliases)
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class Spec:
    """One setting as the CLI, the TOML reader and the checks see it."""

    name: str
    section: tuple[str, ...]  # nested dataclass fields leading to it; () for the top level
    base: type  # bool, int, float, str, or the element type of a list
    is_list: bool
    optional: bool
    default: Any
    doc: str
    meta: dict

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def answers(self) -> bool:
        return self.meta.get("answers", True)

    @property
    def flag_wanted(self) -> bool:
        """A setting tsbench declares is a flag; one a library base class declares (TRL's ~190
        TrainingArguments) is a TOML key only, so --help lists what tsbench documents."""
        return not self.meta.get("library")

    def describe_type(self) -> str:
        if self.base not in _SCALARS:
            return "a value"
        one, many = _SCALARS[self.base]
        return f"a list of {many}" if self.is_list else one


# each scalar type a setting may have, as a message names one value of it and a list of them
_SCALARS = {
    bool: ("true or false", "booleans"),
    int: ("an integer", "integers"),
    float: ("a number", "numbers"),
    str: ("a string", "strings"),
}


def _unwrap(hint: Any) -> tuple[type, bool, bool]:
    """(base type, is a list, may be None) of a field annotation such as `list[int] | None`.
    An annotation that is no one scalar or list of one (`dict | str`, `int | str`, a config
    class) has base `object`: its value passes through as TOML gave it, for its owner to check;
    an Enum beside str is str (TrainingArguments' `IntervalStrategy | str`)."""
    optional = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(args) < len(typing.get_args(hint))
        if str in args:
            args = [a for a in args if not (isinstance(a, type) and issubclass(a, enum.Enum))]
        if len(args) > 1:
            return object, False, optional
        hint = args[0]
    if typing.get_origin(hint) in (list, tuple):
        inner = typing.get_args(hint)[0] if typing.get_args(hint) else object
        return (inner if inner in _SCALARS else object), True, optional
    if hint not in _SCALARS:
        return object, False, optional
    return hint, False, optional


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not _MISSING:
        return f.default_factory()
    return None if f.default is _MISSING else f.default


@functools.cache
def attribute_docs(cls: type) -> dict[str, str]:
    """The docstrings written right under fields (cleanrl style), by field name; a class whose
    source cannot be read has none."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for here, after in itertools.pairwise(body):
        if (
            isinstance(here, ast.AnnAssign)
            and isinstance(here.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[here.target.id] = " ".join(after.value.value.split())
    return docs


def _declaring_section(cls: type, name: str) -> str | None:
    """The SECTION of the class that declares field `name` (a harness's own settings class)."""
    owner = _declaring_class(cls, name)
    return owner.__dict__.get("SECTION") if owner is not None else None  # its own, not one it inherits


def _declaring_class(cls: type, name: str) -> type | None:
    for owner in cls.__mro__:
        if name in inspect.get_annotations(owner):
            return owner
    return None


def _from_library(cls: type, name: str, metadata: Any) -> bool:
    """Declared by a library's class (TRL's), not with `setting(...)`: a plugin's settings are flags too."""
    owner = _declaring_class(cls, name)
    return owner is not None and not owner.__module__.startswith("tsbench") and "doc" not in metadata


def nested(cls: type) -> dict[str, type]:
    """Fields of `cls` whose type is itself a dataclass: name -> that dataclass."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if dataclasses.is_dataclass(hints[f.name])}


def specs(cls: type, section: tuple[str, ...] = ()) -> list[Spec]:
    """Every setting of `cls`, nested sections flattened (an outer field shadows an inner one of
    the same name, as `core.config.build` routes it)."""
    return list(_specs(cls, section))


@functools.cache
def _specs(cls: type, section: tuple[str, ...]) -> tuple[Spec, ...]:
    """`specs`, read once per class: a config class is declared once (TRL's has ~240 fields)."""
    hints = typing.get_type_hints(cls)
    inner = nested(cls)
    found: list[Spec] = []
    declared = inspect.get_annotations(cls)  # a class's own fields first, then inherited ones
    for f in sorted(dataclasses.fields(cls), key=lambda f: f.name not in declared):
        if f.name in inner or not f.init or f.metadata.get("raw"):
            continue
        base, is_list, optional = _unwrap(hints[f.name])
        meta = dict(f.metadata)
        meta["section"] = _declaring_section(cls, f.name)
        meta["library"] = _from_library(cls, f.name, f.metadata)
        doc = (
            f.metadata.get("doc")
            or next((attribute_docs(c)[f.name] for c in cls.__mro__ if f.name in attribute_docs(c)), "")
            or " ".join(str(f.metadata.get("help", "")).split())  # a library's own field help
        )
        found.append(Spec(f.name, section, base, is_list, optional, _default(f), doc, meta))
    seen = {s.name for s in found}
    for name, sub in inner.items():
        for spec in specs(sub, section + (name,)):
            if spec.name not in seen:
                found.append(spec)
                seen.add(spec.name)
    if not section:  # a nested section's defaults are the outer field's (GRPO samples at temperature 1)
        try:
            instance = cls()
        except TypeError:
            return tuple(found)
        found = [dataclasses.replace(s, default=get(instance, s)) if s.section else s for s in found]
    return tuple(found)


def spec_map(cls: type) -> dict[str, Spec]:
    return {s.name: s for s in specs(cls)}


def _scalar(spec: Spec, value: Any) -> Any:
    """One value of the spec's base type, from TOML (typed) or a flag (text); raises ValueError."""
    base = spec.base
    if base is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ValueError
    if isinstance(value, bool):
        raise TypeError  # True is an int to Python, never a count to a user
    if base is int:
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            return int(value.strip())
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValueError
    if base is float:
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            return float(value.strip())
        raise ValueError
    if base is str:
        if isinstance(value, str):
            return value
        raise ValueError
    return value


def convert(spec: Spec, value: Any) -> Any:
    """The value as the field's type, or one line naming the setting, what it takes and what it got."""
    if value is None:
        if spec.optional:
            return None
        raise UserError(f"{spec.name} ({spec.flag}) needs {spec.describe_type()}, got nothing")
    try:
        if spec.is_list:
            items = value if isinstance(value, (list, tuple)) else [value]
            if spec.base is not str or any(isinstance(i, str) and "," in i for i in items):
                items = [
                    p.strip() if isinstance(p, str) else p
                    for i in items
                    for p in (i.split(",") if isinstance(i, str) else [i])
                ]
            return [_scalar(spec, i) for i in items if not (isinstance(i, str) and not i)]
        return _scalar(spec, value)
    except (ValueError, TypeError, AttributeError):
        raise UserError(f"{spec.name} ({spec.flag}) takes {spec.describe_type()}, got {value!r}") from None


def problems(obj: Any) -> list[str]:
    """What is out of range in a built config (declared bounds and choices), one phrase each."""
    found = []
    table = spec_map(type(obj))
    for spec in table.values():
        value = get(obj, spec)
        for item in value if spec.is_list and value is not None else [value]:
            if (text := _bound_problem(spec, item)) is not None:
                found.append(text)
                break
    return found


def _bound_problem(spec: Spec, value: Any) -> str | None:
    if value is None:
        return None
    m = spec.meta
    name = f"{spec.name} ({spec.flag})"
    if m.get("choices") and value not in m["choices"]:
        return f"{name} must be one of {', '.join(map(str, m['choices']))}, got {value!r}"
    if spec.base in (int, float) and not isinstance(value, bool):
        for key, ok, word in (
            ("gt", lambda v, b: v > b, ">"),
            ("ge", lambda v, b: v >= b, ">="),
            ("lt", lambda v, b: v < b, "<"),
            ("le", lambda v, b: v <= b, "<="),
        ):
            if m.get(key) is not None and not ok(value, m[key]):
                return f"{name} must be {word} {m[key]:g}, got {value:g}"
    return None


def check(obj: Any) -> None:
    """One line listing every setting out of its declared range (exit 2), or nothing."""
    found = problems(obj)
    if found:
        raise UserError("; ".join(found))


def get(obj: Any, spec: Spec) -> Any:
    for part in spec.section:
        obj = getattr(obj, part)
    return getattr(obj, spec.name)


def answer_settings(obj: Any) -> dict[str, Any]:
    """Every setting that can change an answer, by name: what a resumed run must match."""
    return {s.name: get(obj, s) for s in specs(type(obj)) if s.answers}


def suggest(word: str, known: typing.Iterable[str], cutoff: float = 0.6, prefer: typing.Iterable[str] = ()) -> str:
    """' (did you mean x?)' for the nearest of `known` (core/nearest.py; `prefer`: the same section's
    names win a tie), else ''. `cutoff` is the share of the name's letters that must match."""
    from tsbench.core.nearest import nearest  # only a mistyped name needs it

    close = nearest(word, list(known), prefer, max_share=1 - cutoff)
    return f" (did you mean {close}?)" if close else ""
