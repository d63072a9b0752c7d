"""What every command shares: consoles, list flags, which flags were given, progress bars."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from tsbench.core.errors import UserError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


class LazyConsole:
    """A rich Console made on first use: importing rich.console costs ~65 ms of CPU, a fifth of what
    `tsbench eval --help` may take, and --help never prints through it. Hand `.real` to rich itself."""

    def __init__(self, **options: Any):
        self._options, self._real = options, None

    @property
    def real(self) -> Console:
        if self._real is None:
            from rich.console import Console

            self._real = Console(**self._options)
        return self._real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


# Outside a terminal (logs, CI, pipes) rich would squeeze tables into 80 columns.
console = LazyConsole(highlight=False, width=None if sys.stdout.isatty() else 200)
err_console = LazyConsole(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 200)


def columns_console() -> Console:
    """stdout at the width COLUMNS names, piped too (`COLUMNS=100 tsbench describe ... | less`), else `console`.

    Only for commands whose tables a user pages through: readline exports COLUMNS=80 into the children of
    any Python that loaded it (pytest among them), so every command honouring it would squeeze logs.
    """
    columns = os.environ.get("COLUMNS", "").strip()
    if sys.stdout.isatty() or not columns.isdigit() or int(columns) < 20:
        return console  # a terminal: rich reads COLUMNS and the terminal's size itself
    from rich.console import Console

    return Console(highlight=False, width=int(columns))


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):  # typer hands a flag True or False (None never reaches here)
        raise TypeError(f"a flag given {value!r}")
    return value


# typer's path checks and parsers, none of which an option given `as_text` may ask for
_NO_CHECKS = {"exists": False, "file_okay": True, "dir_okay": True, "writable": False, "resolve_path": False}
_AS_TEXT = {bool: _flag, str: str, list[str]: list, Path: Path}  # as typer resolves Optional[...]


@functools.cache
def _text_coercion() -> type | None:
    """A coercion for options whose values stay text (a str, a list of them, a path): typer 0.2x turns each
    value into its annotation with a pydantic TypeAdapter and imports pydantic for it (~0.1 CPU-s, a tenth of
    an eval's start) only to make text of text; core.config.build converts and checks settings itself.
    None under a typer without this layer (it coerces with click's own types)."""
    try:
        from typer._coercion import RuntimeParam
    except ImportError:
        return None

    @dataclasses.dataclass(frozen=True)
    class AsText(RuntimeParam):
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            return _AS_TEXT[self.annotation](value)

    return AsText


def as_text(params: list[Any]) -> list[Any]:
    """`params`, those typed as text (or flags) coerced without pydantic."""
    coercion = _text_coercion()
    for param in params:
        if coercion is not None and getattr(param, "_runtime_param", False) is None:
            descriptor = param.type_descriptor
            info = descriptor.parameter_info
            plain = info.parser is None and all(getattr(info, k, v) == v for k, v in _NO_CHECKS.items())
            if descriptor.annotation in _AS_TEXT and descriptor.file_annotation is None and plain:
                param._runtime_param = coercion(annotation=descriptor.annotation, parameter_info=info)
    return params


def split_list(values: Optional[list[str]]) -> Optional[list[str]]:
    """Accept `--x a,b` and `--x a --x b` alike."""
    if not values:
        return None
    return [v.strip() for item in values for v in str(item).split(",") if v.strip()]


def _numbers(values: Optional[list[str]], flag: str, cast, word: str) -> Optional[list]:
    items = split_list(values)
    if items is None:
        return None
    try:
        return [cast(v) for v in items]
    except ValueError:
        raise UserError(f"{flag} takes {word} (got {' '.join(items)})") from None


def ints(values: Optional[list[str]], flag: str) -> Optional[list[int]]:
    return _numbers(values, flag, int, "integers")


def floats(values: Optional[list[str]], flag: str) -> Optional[list[float]]:
    return _numbers(values, flag, float, "numbers")


def given(ctx: typer.Context, names: set[str] | None = None) -> dict[str, Any]:
    """The parameters the user typed (not defaults), so they override a --config file and nothing else."""
    out = {}
    for name, value in ctx.params.items():
        if names is not None and name not in names:
            continue
        source = ctx.get_parameter_source(name)  # typer vendors its own click: compare by name
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            out[name] = value
    return out


def require_file(path: Path) -> None:
    if not Path(path).is_file():
        raise UserError(f"no such file: {path}")


def require_run_dir(path: Path) -> None:
    if not (Path(path) / "run.json").is_file():
        raise UserError(f"{path} is not a run dir (no run.json)")


def progress_bar(*columns) -> Progress:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        *columns,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console.real,
        transient=False,
    )


def is_terminal() -> bool:
    return err_console.is_terminal and sys.stderr.isatty()
