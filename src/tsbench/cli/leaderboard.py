"""`leaderboard`: the paper's tables and figures from any set of run directories."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

from tsbench.cli.common import console, err_console, is_terminal, progress_bar
from tsbench.core.errors import UserError
from tsbench.core.out_paths import writable_folder
from tsbench.core.sanitize import terminal_text


def leaderboard(
    runs: Optional[list[Path]] = typer.Argument(None, help="Run dirs (or folders holding them) [results]."),
    out: Path = typer.Option(Path("results/leaderboard"), help="Where leaderboard.{md,html,csv} and figures go."),
    with_paper: bool = typer.Option(False, help="Also show the paper's published Table 1 rows (quoted)."),
    n_boot: int = typer.Option(1000, help="Bootstrap resamples for the 95% intervals."),
    seed: int = typer.Option(0, help="Bootstrap seed."),
) -> None:
    """Table 1 layout, per-length figures, bootstrap intervals, costs and failures from any set of runs."""
    from tsbench.leaderboard import build_leaderboard, rich_tables
    from tsbench.leaderboard.build import STAGES

    if n_boot < 1:
        raise UserError(f"--n-boot must be at least 1 (got {n_boot})")
    writable_folder(out, "--out")
    with _stages(len(STAGES)) as stage:
        try:
            result = build_leaderboard(
                runs or [Path("results")], out, with_paper=with_paper, n_boot=n_boot, seed=seed, progress=stage
            )
        except ValueError as exc:
            raise UserError(str(exc)) from None
    for warning in result.warnings:
        err_console.print(f"warning: {terminal_text(warning)}", markup=False)
    for table in rich_tables(result, width=console.width):  # wider than the terminal: split, never squeezed
        console.print(table)
    console.print(
        f"wrote {out}/leaderboard.md, leaderboard.html, leaderboard.csv (long form), costs/by_length/curves/paired/failures CSVs, figures as PNG, SVG and PDF"
    )


@contextmanager
def _stages(total: int) -> Iterator[Callable[[str], None]]:
    """In a terminal, a bar on stderr that moves as each stage of the build starts; silent in logs."""
    if not is_terminal():
        yield lambda name: None
        return
    with progress_bar() as bars:
        task = bars.add_task("leaderboard", total=total)
        started = [False]

        def stage(name: str) -> None:
            bars.update(task, advance=1 if started[0] else 0, description=f"leaderboard: {name}")
            started[0] = True

        yield stage
        bars.update(task, completed=total, description="leaderboard")
