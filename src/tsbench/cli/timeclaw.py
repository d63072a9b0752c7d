"""TimeClaw: `memory build` and `evolve`.

Run dirs are passed as every command whose subject is runs takes them (`show`, `leaderboard`):
as arguments, `tsbench memory build RUN... --out BANK`. `--from RUN` still works (hidden).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tsbench.cli.common import console, split_list
from tsbench.core.errors import UserError
from tsbench.core.out_paths import writable_file, writable_folder


def _runs(positional: Optional[list[Path]], legacy: Optional[list[Path]]) -> list[Path]:
    runs = [*(positional or []), *(legacy or [])]
    if not runs:
        raise UserError("name at least one run dir, e.g. results/<run>")
    for run in runs:
        if not (run / "run.json").is_file():
            raise UserError(f"{run} is not a run dir (no run.json)")
    return runs


def memory_build(
    runs: Optional[list[Path]] = typer.Argument(None, help="Run dir(s) under results/ to learn from."),
    from_runs: Optional[list[Path]] = typer.Option(None, "--from", hidden=True, help="Same as the RUNS arguments."),
    out: Path = typer.Option(..., help="Bank parquet to write, e.g. banks/<name>.parquet."),
    admission: str = typer.Option(
        "timeclaw",
        help="Which episodes become records: timeclaw (every finished episode, as the authors' code) or "
        "successful (scoring at least --min-score, the paper's wording).",
    ),
    min_score: Optional[float] = typer.Option(None, help="With --admission successful: the least score (0.5)."),
    fingerprint: str = typer.Option("timeclaw", help="Fingerprint variant: timeclaw (the authors' code) or paper."),
    embedder: str = typer.Option("minilm", help="Context encoder: minilm (offline), openai/<model>, or none."),
    append: bool = typer.Option(False, help="Add to an existing bank instead of replacing it."),
    include_test_split: bool = typer.Option(False, help="Allow episodes of test rows (contaminates the benchmark)."),
    rationale_model: Optional[str] = typer.Option(
        None, help="Model (provider/name) shown each task's correct answer that writes the stored rationale."
    ),
) -> None:
    """Build an episodic memory bank (fingerprint, context embedding, trajectory summary) from eval runs of any
    task family whose rows hold a series (read through the run's family)."""
    from tsbench.timeclaw import build_memory

    from_runs = _runs(runs, from_runs)
    writable_file(out, "--out")
    writer = None
    if rationale_model:
        from tsbench.models.registry import get_model

        writer = get_model(rationale_model)
    try:
        path = build_memory(
            from_runs,
            min_score=min_score,
            out=out,
            admission=admission,
            fingerprint_variant=fingerprint,
            embedder=embedder,
            append=append,
            include_test_split=include_test_split,
            rationale_model=writer,
        )
    except ValueError as exc:
        raise UserError(str(exc)) from None
    console.print(f"wrote {path}")


def ablation(
    runs: list[Path] = typer.Argument(
        ..., help="Run dirs: w/o tools, tools only, + memory (k), + evolution, full (any of them)."
    ),
) -> None:
    """TimeClaw's ablation board (paper Fig. 5 / Table 1): each run placed by its settings and named as the
    paper does, per benchmark, with CiK's aggregate RCRPS, sMAPE (%), RCRPS by context type, score and tokens."""
    from tsbench.leaderboard.ablation import ablation_board, render_board

    console.print(render_board(ablation_board(_runs(runs, None))))


def evolve(
    runs: Optional[list[Path]] = typer.Argument(None, help="Run dir(s) whose successful trajectories seed new tools."),
    from_runs: Optional[list[Path]] = typer.Option(None, "--from", hidden=True, help="Same as the RUNS arguments."),
    model: str = typer.Option(..., help="The model that writes tools (provider/name)."),
    out: Path = typer.Option(..., help="Tools dir; admitted tools go to <out>/<name>/."),
    gamma: float = typer.Option(0.7, help="Admit a tool only if its held-out success rate exceeds this."),
    admission: str = typer.Option("strict", help="strict: rate > gamma (the paper); at-least: rate >= gamma."),
    min_score: float = typer.Option(0.5, help="Trajectories scoring at least this count as successful."),
    categories: Optional[list[str]] = typer.Option(None, help="Only these categories (comma-separated)."),
    include_test_split: bool = typer.Option(
        False, help="Allow trajectories of test rows (contaminates the benchmark)."
    ),
) -> None:
    """Write tools from experience, verify them in the sandbox on held-out tasks, keep those that pass."""
    from tsbench.core.extras import check

    check("stumpy", "ruptures", "statsmodels", extra="timeclaw", what="evolve")
    from tsbench.models.registry import get_model
    from tsbench.timeclaw.evolve import evolve_tools

    from_runs = _runs(runs, from_runs)
    writable_folder(out, "--out")
    try:
        writer = get_model(model)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    try:
        report = evolve_tools(
            from_runs,
            writer,
            out,
            gamma=gamma,
            admission=admission,
            min_score=min_score,
            categories=split_list(categories),
            include_test_split=include_test_split,
        )
    except ValueError as exc:
        raise UserError(str(exc)) from None
    finally:
        writer.close()
    console.print(report)
    console.print(f"report: {out}/evolve_report.json")


memory_app = typer.Typer(
    help="TimeClaw episodic memory banks.",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
memory_app.command("build", short_help="A memory bank from runs.")(memory_build)
memory_app.command("ablation", short_help="TimeClaw's ablation board from runs.")(ablation)
