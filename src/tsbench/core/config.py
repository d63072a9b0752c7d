"""Settings dataclasses from TOML tables and flags, one rule for every stage.

A config dataclass may nest others (EvalConfig holds a HarnessConfig). Keys may be given flat
(`max_turns = 15` under [eval]) or as the nested table ([eval.harness_config]); a key that no
dataclass has is an error naming it, never silently dropped.
"""

from __future__ import annotations

import dataclasses
import tomllib
import typing
from pathlib import Path
from typing import Any, TypeVar

from tsbench.core.errors import UserError

T = TypeVar("T")


def _nested(cls: type) -> dict[str, type]:
    """Fields of `cls` whose type is itself a dataclass: name -> that dataclass."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if dataclasses.is_dataclass(hints[f.name])}


def field_names(cls: type) -> set[str]:
    """Every key `build` accepts for `cls`, nested dataclasses' fields included."""
    names = {f.name for f in dataclasses.fields(cls)}
    for inner in _nested(cls).values():
        names |= field_names(inner)
    return names


def _field_default(cls: type, name: str) -> Any:
    """The default a dataclass field would get (its factory called), or None when it has none."""
    found = next(f for f in dataclasses.fields(cls) if f.name == name)
    if found.default_factory is not dataclasses.MISSING:
        return found.default_factory()
    return None if found.default is dataclasses.MISSING else found.default


def build(cls: type[T], values: dict[str, Any], *, where: str = "settings", base: Any = None) -> T:
    """`cls(**values)`, routing flat keys to nested dataclasses and rejecting unknown keys.

    A nested dataclass starts from its field's own default (so `field(default_factory=lambda:
    HarnessConfig(temperature=1.0))` keeps temperature 1.0 unless a value overrides it)."""
    values = dict(values)
    nested = _nested(cls)
    own = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - field_names(cls) - set(nested))
    if unknown:
        raise UserError(f"unknown {where} key(s): {', '.join(unknown)}")
    kwargs: dict[str, Any] = {}
    for name, inner in nested.items():
        given = values.pop(name, None)
        given = dict(given) if isinstance(given, dict) else {}
        for key in field_names(inner):
            if key in values and key not in own:
                given[key] = values.pop(key)
        start = getattr(base, name) if base is not None else _field_default(cls, name)
        kwargs[name] = build(inner, given, where=where, base=start if dataclasses.is_dataclass(start) else None)
    kwargs.update({k: v for k, v in values.items() if k in own})
    try:
        return dataclasses.replace(base, **kwargs) if base is not None else cls(**kwargs)
    except TypeError as exc:
        raise UserError(f"bad {where}: {exc}") from None


def flat(obj: Any) -> dict[str, Any]:
    """The config as one flat dict (nested dataclasses' fields inlined): how run.json shows it."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            out.update(flat(value))
        else:
            out[f.name] = value
    return out


def read_toml_table(path: Path, table: str) -> dict[str, Any]:
    """The [table] of a TOML file (or the whole file when it has no such table)."""
    if not Path(path).is_file():
        raise UserError(f"no such file: {path}")
    try:
        data = tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: {exc}") from None
    return dict(data.get(table, data))
