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
from typer.core import TyperCommand

from tsbench.cli.common import as_text, given
from tsbench.core.settings import Spec, specs

_ALIAS = "__alias"
# typer's own style (`--seed <int>`), so every command's --help reads alike
_METAVAR = {int: "int", float: "float", str: "str"}


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
    if spec.section == ("harness_config",):  # the settings class every harness's own extends
        return "Every harness's settings"
    if spec.section:
        return f"[{'.'.join(spec.section)}] settings"
    return None


def _parameters(spec: Spec, hidden: bool = False, panel: str | None = None) -> list[inspect.Parameter]:
    """The option for `spec` (and one hidden option per old spelling)."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    panel = panel or _panel(spec)
    if spec.base is bool and not spec.is_list:
        annotation: Any = bool
        decls = [f"{spec.flag}/--no-{spec.flag[2:]}"]
        option = typer.Option(bool(spec.default), *decls, help=_help(spec), rich_help_panel=panel, hidden=hidden)
        made = [inspect.Parameter(spec.name, kind, default=option, annotation=annotation)]
    else:
        annotation = Optional[list[str]] if spec.is_list else Optional[str]  # noqa: UP045 - typer needs a runtime type
        base = _METAVAR.get(spec.base, "str")
        metavar = f"<list[{base}]>" if spec.is_list else f"<{base}>"
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


def settings_options(
    *classes: type, skip: tuple[str, ...] = (), panels: dict[str, tuple[str, ...]] | None = None
) -> Callable[[Callable], Callable]:
    """Give the decorated typer command one option per setting of `classes` (beyond its own
    parameters and `skip`); the command reads them back with `given_settings`. `panels` (title ->
    setting names, in the order a user reaches for them) groups --help; the rest follow under "Other"."""

    def decorate(func: Callable) -> Callable:
        own = list(inspect.signature(func).parameters.values())
        hints = typing.get_type_hints(func)
        own = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in own]
        names = {p.name for p in own} | set(skip)
        added: list[inspect.Parameter] = []
        where = {name: title for title, members in (panels or {}).items() for name in members}
        order = list(panels or {})
        found = []
        for cls in classes:
            for spec in specs(cls):
                if spec.name not in names and spec.flag_wanted:
                    names.add(spec.name)
                    found.append(spec)
        if panels:  # grouped: each panel's settings in the panel's own order, then the rest as declared
            rank = {name: i for members in panels.values() for i, name in enumerate(members)}
            found.sort(
                key=lambda s: (order.index(where[s.name]) if s.name in where else len(order), rank.get(s.name, 0))
            )
        for spec in found:
            panel = where.get(spec.name, "Other settings" if panels and not _panel(spec) else None)
            added.extend(_parameters(spec, panel=panel))
        own_names = {p.name for p in own}

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            return func(**{k: v for k, v in kwargs.items() if k in own_names})

        params = own + added
        if panels:  # the command's own options join their panel after its settings (--model before --config)
            lead = [p for p in own if _own_panel(p) is None]  # ctx, arguments: their order is the command's
            placed = added + [p for p in own if _own_panel(p) is not None]
            placed.sort(key=lambda p: order.index(_own_panel(p)) if _own_panel(p) in order else len(order))
            params = lead + placed
        command.__signature__ = inspect.Signature(params)  # typer reads the options from here
        command.__annotations__ = {p.name: p.annotation for p in params}
        del command.__wrapped__
        return command

    return decorate


def _own_panel(param: inspect.Parameter) -> str | None:
    """The help panel a command's own typer option names (None for ctx, arguments and unpanelled ones)."""
    return getattr(param.default, "rich_help_panel", None)


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


# -- the chosen harness's own settings -----------------------------------------------------------------
# Which harness a run plays is known only once its flags are read, so a command that plays one
# (`HarnessCommand`) looks for `--harness X` in its arguments first and adds X's own settings as options
# (typed, and listed by --help); without it they arrive as extra arguments, read once the harness is
# chosen (the family's or the agent's default), as `-H key=value` pairs and [eval.<harness>] tables are.
_CHOSEN, _ADDED = "tsbench.harness", "tsbench.harness_params"
HARNESS_CONTEXT = {"ignore_unknown_options": True, "allow_extra_args": True}


def _peek(args: list[str]) -> str | None:
    for i, arg in enumerate(args):
        if arg == "--harness" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--harness="):
            return arg.split("=", 1)[1]
    return None


