"""The `tsbench` command: thin typer commands over the library, one small module per area.

Bad input ends with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys

import click
import typer
from typer.core import TyperGroup

from tsbench import __version__
from tsbench.cli import convert, data, export, leaderboard, research, timeclaw, timesage
from tsbench.cli import eval as eval_commands
from tsbench.cli.common import err_console
from tsbench.cli.options import HARNESS_CONTEXT, HarnessCommand
from tsbench.core.errors import UserError
from tsbench.core.extras import check
from tsbench.core.out_paths import path_error
from tsbench.core.sanitize import terminal_text

# Commands whose settings are TRL's (train/config.py: GRPOConfig is trl.GRPOConfig) import TRL, torch and
# transformers to build their options: ~10 s of CPU that every other command would pay at start. They load
# when they run or show their own --help; `tsbench --help` lists them from this table.
DEFERRED = {
    "sft-baseline": (
        "tsbench.cli.train:sft_baseline",
        "Supervised baselines: LoRA/full SFT of a language or vision-language model, a TSLM (tslm/<arch>) or Toto-1.0-QA, or the classical features + gradient-boosted heads (--model classical).",
    ),
    "train-grpo": (
        "tsbench.cli.train:train_grpo_cmd",
        "GRPO post-training on TRL with the family's training tasks, episodes in our harness.",
    ),
}


class _Deferred(click.Command):
    """A command listed by name and help whose module loads only when it is invoked."""

    def __init__(self, name: str, target: str, short: str, markup: str | None):
        super().__init__(name=name, help=short, short_help=short)
        self.target, self.markup = target, markup

    def real(self) -> click.Command:
        from typer.main import get_command_from_info
        from typer.models import CommandInfo

        module, attr = self.target.split(":")
        # TRL's lazy modules turn a missing torch into a RuntimeError at attribute access: look first
        check("torch", "transformers", "trl", extra="train")
        try:
            callback = getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as exc:
            raise UserError(
                f"{self.name} needs the train extra (pip install 'tsbench[train]'): {exc.name} is not installed"
            ) from None
        info = CommandInfo(name=self.name, callback=callback)
        if getattr(callback, "plays_harness", False):  # train-grpo: the harness's own settings as eval's
            info = CommandInfo(name=self.name, callback=callback, cls=HarnessCommand, context_settings=HARNESS_CONTEXT)
        return get_command_from_info(info, pretty_exceptions_short=True, rich_markup_mode=self.markup)

    def make_context(self, info_name, args, parent=None, **extra):  # noqa: ANN001 - click's signature
        return self.real().make_context(info_name, args, parent=parent, **extra)


class Commands(TyperGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *(name for name in DEFERRED if name not in self.commands)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in DEFERRED and cmd_name not in self.commands:
            target, short = DEFERRED[cmd_name]
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


app.command()(data.generate)
app.command("convert-tsaia")(convert.convert_tsaia)
app.command()(data.describe)
app.command()(data.score)
app.command("eval", cls=HarnessCommand, context_settings=HARNESS_CONTEXT)(eval_commands.eval_cmd)
app.command()(eval_commands.show)
app.command()(leaderboard.leaderboard)
app.command()(research.compare)
app.command()(research.contamination)
app.command()(export.export)
memory_app = typer.Typer(
    help="TimeClaw episodic memory banks.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
memory_app.command("build")(timeclaw.memory_build)
memory_app.command("ablation")(timeclaw.ablation)
app.add_typer(memory_app, name="memory")
app.command()(timeclaw.evolve)
timesage.register(app)

# The command list in `tsbench --help`, each whole at 80 columns (click would cut a longer first sentence).
SHORT_HELP = {
    "generate": "Generate a family's dataset (parquet + manifest).",
    "convert-tsaia": "Convert TSAIA's pickles to parquet (in the jail).",
    "describe": "What a generated file holds; --plot draws a row.",
    "score": "Score your own answers against a generated file.",
    "eval": "Evaluate a model under a harness (re-run: resume).",
    "show": "A run's rows, or one episode replayed (--id).",
    "leaderboard": "Tables, intervals and figures from any runs.",
    "export": "A run for inspect, Hugging Face or CSV.",
    "compare": "Is run A better than B: paired tests, Holm, power.",
    "contamination": "Published split vs a fresh one: memorised?",
    "sft-baseline": "Train the classical or an SFT baseline.",
    "train-grpo": "GRPO post-training on TRL.",
    "evolve": "Write tools from runs, verified in the sandbox.",
    "audit": "TimeSage: check every period's isolation.",
    "rescore": "Re-score a run with a judge (cached calls).",
    "memory": "TimeClaw episodic memory banks.",
    "build": "A memory bank from runs.",
    "ablation": "TimeClaw's ablation board from runs.",
}


def _short_help(typer_app: typer.Typer) -> None:
    for info in typer_app.registered_commands:
        name = info.name or info.callback.__name__.replace("_", "-")
        info.short_help = SHORT_HELP.get(name, SHORT_HELP.get(name.removesuffix("-cmd"), info.short_help))
    for group in typer_app.registered_groups:
        group.short_help = SHORT_HELP.get(group.name, group.short_help)
        _short_help(group.typer_instance)


_short_help(app)


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
