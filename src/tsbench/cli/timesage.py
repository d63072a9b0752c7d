"""`audit` and `rescore`: prove a TimeSage set's temporal isolation; re-score a run with a judge."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from tsbench.cli.common import console, err_console
from tsbench.core.errors import UserError


def audit(
    data: Path = typer.Argument(..., help="A generated seed dir (scenarios.parquet + periods.parquet)."),
    family: str = typer.Option("timesage", help="Task family (timesage)."),
    show: int = typer.Option(10, help="Failures and warnings to list."),
) -> None:
    """Check every period instance: no visible row after the cutoff, no target-period release, truth
    never in the jail, schema, rule reproduction, scoring rules their tags allow, tier coverage.
    Exit 1 on any failure."""
    if family != "timesage":
        raise UserError(f"tsbench audit checks TimeSage sets (--family timesage), not {family}")
    from tsbench.tasks.timesage.audit import CHECKS, audit as run_audit, periods_from_frame
    from tsbench.tasks.timesage.store import PERIODS, SCENARIOS, read_periods, read_scenarios

    folder = data if data.is_dir() else data.parent
    if not (folder / PERIODS).is_file() or not (folder / SCENARIOS).is_file():
        raise UserError(f"{folder} holds no {SCENARIOS} and {PERIODS}")
    scenarios = {s.id: s for s in read_scenarios(folder / SCENARIOS)}
    periods = periods_from_frame(read_periods(folder / PERIODS))
    missing = sorted(set(periods) - set(scenarios))
    if missing:
        raise UserError(f"periods of unknown scenario(s) {missing[:3]} in {folder / PERIODS}")
    report = run_audit((scenarios[sid], periods.get(sid, [])) for sid in scenarios)
    summary = report.summary()
    table = Table("check", "failures", title=f"audit of {folder}: {report.instances} instances, {report.scenarios} scenarios")
    for check in CHECKS:
        table.add_row(check, str(summary["failures_by_check"][check]))
    console.print(table)
    for where, check, detail in report.failures[:show]:
        err_console.print(f"FAIL {where}: {check}: {detail}", markup=False)
    for warning in report.warnings[:show]:
        err_console.print(f"warning: {warning}", markup=False)
    console.print("audit passed" if report.ok else f"audit FAILED ({len(report.failures)} failure(s))")
    if not report.ok:
        raise typer.Exit(1)


def rescore(
    run: Path = typer.Argument(..., help="A run dir of a judge-scored family (TimeSage)."),
    judge: str = typer.Option("judge/rules", help="The judge: a model spec or judge/rules (offline)."),
    out: Optional[Path] = typer.Option(None, help="Where the re-scored run goes [<run>__rescored-<judge>]."),
) -> None:
    """Re-score a run's rows with a judge; every call goes through the run's judge cache."""
    from tsbench.eval.rescore import rescore_run

    target, stats = rescore_run(run, judge, out)
    rate = "—" if stats.hit_rate is None else f"{100 * stats.hit_rate:.1f} %"
    console.print(f"re-scored {stats.rescored} of {stats.rows} rows with {judge}: {stats.judge_calls} judge calls, "
                  f"{stats.cache_hits} from the cache ({rate}), {stats.judge_tokens:,} judge tokens spent; wrote {target}")


def register(app: typer.Typer) -> None:
    app.command()(audit)
    app.command()(rescore)