@functools.cache
def _harness_params(name: str) -> tuple[Any, ...]:
    """Click options for the harness `name`'s own settings (none for a name that is no harness here)."""
    from typer.main import _get_param  # typer's own option from a parameter, as its commands are built
    from typer.models import ParamMeta

    from tsbench.core.errors import UserError
    from tsbench.harness.registry import get_harness
    from tsbench.harness.settings import own_settings

    try:
        harness = get_harness(name)
    except UserError:
        return ()
    own = set(own_settings(harness.settings_class))
    made = []
    for spec in specs(harness.settings_class):
        if spec.name in own and spec.flag_wanted:
            for param in _parameters(spec, panel=f"Harness {name}: its own settings ([eval.{name}], -H key=value)"):
                made.append(_get_param(ParamMeta(name=param.name, default=param.default, annotation=param.annotation)))
    return tuple(made)


class HarnessCommand(TyperCommand):
    """A command that plays a harness: `--harness X` on its command line adds X's own settings as options."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta[_CHOSEN] = _peek(args)
        return super().parse_args(ctx, args)

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        added = _harness_params(ctx.meta[_CHOSEN]) if ctx.meta.get(_CHOSEN) else ()
        ctx.meta[_ADDED] = {p.name for p in added}
        return as_text([*params[:-1], *added, *params[-1:]])  # --help stays last

    def invoke(self, ctx: Any) -> Any:
        # the harness's options reach the command through `harness_flags`, not as parameters typer checks
        typed = given(ctx, ctx.meta.get(_ADDED, set()))
        ctx.meta[_ADDED + ".given"] = typed
        for name in ctx.meta.get(_ADDED, set()):
            ctx.params.pop(name, None)
        return super().invoke(ctx)

    def format_options(self, ctx: Any, formatter: Any) -> None:
        """One section per help panel (typer draws them only in its rich mode), in the order they come."""
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                sections.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(record)
        first = ("Model", "Data", "Harness")

        def rank(title: str) -> float:  # the panels a user sets first, the chosen harness's own, the rest, Options
            if title in first:
                return first.index(title)
            if title.startswith("Harness "):
                return 3 if ": its own" in title else 3.5
            return {"Limits": 4, "Output": 5, "Options": 9}.get(title, 6)

        for title, rows in sorted(sections.items(), key=lambda item: rank(item[0])):
            with formatter.section(title):
                formatter.write_dl(rows)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from tsbench.harness.registry import HARNESSES

        for param in self.params:  # the harnesses of this install, plugins' included
            if param.name == "harness" and param.help:
                param.help = param.help.replace("{harnesses}", ", ".join(HARNESSES))
        super().format_help(ctx, formatter)


def harness_arg_option(example: str, panel: str | None = None) -> Any:
    """The -H KEY=VALUE option every command that plays a harness takes (as inspect's -T/-M)."""
    return typer.Option(
        None,
        "-H",
        "--harness-arg",
        help=f"KEY=VALUE, repeatable: a setting of the chosen harness (as inspect's -T/-M), e.g. -H {example}; "
        "`--harness X --help` lists X's.",
        metavar="KEY=VALUE",
        show_default=False,
        rich_help_panel=panel,
    )


def harness_flags(ctx: typer.Context) -> dict[str, Any]:
    """The chosen harness's own settings the user typed, by name: its options (`HarnessCommand`) and the
    extra arguments (`--name value`, `--name=value`, `--flag`, `--no-flag`), as text for `build_run`."""
    from tsbench.core.errors import UserError

    out: dict[str, Any] = {}
    for name, value in ctx.meta.get(_ADDED + ".given", {}).items():
        out[name.split(_ALIAS)[0]] = value
    args, i = list(ctx.args), 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--") or arg == "--":
            raise UserError(f"unexpected argument {arg!r} (settings are --name value, or -H name=value)")
        name, eq, value = arg[2:].partition("=")
        i += 1
        if not eq:
            following = args[i] if i < len(args) else None
            if following is not None and (not following.startswith("-") or _number(following)):
                value, i = following, i + 1
            elif name.startswith("no-"):
                name, value = name[3:], "false"
            else:
                value = "true"
        key = name.replace("-", "_")
        out[key] = [*(out[key] if isinstance(out[key], list) else [out[key]]), value] if key in out else value
    return out


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
