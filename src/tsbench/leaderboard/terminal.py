"""The Table-1 layout as a rich table for the terminal (intervals and costs live in the files)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from .paper_rows import PAPER_LABEL
from .result import DASH, INCOMPLETE, LeaderboardResult, display_cell, display_columns, short_hash

_STYLE = {"best": "bold", "second": "underline"}


def _value(cell) -> Text:
    text = Text(cell.text, style=_STYLE.get(cell.mark, ""))
    if cell.incomplete:
        text.append(f" {INCOMPLETE}", style="yellow")
    return text


def rich_table(result: LeaderboardResult) -> Table:
    """One line per configuration; a 'Samples' line opens each dataset's section, as in the paper.

    MCQ columns show accuracy and macro-F1; bold is best and underline second-best per column and
    dataset; † marks an incomplete cell. With --with-paper the quoted rows follow, dimmed.
    """
    columns = display_columns()
    caption = f"bold = best, underline = second-best, {INCOMPLETE} = incomplete"
    if result.paper is not None:
        caption += f"; [paper] rows: {PAPER_LABEL}"
    table = Table(title="AnomalyXL leaderboard", caption=caption)
    table.add_column("Model", no_wrap=True)
    table.add_column("Harness", min_width=12)
    table.add_column("Depth", justify="right")
    for column in columns:
        table.add_column(column.header, justify="right", min_width=7)
    for dataset in result.datasets:
        label = f"Samples [{short_hash(dataset)}]" if len(result.datasets) > 1 else "Samples"
        table.add_row(Text(label, style="dim"), "", "",
                      *(Text(f"({result.count(dataset, c.category) or 0})", style="dim") for c in columns))
        configs = result.configs(dataset)
        for i, config in enumerate(configs):
            table.add_row(str(config[0]), str(config[1]), str(config[2]),
                          *(_value(display_cell(result, dataset, config, c)) for c in columns),
                          end_section=i == len(configs) - 1)
    if result.paper is not None:
        table.add_row(Text("Paper Table 1 (quoted)", style="italic dim"), "", "", *("" for _ in columns))
        for _, row in result.paper.iterrows():
            values = [row[c.category] if c.part != "acc" else DASH for c in columns]
            table.add_row(Text(f"[paper] {row['model']}", style="dim"), Text(row["section"], style="dim"), "",
                          *(Text(v, style="dim") for v in values))
    return table
