"""build_leaderboard: run directories in, leaderboard files out (the `tsbench leaderboard` command)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from tsbench.core.sanitize import csv_frame
from tsbench.results.origin import by_origin

from .boards import attach_boards
from .columns import columns_for, is_choice
from .figures import length_curves_figure, length_heatmap, safe_name, sweep_stale
from .html import render_html
from .load import CONFIG_KEY, discover_runs, load_results
from .markdown import render_markdown
from .result import LeaderboardResult, short_hash
from .tables import (
    SMALL_N,
    cell_table,
    column_counts,
    common_row_notes,
    cost_table,
    dataset_columns,
    failure_table,
    length_curves,
    length_table,
    paired_table,
    wide_table,
)


def _figures(result: LeaderboardResult) -> dict[str, dict[str, dict[str, bytes]]]:
    """dataset -> figure name -> format -> bytes; names carry a dataset suffix only when there is
    more than one dataset."""
    figures: dict[str, dict[str, dict[str, bytes]]] = {}
    for dataset in result.datasets:
        suffix = f"-{short_hash(dataset)}" if len(result.datasets) > 1 else ""

        def name(config: tuple, dataset: str = dataset) -> str:
            return result.config_name(dataset, config)

        drawn = {
            f"by_length{suffix}": length_heatmap(
                result.by_length[result.by_length["dataset"] == dataset], result.columns.get(dataset, []), name
            ),
            f"accuracy_vs_length{suffix}": length_curves_figure(
                result.curves[result.curves["dataset"] == dataset],
                name,
                {c for c in result.configs(dataset) if result.reference(dataset, c)},
            ),
        }
        figures[dataset] = {key: formats for key, formats in drawn.items() if formats is not None}
    return figures


# leaderboard.csv, long form: one line per (configuration, category) and a source column.
CSV_COLUMNS = (
    "source dataset model harness depth reference category column metric n_rows n_scored n_own "
    "common incomplete small_n mean mean_lo mean_hi mean_mark f1 f1_lo f1_hi f1_mark paper_text"
).split()
COUNT_COLUMNS = ["depth", "n_rows", "n_scored", "n_own"]


def _csv_frame(result: LeaderboardResult) -> pd.DataFrame:
    """leaderboard.csv in long form: our cells (source=tsbench) and, when asked, the paper's quoted
    values (source=paper, text as printed, never parsed). Counts are integers."""
    cells = result.cells.copy()
    shown = {(d, c.category): c for d, cols in result.columns.items() for c in cols}
    cells["column"] = [getattr(shown.get((d, c)), "short", c) for d, c in zip(cells["dataset"], cells["category"])]
    cells["metric"] = [
        getattr(shown.get((d, c)), "metric", "score") for d, c in zip(cells["dataset"], cells["category"])
    ]
    cells.insert(0, "source", "tsbench")
    frames = [cells]
    if result.paper is not None:
        columns = {c.category: c for c in result.paper_columns}
        quoted = [
            {
                "source": "paper Table 1 (quoted, not computed)",
                "model": row["model"],
                "harness": row["section"],
                "category": category,
                "column": columns[category].short,
                "metric": columns[category].metric,
                "n_rows": result.paper_counts.get(category),
                "paper_text": row[category],
            }
            for _, row in result.paper.iterrows()
            for category in columns
        ]
        frames.append(pd.DataFrame(quoted))
    frame = pd.concat(frames, ignore_index=True).reindex(columns=CSV_COLUMNS)
    for name in COUNT_COLUMNS:
        frame[name] = pd.to_numeric(frame[name], errors="coerce").astype("Int64")
    return frame


def _notes(cells: pd.DataFrame) -> list[str]:
    notes = common_row_notes(cells)
    small = cells[(cells["n_scored"] > 0) & (cells["n_scored"] < SMALL_N)]
    if len(small):
        notes.append(
            f"{len(small)} cell(s) rest on fewer than {SMALL_N} scored rows: their 95 % intervals are rough (marked *)"
        )
    return notes


# What `progress` is told, in order (the command line shows them as a bar).
STAGES = ("reading runs", "bootstrap intervals", "length curves, paired tests", "figures", "family boards", "files")


def build_leaderboard(
    run_dirs: list[Path],
    out: Path,
    with_paper: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> LeaderboardResult:
    """Read every run, compute the tables, write leaderboard.{md,html,csv} and the PNGs into ``out``.

    ``run_dirs`` may name run directories or folders of them; ``out`` itself and paths without a
    run.json are skipped with a note. Raises ValueError when no run directory is found at all.
    ``progress(stage)`` is called as each of STAGES starts.
    """
    stage = progress or (lambda name: None)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; the leaderboard writes a folder")
    found, notes = discover_runs([Path(p) for p in run_dirs], skip=out)
    if not found:
        raise ValueError("no run directories (with run.json) among " + ", ".join(map(str, run_dirs)))
    stage(STAGES[0])
    rows, runs, warnings = load_results(found)
    if not runs:
        raise ValueError("no run could be read: " + "; ".join(w for w in warnings if w.startswith("skipped")))
    stage(STAGES[1])
    cells = cell_table(rows, n_boot=n_boot, seed=seed)
    columns = dataset_columns(rows)
    for run in runs:  # a run with no rows yet still gets its family's columns
        columns.setdefault(run.dataset, columns_for(run.family, []))
    every_column = list({(c.category, c.short): c for cols in columns.values() for c in cols}.values())
    precise = [c.category for c in every_column if not is_choice(c)]
    by_length = length_table(rows)
    stage(STAGES[2])
    result = LeaderboardResult(
        runs=runs,
        columns=columns,
        cells=cells,
        counts=column_counts(cells),
        wide=wide_table(cells, every_column),
        costs=cost_table(rows),
        by_length=by_length,
        curves=length_curves(by_length, precise, rows, n_boot, seed),
        paired=paired_table(rows, n_boot=n_boot, seed=seed),
        failures=failure_table(rows),
        warnings=notes + warnings + _notes(cells),
        n_boot=n_boot,
        seed=seed,
    )
    stage(STAGES[3])
    result.figures = _figures(result)
    stage(STAGES[4])
    family_frames = attach_boards(result, rows, with_paper)  # the families' own boards (leaderboard/boards.py)
    stage(STAGES[5])
    # file names without spaces or parentheses ("by_length-anomalyxl_seed42_test_3f2a9c.png")
    result.figures = {d: {safe_name(n): f for n, f in figs.items()} for d, figs in result.figures.items()}
    out.mkdir(parents=True, exist_ok=True)
    written = {f"{n}.{fmt}" for figs in result.figures.values() for n, formats in figs.items() for fmt in formats}
    contents = {
        f"{n}.{fmt}": data for figs in result.figures.values() for n, fs in figs.items() for fmt, data in fs.items()
    }
    sweep_stale(out, written, contents)  # one build's figures per folder
    for figures in result.figures.values():
        for name, formats in figures.items():
            for fmt, data in formats.items():
                (out / f"{name}.{fmt}").write_bytes(data)
                result.files[f"{name}.{fmt}"] = out / f"{name}.{fmt}"
    for name, text in (("leaderboard.md", render_markdown(result)), ("leaderboard.html", render_html(result))):
        (out / name).write_text(text, encoding="utf-8")
        result.files[name] = out / name
    csv_frame(_csv_frame(result)).to_csv(out / "leaderboard.csv", index=False)  # no cell runs as a formula
    result.files["leaderboard.csv"] = out / "leaderboard.csv"
    extras = {
        "costs.csv": result.costs,
        "paired.csv": result.paired,
        "by_length.csv": result.by_length,
        "curves.csv": result.curves,
        "failures.csv": result.failures,
        "by_node.csv": by_origin(rows, "node", tuple(CONFIG_KEY)),  # a cluster's slow or failing machine
        **family_frames,
    }
    for name, frame in extras.items():
        csv_frame(frame).to_csv(out / name, index=False)
        result.files[name] = out / name
    return result
