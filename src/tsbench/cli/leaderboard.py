"""`leaderboard`: the paper's tables and figures from any set of run directories."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tsbench.cli.common import console, err_console
from tsbench.core.errors import UserError
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

    try:
        result = build_leaderboard(runs or [Path("results")], out, with_paper=with_paper, n_boot=n_boot, seed=seed)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    for warning in result.warnings:
        err_console.print(f"warning: {terminal_text(warning)}", markup=False)
    for table in rich_tables(result):
        console.print(table)
    console.print(
        f"wrote {out}/leaderboard.md, leaderboard.html, leaderboard.csv (long form), costs/by_length/curves/paired/failures CSVs, figures as PNG, SVG and PDF"
    )
