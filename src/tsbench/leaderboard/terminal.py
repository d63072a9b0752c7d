"""The Table-1 layout as a rich table for the terminal (intervals and costs live in the files)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from tsbench.core.sanitize import terminal_text

from .paper_rows import OUR_TSLM_SECTION, PAPER_LABEL
from .result import DASH, INCOMPLETE, LeaderboardResult, display_cell, display_columns, short_hash

_STYLE = {"best": "bold", "second": "underline"}


def _value(cell) -> Text:
    text = Text(cell.text, style=_STYLE.get(cell.mark, ""))
    if cell.incomplete:
        text.append(f" {INCOMPLETE}", style="yellow")
    return text


def rich_tables(result: LeaderboardResult, width: int | None = None) -> list[Table]:
    """One table per dataset, one line per configuration after a 'Samples' line, as in the paper.

    Multiple-choice columns show accuracy and macro-F1; bold is best and underline second-best per
    column; † marks an incomplete cell; reference policies are labelled and never ranked. With
    --with-paper the quoted rows follow the AnomalyXL tables, dimmed. With `width` (a terminal's
    columns), a board wider than that is wrapped: its score columns are split over as many tables as
    it takes, each repeating the model, harness and depth and titled with the columns it shows, so
    no column is squeezed to nothing.
    """
    tables = []
    for dataset in result.datasets:
        columns = display_columns(result.columns.get(dataset, []))
        title = f"{result.family(dataset)} leaderboard: {short_hash(dataset)}, {result.data_label(dataset)}"
        whole = _table(result, dataset, columns, title, wrap=False)
        parts = [columns] if not width or _min_width(whole) <= width else _parts(result, dataset, columns, title, width)
        for i, part in enumerate(parts):
            if len(parts) > 1:
                shown = ", ".join(c.header for c in part)
                note = f"{title} ({i + 1} of {len(parts)}: {shown})"
                tables.append(_table(result, dataset, part, note, wrap=True, caption=i == len(parts) - 1))
            else:
                tables.append(whole)
    return tables


def _longest_word(text: str) -> int:
    """The widest piece a column must hold whole (rich wraps only at spaces, and cuts a longer word)."""
    return max((len(word) for word in text.split()), default=0)


def _min_width(table: Table) -> int:
    console = Console(width=10_000, file=io.StringIO())
    return Measurement.get(console, console.options, table).minimum


def _parts(result: LeaderboardResult, dataset: str, columns: list, title: str, width: int) -> list[list]:
    """The score columns in consecutive groups, each as many as fit in `width` beside the labels; a
    category's accuracy and macro-F1 stay together."""
    units: list[list] = []
    for column in columns:
        if units and units[-1][0].category == column.category:
            units[-1].append(column)
        else:
            units.append([column])
    parts: list[list] = []
    for unit in units:
        if parts and _min_width(_table(result, dataset, [*parts[-1], *unit], title, wrap=True)) <= width:
            parts[-1].extend(unit)
        else:
            parts.append(list(unit))
    return parts or [[]]


def _table(
    result: LeaderboardResult, dataset: str, columns: list, title: str, *, wrap: bool, caption: bool = True
) -> Table:
    legend = (
        f"bold = best, underline = second-best, {INCOMPLETE} = incomplete; intervals, n and the full "
        "legend are in leaderboard.md / .html"
    )
    table = Table(title=title, caption=legend if caption else None)
    configs = result.configs(dataset)
    if wrap:  # a narrow terminal: the notes wrap at their spaces, a name is never cut (the score columns split)
        names = [terminal_text(c[0]) + f" {INCOMPLETE}" for c in configs] or ["Model"]
        table.add_column("Model", min_width=max(map(_longest_word, names)), overflow="fold")
        harnesses = [terminal_text(c[1]) for c in configs] or ["Harness"]
        table.add_column("Harness", min_width=max(7, *map(_longest_word, harnesses)), overflow="fold")
    else:
        table.add_column("Model", no_wrap=True)
        table.add_column("Harness", min_width=12, overflow="fold")
    table.add_column("Depth", justify="right", no_wrap=True)
    for column in columns:
        table.add_column(column.header, justify="right", min_width=7)
    table.add_row(
        Text("Samples", style="dim"),
        "",
        "",
        *(Text(f"({result.count(dataset, c.category) or 0})", style="dim") for c in columns),
    )
    for config in configs:
        label = Text(terminal_text(config[0]))
        if tuple(config) in result.incomplete_configs(dataset):
            label.append(f" {INCOMPLETE}", style="yellow")
        if note := result.reference(dataset, config):
            label.append(f" (reference: {terminal_text(note)})", style="italic yellow")
        table.add_row(
            label,
            Text(terminal_text(config[1])),
            str(config[2]),
            *(_value(display_cell(result, dataset, config, c)) for c in columns),
        )
    if result.paper is not None and result.family(dataset) == "anomalyxl":
        table.add_row(
            Text(f"Paper Table 1 (quoted): {PAPER_LABEL}", style="italic dim"),
            "",
            "",
            *("" for _ in columns),
            end_section=True,
        )
        for _, row in result.paper.iterrows():
            values = [row[c.category] if c.part != "acc" else DASH for c in columns]
            table.add_row(
                Text(row["model"] if row["section"] == OUR_TSLM_SECTION else f"[paper] {row['model']}", style="dim"),
                Text(row["section"], style="dim"),
                "",
                *(Text(v, style="dim") for v in values),
            )
    return table
