"""`audit` and `rescore`: prove a TimeSage set's temporal isolation; re-score a run with a judge."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from tsbench.cli.common import console, err_console
from tsbench.cli.options import given_settings, settings_options
from tsbench.core.config import build
from tsbench.core.errors import UserError
from tsbench.eval.config import JudgeSettings


def audit(
    data: Path = typer.Argument(..., help="A generated seed dir (scenarios.parquet + periods.parquet)."),
    family: str = typer.Option("timesage", help="Task family whose checks run (timesage)."),
    show: int = typer.Option(10, help="Failures and warnings to list."),
) -> None:
    """Check every period instance: no visible row after the cutoff, no target-period release, truth
    never in the jail, schema, rule reproduction, scoring rules their tags allow, tier coverage.
    Exit 1 on any failure."""
    from tsbench.tasks import get_taskset

    if not data.exists():
        raise UserError(f"no such file or directory: {data}")
    report = get_taskset(family).audit(data)
    table = Table("check", "failures", title=report.title)
    for check, failures in report.checks.itertuples(index=False):
        table.add_row(str(check), str(failures))
    console.print(table)
    for failure in report.failures[:show]:
        err_console.print(f"FAIL {failure}", markup=False)
    for warning in report.warnings[:show]:
        err_console.print(f"warning: {warning}", markup=False)
    console.print("audit passed" if report.ok else f"audit FAILED ({len(report.failures)} failure(s))")
    if not report.ok:
        raise typer.Exit(1)


@settings_options(JudgeSettings, skip=("judge",))
def rescore(
    ctx: typer.Context,
    run: Path = typer.Argument(..., help="A run dir of a judge-scored family (TimeSage)."),
    judge: str = typer.Option("judge/rules", help="The judge: a model spec or judge/rules (offline)."),
    out: Optional[Path] = typer.Option(None, help="Where the re-scored run goes [<run>__rescored-<judge>]."),
) -> None:
    """Re-score a run's rows with a judge; every call goes through the run's judge cache."""
    from tsbench.eval.rescore import rescore_run

    settings = build(JudgeSettings, {**given_settings(ctx, JudgeSettings), "judge": judge})
    if out is not None:
        from tsbench.core.out_paths import writable_folder

        writable_folder(out, "--out")
    target, stats = rescore_run(
        run, judge, out, judge_options=settings.judge_options(), judge_max_tokens=settings.judge_max_tokens
    )
    rate = "—" if stats.hit_rate is None else f"{100 * stats.hit_rate:.1f} %"
    console.print(
        f"re-scored {stats.rescored} of {stats.rows} rows with {judge}: {stats.judge_calls} judge calls, "
        f"{stats.cache_hits} from the cache ({rate}), {stats.judge_tokens:,} judge tokens spent; wrote {target}"
    )
