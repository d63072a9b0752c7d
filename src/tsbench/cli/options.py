"""Typer options derived from a settings dataclass: one flag per field, `--` + its name.

`settings_options(EvalConfig)` decorates a command whose own parameters (ctx, --config, ...) are
written by hand; it appends one option per setting (core/settings.py `specs`), with the field's
docstring and default as the help, grouped by section. Values arrive as typed text and are
converted and range-checked by `core.config.build`, the same path TOML values take, so a bad
value is one line whichever way it came. Old flag spellings declared as `aliases` still work,
hidden from --help.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, Optional

import typer

from tsbench.cli.common import given
from tsbench.core.settings import Spec, specs

_ALIAS = "__alias"
_METAVAR = {int: "INTEGER", float: "NUMBER", str: "TEXT"}


def _help(spec: Spec) -> str:
    doc = spec.doc or spec.name.replace("_", " ") + "."
    if section := spec.meta.get("section"):  # whose setting it is: the harness section it sits in
        doc = f"[{section}] {doc}"
    default = spec.default
    if default in (None, "", []) or spec.base is bool:
        return doc
    shown = ",".join(map(str, default)) if isinstance(default, list) else default
    return f"{doc} [default: {shown}]"


def _panel(spec: Spec) -> str | None:
    if section := spec.meta.get("section"):
        return f"Harness [{section}] settings"
    if spec.section:
        return f"[{'.'.join(spec.section)}] settings"
    return None


def _parameters(spec: Spec, hidden: bool = False) -> list[inspect.Parameter]:
    """The option for `spec` (and one hidden option per old spelling)."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    panel = _panel(spec)
    if spec.base is bool and not spec.is_list:
        annotation: Any = bool
        decls = [f"{spec.flag}/--no-{spec.flag[2:]}"]
        option = typer.Option(bool(spec.default), *decls, help=_help(spec), rich_help_panel=panel, hidden=hidden)
        made = [inspect.Parameter(spec.name, kind, default=option, annotation=annotation)]
    else:
        annotation = Optional[list[str]] if spec.is_list else Optional[str]  # noqa: UP045 - typer needs a runtime type
        metavar = _METAVAR.get(spec.base, "TEXT") + ("[,...]" if spec.is_list else "")
        short = [a for a in spec.meta.get("aliases") or () if len(a) == 2]  # -M, -T: shown beside the flag
        option = typer.Option(
            None,
            *short,
            spec.flag,
            help=_help(spec),
            metavar=metavar,
            show_default=False,
            rich_help_panel=panel,
            hidden=hidden,
        )
        made = [inspect.Parameter(spec.name, kind, default=option, annotation=annotation)]
    for i, alias in enumerate(spec.meta.get("aliases") or ()):
        if spec.base is bool or len(alias) == 2:
            continue
        option = typer.Option(None, alias, hidden=True)
        made.append(inspect.Parameter(f"{spec.name}{_ALIAS}{i}", kind, default=option, annotation=annotation))
    return made


def settings_options(*classes: type, skip: tuple[str, ...] = ()) -> Callable[[Callable], Callable]:
    """Give the decorated typer command one option per setting of `classes` (beyond its own
    parameters and `skip`); the command reads them back with `given_settings`."""

    def decorate(func: Callable) -> Callable:
        own = list(inspect.signature(func).parameters.values())
        hints = typing.get_type_hints(func)
        own = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in own]
        names = {p.name for p in own} | set(skip)
        added: list[inspect.Parameter] = []
        for cls in classes:
            for spec in specs(cls):
                if spec.name not in names and spec.flag_wanted:
                    names.add(spec.name)
                    added.extend(_parameters(spec))
        own_names = {p.name for p in own}

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            return func(**{k: v for k, v in kwargs.items() if k in own_names})

        params = own + added
        command.__signature__ = inspect.Signature(params)  # typer reads the options from here
        command.__annotations__ = {p.name: p.annotation for p in params}
        del command.__wrapped__
        return command

    return decorate


def given_settings(ctx: typer.Context, *classes: type) -> dict[str, Any]:
    """The settings the user typed, by field name (old spellings folded in), as typed text or
    lists of it: `core.config.build` converts and checks them."""
    known = {spec.name for cls in classes for spec in specs(cls)}
    out: dict[str, Any] = {}
    for name, value in given(ctx).items():
        field = name.split(_ALIAS)[0]
        if field in known:
            out[field] = value
    return out
