"""The `tsbench` command: thin typer commands over the library, one small module per area.

Bad input ends with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import errno
import os
import sys

import typer

from tsbench import __version__
from tsbench.cli import convert, data, export, leaderboard, timeclaw, timesage, train
from tsbench.cli import eval as eval_commands
from tsbench.cli.common import err_console
from tsbench.core.errors import UserError
from tsbench.core.sanitize import terminal_text

app = typer.Typer(
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
app.command("eval")(eval_commands.eval_cmd)
app.command()(eval_commands.show)
app.command()(leaderboard.leaderboard)
app.command()(export.export)
app.command("sft-baseline")(train.sft_baseline)
app.command("train-grpo")(train.train_grpo_cmd)
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
            raise
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
