"""`compare` and `contamination`: thin commands over tsbench.api.compare and tsbench.contamination.probe."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tsbench.cli.common import console
from tsbench.core.out_paths import writable_folder
from tsbench.core.sanitize import terminal_text


def compare(
    runs: list[Path] = typer.Argument(..., help="Two or more run directories."),
    out: Optional[Path] = typer.Option(None, help="Also write compare.md, compare.html and compare.csv here."),
    n_boot: int = typer.Option(1000, help="Bootstrap resamples for the 95% intervals."),
    seed: int = typer.Option(0, help="Seed of the bootstrap and permutation resamples."),
) -> None:
    """Is A better than B: paired differences on the rows every run scored, per category and overall,
    with a paired bootstrap interval, an exact (McNemar) or permutation p, Holm-corrected, and the rows
    a replication needs at 80 % power."""
    from tsbench.api import compare as compare_runs

    if out is not None:
        writable_folder(out, "--out")
    comparison = compare_runs(*runs, n_boot=n_boot, seed=seed, out=out)
    header, rows = comparison.rows_table()
    from rich.table import Table

    table = Table(*header, title="paired comparison (a − b)")
    for row in rows:
        table.add_row(*(terminal_text(str(c)) for c in row))
    console.print(table)
    for line in comparison.lines():
        console.print(terminal_text(line), markup=False, highlight=False)
    if out is not None:
        console.print(f"wrote {out}/compare.md, compare.html, compare.csv", markup=False)


def contamination(
    model: str = typer.Option(..., help="The model (or reference policy) to probe, as for eval."),
    data: Path = typer.Option(
        ..., help="The published split's folder (with manifest.json), e.g. data/anomalyxl/seed42."
    ),
    harness: Optional[str] = typer.Option(None, help="The harness, as for eval [the model's default]."),
    split: str = typer.Option("test", help="Which split of the folder to probe."),
    fresh_seed: Optional[int] = typer.Option(None, help="Seed of the regenerated split [published seed + 1000003]."),
    out: Optional[Path] = typer.Option(
        None, help="Folder for the fresh data and both runs [results/contamination/...]."
    ),
    n_boot: int = typer.Option(1000, help="Bootstrap resamples for the 95% intervals."),
    seed: int = typer.Option(0, help="Seed of the bootstrap and permutation resamples."),
    task_arg: Optional[list[str]] = typer.Option(  # noqa: UP045 - typer needs a runtime type
        None,
        "-T",
        "--task-arg",
        help="KEY=VALUE: any eval setting for both runs (e.g. -T base_url=...).",
        metavar="KEY=VALUE",
    ),
) -> None:
    """Contamination probe for a generated family: regenerate the split with new seeds (same config,
    cells and rows per cell), run the same model and harness on both, report the gap per category."""
    from tsbench.contamination import probe
    from tsbench.eval.model_args import task_settings

    if out is not None:
        writable_folder(out, "--out")

    report = probe(
        model,
        data,
        harness=harness,
        split=split,
        fresh_seed=fresh_seed,
        out=out,
        n_boot=n_boot,
        seed=seed,
        **task_settings(task_arg),
    )
    for line in report.lines():
        console.print(terminal_text(line), markup=False, highlight=False)
    console.print(
        f"runs: {report.published.run_dir}, {report.fresh.run_dir}; report: {report.out}/contamination.json",
        markup=False,
    )
