"""leaderboard.md: the same sections as the HTML, as GitHub-flavoured Markdown tables.

Best is **bold** and second-best underlined with <ins> (which GitHub renders), as in the HTML, the
terminal and the paper: one legend everywhere (result.LEGEND).
"""

from __future__ import annotations

from tsbench.core.sanitize import markdown_text

from .paper_rows import PAPER_LABEL
from .result import DASH, INCOMPLETE, LEGEND, LeaderboardResult, display_cell, display_columns, short_hash
from .sections import FIGURES, dataset_sections, figure_title, paper_section


class _Markup(str):
    """A cell this renderer built itself (its own <ins> marks around escaped text): not escaped again."""


def _esc(text) -> str:
    """A table cell: our own markup as it is, anything else (model names, answers, errors) HTML-escaped."""
    if isinstance(text, _Markup):
        return str(text).replace("|", "\\|").replace("\n", " ")
    return markdown_text(text)


def _table(header: list, rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(_esc(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(_esc(c) for c in row) + " |" for row in rows] + [""]


def _marked(cell) -> str:
    shown = markdown_text(cell.text)
    text = {"best": f"**{shown}**", "second": f"<ins>{shown}</ins>"}.get(cell.mark, shown)
    if cell.incomplete:
        text += f" {INCOMPLETE}" + (f" ({markdown_text(cell.n_text)})" if cell.text != DASH else "")
    elif cell.common:
        text += f" ({markdown_text(cell.n_text)})"
    return _Markup(text)


def _main_tables(result: LeaderboardResult, dataset: str) -> list[str]:
    columns = display_columns(result.columns.get(dataset, []))
    header = ["Model", "Harness", "Depth", *(c.header for c in columns)]
    samples = ["Samples", "", "", *(f"({result.count(dataset, c.category) or 0})" for c in columns)]
    configs = result.configs(dataset)

    def label(config) -> str:
        note = result.reference(dataset, config)
        return f"{config[0]} (reference: {note})" if note else str(config[0])

    rows = [
        [label(config), *config[1:], *(_marked(display_cell(result, dataset, config, c)) for c in columns)]
        for config in configs
    ]
    intervals = [
        [*config, *(display_cell(result, dataset, config, c).ci or DASH for c in columns)] for config in configs
    ]
    return [
        "### Table 1 layout",
        "",
        *_table(header, [samples] + rows),
        "### 95 % confidence intervals",
        "",
        *_table(header, intervals),
    ]


def _section(title: str, intro: str, table: tuple[list, list[list]], empty: str) -> list[str]:
    header, rows = table
    if not rows:
        return [f"### {title}", "", empty, ""]
    return [f"### {title}", "", *([intro, ""] if intro else []), *_table(header, rows)]


def _figures(result: LeaderboardResult, dataset: str) -> list[str]:
    lines = []
    for name, formats in result.figures.get(dataset, {}).items():
        others = ", ".join(f"[{fmt.upper()}]({name}.{fmt})" for fmt in formats if fmt != "png")
        lines += [f"![{figure_title(name)}]({name}.png)", "", f"{figure_title(name)}; also as {others}.", ""]
    return lines


def _dataset(result: LeaderboardResult, dataset: str) -> list[str]:
    names = sorted({r.run_name for r in result.runs if r.dataset == dataset})
    lines = [
        f"## Dataset {markdown_text(short_hash(dataset))}",
        "",
        f"Runs: {markdown_text(', '.join(names))}; {result.data_label(dataset)}",
        "",
    ]
    lines += _main_tables(result, dataset)
    for section in dataset_sections(result, dataset):
        lines += _figures(result, dataset) if section is FIGURES else _section(*section)
    return lines


def render_markdown(result: LeaderboardResult) -> str:
    lines = [
        "# tsbench leaderboard",
        "",
        f"{len(result.runs)} run(s) on {len(result.datasets)} dataset(s); bootstrap {result.n_boot} resamples, "
        f"seed {result.seed}.",
        "",
    ]
    if result.warnings:
        lines += ["**Warnings**", "", *(f"- {markdown_text(w)}" for w in result.warnings), ""]
    lines += [LEGEND, ""]
    for dataset in result.datasets:
        lines += _dataset(result, dataset)
    if result.paper is not None:
        lines += [
            "## Paper Table 1 (quoted)",
            "",
            f"> {PAPER_LABEL}. Shown for reference only: not ranked against "
            "the runs above and not produced by this code.",
            "",
            *_table(*paper_section(result)),
        ]
    return "\n".join(lines).rstrip() + "\n"
