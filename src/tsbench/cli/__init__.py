"""The `tsbench` command: thin typer commands over the library, one small module per area.

Bad input ends with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys

import typer
from typer.core import TyperCommand, TyperGroup

from tsbench import __version__
from tsbench.cli.common import as_text, err_console
from tsbench.core.errors import UserError
from tsbench.core.out_paths import path_error
from tsbench.core.sanitize import terminal_text

# name -> ("module:attribute", its line in the command list, each whole at 80 columns: click would cut a
# longer first sentence). A command's module loads only when it runs or shows its own --help, so
# `tsbench eval --help` never imports what `leaderboard` or `generate` need; the TRL commands (marked
# "train") would otherwise cost ~10 s of CPU to build their options (train/config.py is TRL's GRPOConfig).
COMMANDS = {
    "generate": ("tsbench.cli.data:generate", "Generate a family's dataset (parquet + manifest)."),
    "convert-tsaia": ("tsbench.cli.convert:convert_tsaia", "Convert TSAIA's pickles to parquet (in the jail)."),
    "describe": ("tsbench.cli.data:describe", "What a generated file holds; --plot draws a row."),
    "score": ("tsbench.cli.data:score", "Score your own answers against a generated file."),
    "eval": ("tsbench.cli.eval:eval_cmd", "Evaluate a model under a harness (re-run: resume)."),
    "show": ("tsbench.cli.eval:show", "A run's rows, or one episode replayed (--id)."),
    "leaderboard": ("tsbench.cli.leaderboard:leaderboard", "Tables, intervals and figures from any runs."),
    "compare": ("tsbench.cli.research:compare", "Is run A better than B: paired tests, Holm, power."),
    "contamination": ("tsbench.cli.research:contamination", "Published split vs a fresh one: memorised?"),
    "export": ("tsbench.cli.export:export", "A run for inspect, Hugging Face or CSV."),
    "evolve": ("tsbench.cli.timeclaw:evolve", "Write tools from runs, verified in the sandbox."),
    "audit": ("tsbench.cli.timesage:audit", "TimeSage: check every period's isolation."),
    "rescore": ("tsbench.cli.timesage:rescore", "Re-score a run with a judge (cached calls)."),
    "memory": ("tsbench.cli.timeclaw:memory_app", "TimeClaw episodic memory banks."),
    "sft-baseline": ("tsbench.cli.train:sft_baseline", "Train the classical or an SFT baseline."),
    "train-grpo": ("tsbench.cli.train:train_grpo_cmd", "GRPO post-training on TRL."),
}
TRAIN = ("sft-baseline", "train-grpo")


class _Deferred(TyperCommand):
    """A command listed by name and help whose module loads only when it is invoked."""

    def __init__(self, name: str, target: str, short: str, markup: str | None):
        super().__init__(name, help=short, short_help=short)
        self.target, self.markup = target, markup

    def real(self) -> TyperCommand:
        from typer.main import get_command_from_info, get_group
        from typer.models import CommandInfo

        from tsbench.cli.options import HARNESS_CONTEXT, HarnessCommand

        module, attr = self.target.split(":")
        if self.name in TRAIN:  # TRL's lazy modules turn a missing torch into a RuntimeError at attribute access
            from tsbench.core.extras import check

            check("torch", "transformers", "trl", extra="train")
        try:
            callback = getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as exc:
            raise UserError(
                f"{self.name} needs the train extra (pip install 'tsbench[train]'): {exc.name} is not installed"
            ) from None
        if isinstance(callback, typer.Typer):  # a group of commands (memory)
            return get_group(callback)
        info = CommandInfo(name=self.name, callback=callback)
        if getattr(callback, "plays_harness", False):  # eval, train-grpo: the harness's own settings as options
            info = CommandInfo(name=self.name, callback=callback, cls=HarnessCommand, context_settings=HARNESS_CONTEXT)
        return get_command_from_info(info, pretty_exceptions_short=True, rich_markup_mode=self.markup)

    def make_context(self, info_name, args, parent=None, **extra):  # noqa: ANN001 - click's signature
        return self.real().make_context(info_name, args, parent=parent, **extra)


class Commands(TyperGroup):
    def list_commands(self, ctx: typer.Context) -> list[str]:
        return [*super().list_commands(ctx), *(name for name in COMMANDS if name not in self.commands)]

    def get_help_option(self, ctx: typer.Context):  # noqa: ANN201 - click's own option class
        option = super().get_help_option(ctx)
        return option if option is None else as_text([option])[0]  # --help alone imports no pydantic

    def get_command(self, ctx: typer.Context, cmd_name: str) -> TyperCommand | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            target, short = COMMANDS[cmd_name]
            return _Deferred(cmd_name, target, short, self.rich_markup_mode)
        return super().get_command(ctx, cmd_name)


app = typer.Typer(
    cls=Commands,
    help="Long-context time-series benchmarks for language-model agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"tsbench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Long-context time-series benchmarks for language-model agents."""


DISK_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def _disk_full(exc: BaseException) -> OSError | None:
    """The disk-full OSError behind ``exc`` (itself, or one it was raised while handling)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and (
            exc.errno in DISK_FULL or any(os.strerror(code) in str(exc) for code in DISK_FULL)
        ):  # pyarrow's errors carry no errno
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def main() -> None:
    try:
        app()
    except (UserError, FileNotFoundError) as exc:
        print(f"error: {terminal_text(exc)}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:
        full = _disk_full(exc)
        if full is None:
            if line := path_error(exc):  # a folder made read-only or replaced by a file after the checks
                print(f"error: {terminal_text(line)}", file=sys.stderr)
                sys.exit(2)
            raise
        # a writer the failure left open (inspect's zip log) fails again when collected at exit: the line
        # below already says why, so that second report would only be a traceback after it
        sys.unraisablehook = lambda _: None
        where = f" writing {full.filename}" if full.filename else ""
        reason = os.strerror(full.errno) if full.errno in DISK_FULL else "disk full"
        print(
            f"error: no space left{where} ({reason}): free some space and run the same command again "
            "(an eval keeps its finished rows and resumes)",
            file=sys.stderr,
        )
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("interrupted", markup=False)
        sys.exit(130)
