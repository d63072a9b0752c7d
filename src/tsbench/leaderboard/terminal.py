"""The Table-1 layout as a rich table for the terminal (intervals and costs live in the files)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from tsbench.core.sanitize import terminal_text

from .paper_rows import PAPER_LABEL
from .result import DASH, INCOMPLETE, LeaderboardResult, display_cell, display_columns, short_hash

_STYLE = {"best": "bold", "second": "underline"}


def _value(cell) -> Text:
    text = Text(cell.text, style=_STYLE.get(cell.mark, ""))
    if cell.incomplete:
        text.append(f" {INCOMPLETE}", style="yellow")
    return text


def rich_tables(result: LeaderboardResult) -> list[Table]:
    """One table per dataset, one line per configuration after a 'Samples' line, as in the paper.

    Multiple-choice columns show accuracy and macro-F1; bold is best and underline second-best per
    column; † marks an incomplete cell; reference policies are labelled and never ranked. With
    --with-paper the quoted rows follow the AnomalyXL tables, dimmed.
    """
    tables = []
    caption = (
        f"bold = best, underline = second-best, {INCOMPLETE} = incomplete; intervals, n and the full "
        "legend are in leaderboard.md / .html"
    )
    for dataset in result.datasets:
        columns = display_columns(result.columns.get(dataset, []))
        table = Table(title=f"{result.family(dataset)} leaderboard: {short_hash(dataset)}", caption=caption)
        table.add_column("Model", no_wrap=True)
        table.add_column("Harness", min_width=12)
        table.add_column("Depth", justify="right")
        for column in columns:
            table.add_column(column.header, justify="right", min_width=7)
        table.add_row(
            Text("Samples", style="dim"),
            "",
            "",
            *(Text(f"({result.count(dataset, c.category) or 0})", style="dim") for c in columns),
        )
        for config in result.configs(dataset):
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
                    Text(f"[paper] {row['model']}", style="dim"),
                    Text(row["section"], style="dim"),
                    "",
                    *(Text(v, style="dim") for v in values),
                )
        tables.append(table)
    return tables
