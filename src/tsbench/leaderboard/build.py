"""build_leaderboard: run directories in, leaderboard files out (the `tsbench leaderboard` command)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .columns import columns_for, is_choice
from .figures import length_curves_figure, length_heatmap
from .html import render_html
from .load import discover_runs, load_results
from .markdown import render_markdown
from .paper_rows import paper_table
from .result import LeaderboardResult, short_hash
from .timesage_render import attach as attach_timesage
from .tables import (
    cell_table,
    column_counts,
    dataset_columns,
    cost_table,
    failure_table,
    length_curves,
    length_table,
    paired_table,
    wide_table,
)


def _figures(result: LeaderboardResult) -> dict[str, dict[str, bytes]]:
    """PNG bytes per dataset; names carry a hash suffix only when there is more than one dataset."""
    figures: dict[str, dict[str, bytes]] = {}
    for dataset in result.datasets:
        suffix = f"-{short_hash(dataset)}" if len(result.datasets) > 1 else ""
        drawn = {
            f"by_length{suffix}.png": length_heatmap(result.by_length[result.by_length["dataset"] == dataset],
                                                      result.columns.get(dataset, [])),
            f"accuracy_vs_length{suffix}.png": length_curves_figure(result.curves[result.curves["dataset"] == dataset]),
        }
        figures[dataset] = {name: png for name, png in drawn.items() if png is not None}
    return figures


def _csv_frame(result: LeaderboardResult) -> pd.DataFrame:
    """leaderboard.csv: our rows (source=tsbench) and, when asked, the paper's (source=paper, quoted)."""
    wide = result.wide.merge(result.costs, on=["dataset", "model", "harness", "depth"], how="left")
    references = {(r.dataset, r.model, r.harness, r.depth): r.reference for r in result.runs}
    wide.insert(5, "reference", [references.get(tuple(k)) for k in wide[["dataset", "model", "harness", "depth"]]
                                 .itertuples(index=False)])
    wide.insert(0, "source", "tsbench")
    if result.paper is None:
        return wide
    quoted = [c for c in result.paper.columns if c not in ("section", "model")]
    paper = result.paper.rename(columns={c: f"{c}_paper_text" for c in quoted})
    paper.insert(0, "source", "paper Table 1 (quoted, not computed)")
    return pd.concat([wide, paper], ignore_index=True)


def build_leaderboard(run_dirs: list[Path], out: Path, with_paper: bool = False, n_boot: int = 1000,
                      seed: int = 0) -> LeaderboardResult:
    """Read every run, compute the tables, write leaderboard.{md,html,csv} and the PNGs into ``out``.

    ``run_dirs`` may name run directories or folders of them; ``out`` itself and paths without a
    run.json are skipped with a note. Raises ValueError when no run directory is found at all.
    """
    out = Path(out)
    found, notes = discover_runs([Path(p) for p in run_dirs], skip=out)
    if not found:
        raise ValueError("no run directories (with run.json) among " + ", ".join(map(str, run_dirs)))
    rows, runs, warnings = load_results(found)
    cells = cell_table(rows, n_boot=n_boot, seed=seed)
    columns = dataset_columns(rows)
    for run in runs:  # a run with no rows yet still gets its family's columns
        columns.setdefault(run.dataset, columns_for(run.family, []))
    every_column = list({(c.category, c.short): c for cols in columns.values() for c in cols}.values())
    precise = [c.category for c in every_column if not is_choice(c)]
    by_length = length_table(rows)
    result = LeaderboardResult(
        runs=runs, columns=columns, cells=cells, counts=column_counts(cells), wide=wide_table(cells, every_column),
        costs=cost_table(rows), by_length=by_length, curves=length_curves(by_length, precise),
        paired=paired_table(rows, n_boot=n_boot, seed=seed),
        failures=failure_table(rows), warnings=notes + warnings, n_boot=n_boot, seed=seed,
    )
    if with_paper:
        result.paper, result.paper_counts = paper_table()
    result.figures = _figures(result)
    family_frames = attach_timesage(result, rows)  # TimeSage boards: sections, figures, CSVs
    out.mkdir(parents=True, exist_ok=True)
    for figures in result.figures.values():
        for name, png in figures.items():
            (out / name).write_bytes(png)
            result.files[name] = out / name
    for name, text in (("leaderboard.md", render_markdown(result)), ("leaderboard.html", render_html(result))):
        (out / name).write_text(text, encoding="utf-8")
        result.files[name] = out / name
    _csv_frame(result).to_csv(out / "leaderboard.csv", index=False)
    result.files["leaderboard.csv"] = out / "leaderboard.csv"
    extras = {"paired.csv": result.paired, "by_length.csv": result.by_length, "failures.csv": result.failures,
              **family_frames}
    for name, frame in extras.items():
        frame.to_csv(out / name, index=False)
        result.files[name] = out / name
    return result
