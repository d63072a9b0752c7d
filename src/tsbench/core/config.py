"""Settings dataclasses from TOML tables and flags, one rule for every stage.

A config dataclass may nest others (EvalConfig holds the shared harness settings and [memory]; the
chosen harness's own settings are read after it, harness/settings.py `build_run`). Keys may be given flat
(`max_turns = 15` under [eval]) or as the nested table; a key or table that no dataclass has is an
error naming it with a did-you-mean, never silently dropped. Every value is converted to its
field's type and checked against the field's declared bounds (core/settings.py) before anything
runs: a bad one is one line.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any, TypeVar

from tsbench.core.errors import UserError
from tsbench.core.settings import check, convert, nested, spec_map, specs, suggest

T = TypeVar("T")
# The top-level tables a config file may hold: one per command that reads configs.
CONFIG_TABLES = ("eval", "grpo", "sft")


def field_names(cls: type) -> set[str]:
    """Every key `build` accepts for `cls`, nested dataclasses' fields included."""
    names = {f.name for f in dataclasses.fields(cls)}
    for inner in nested(cls).values():
        names |= field_names(inner)
    return names


def _field_default(cls: type, name: str) -> Any:
    """The default a dataclass field would get (its factory called), or None when it has none."""
    found = next(f for f in dataclasses.fields(cls) if f.name == name)
    if found.default_factory is not dataclasses.MISSING:
        return found.default_factory()
    return None if found.default is dataclasses.MISSING else found.default


def _unknown(cls: type, values: dict[str, Any], where: str) -> None:
    known = field_names(cls)
    unknown = sorted(set(values) - known)
    if unknown and (section := cls.__dict__.get("SECTION")):  # a harness's own table, [eval.tools]
        first, members = unknown[0], [f.name for f in dataclasses.fields(cls)]
        raise UserError(
            f"unknown key {first} in [{section}]{suggest(first, members)}; [{section}] holds {', '.join(members)}"
        )
    if unknown:
        first = unknown[0]
        own = [f.name for f in dataclasses.fields(cls)]  # a key of this table is the likelier meaning
        raise UserError(f"unknown setting(s) {', '.join(unknown)}{suggest(first, known, prefer=own)} ({where})")


def _fold_aliases(cls: type, values: dict[str, Any]) -> None:
    """A key spelled as one of a setting's old names (`aliases`, `--steps` for max_steps) is that setting."""
    own = field_names(cls)  # [eval.tools] is a nested section: its name is a field
    for spec in specs(cls):
        for alias in spec.meta.get("aliases") or ():
            key = alias.lstrip("-").replace("-", "_")
            if len(alias) > 2 and key in values and key not in own:
                if spec.name in values:
                    raise UserError(f"{key} and {spec.name} name one setting ({spec.name}): give one of them")
                values[spec.name] = values.pop(key)


def build(cls: type[T], values: dict[str, Any], *, where: str = "settings", base: Any = None) -> T:
    """`cls(**values)` as `build_fields` makes it; a run config that reads its harness's settings once the
    harness is chosen (EvalConfig, GRPOConfig: a `from_values` classmethod, harness/settings.py) builds itself."""
    if base is None and (own := getattr(cls, "from_values", None)) is not None:
        return own(values, where=where)
    return build_fields(cls, values, where=where, base=base)


def build_fields(
    cls: type[T], values: dict[str, Any], *, where: str = "settings", base: Any = None, _top: bool = True
) -> T:
    """`cls(**values)`, routing flat keys to nested dataclasses, converting every value to its
    field's type and rejecting unknown keys and values out of their declared range.

    A nested dataclass starts from its field's own default (so `field(default_factory=lambda:
    HarnessSettings(max_tokens=4096))` keeps max_tokens 4096 unless a value overrides it)."""
    values = {str(k).replace("-", "_"): v for k, v in values.items()}  # [eval.file-agent] = file_agent
    if _top:
        _fold_aliases(cls, values)
    inner_classes = nested(cls)
    own = {f.name for f in dataclasses.fields(cls)}
    _unknown(cls, values, where)
    table = {name: spec for name, spec in spec_map(cls).items() if name in own}
    kwargs: dict[str, Any] = {}
    for name, inner in inner_classes.items():
        given = values.pop(name, None)
        if given is not None and not isinstance(given, dict):
            raise UserError(f"{name} is a table of settings, got {given!r}")
        given = dict(given) if isinstance(given, dict) else {}
        for key in field_names(inner):
            if key in values and key not in own:
                given[key] = values.pop(key)
        start = getattr(base, name) if base is not None else _field_default(cls, name)
        kwargs[name] = build_fields(
            inner, given, where=where, base=start if dataclasses.is_dataclass(start) else None, _top=False
        )
    try:
        kwargs.update({k: convert(table[k], v) if k in table else v for k, v in values.items() if k in own})
    except UserError as error:
        raise UserError(f"{error} ({where})" if " in " in where else str(error)) from None
    try:
        built = dataclasses.replace(base, **kwargs) if base is not None else cls(**kwargs)
    except TypeError as exc:
        raise UserError(f"bad {where}: {exc}") from None
    if _top:
        check(built)
    return built


def flat(obj: Any) -> dict[str, Any]:
    """The config as one flat dict (nested dataclasses' fields inlined): how run.json shows it."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if f.metadata.get("raw"):  # values not yet read as settings (harness_args): no setting of the run
            continue
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            for key, inner in flat(value).items():
                out.setdefault(key, inner)
        elif f.name not in out:
            out[f.name] = value
    return out


def read_toml_table(path: Path, table: str) -> dict[str, Any]:
    """The [table] of a TOML file (or the whole file when it names no command's table). A table
    that is no command's ([evaluation]) is refused with a did-you-mean."""
    if not Path(path).is_file():
        raise UserError(f"no such file: {path}")
    try:
        data = tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: {exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path} is not UTF-8 text") from None
    except RecursionError:  # arrays or inline tables nested thousands deep
        raise UserError(f"{path}: nested too deeply to read as TOML") from None
    if not any(name in data for name in CONFIG_TABLES):
        for name, value in data.items():
            if isinstance(value, dict) and suggest(name, CONFIG_TABLES, 0.5):
                raise UserError(f"{path}: unknown table [{name}]{suggest(name, CONFIG_TABLES, 0.5)}")
        return dict(data)
    for name, value in data.items():
        if name not in CONFIG_TABLES:
            kind = "table" if isinstance(value, dict) else "key"
            raise UserError(
                f"{path}: unknown {kind} [{name}]{suggest(name, CONFIG_TABLES, 0.5)}; settings go under [{table}]"
            )
    return dict(data.get(table, {}))
