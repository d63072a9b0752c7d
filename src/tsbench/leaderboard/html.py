"""leaderboard.html: one self-contained page (inline style, figures as base64 data URIs, no script),
so it can be mailed, archived next to the results, or opened offline years later.

The Table 1 layout must fit a 1400 px window with every column visible (the Localize columns come
last): one label column (model, then harness and depth), compact cells, intervals on their own line.
In a narrower window (800 px) every table scrolls inside its own box and the page itself never
overflows: text wraps, figures shrink (tests/test_leaderboard_browser.py measures both in Chromium).
"""

from __future__ import annotations

import base64
from html import escape

from .paper_rows import PAPER_LABEL
from .result import DASH, INCOMPLETE, LEGEND, LeaderboardResult, display_cell, display_columns, short_hash
from .sections import FIGURES, dataset_sections, figure_title, paper_section

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1rem; color: #222; max-width: 1368px; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.25rem; border-bottom: 1px solid #ccc; margin-top: 2rem; }
h3 { font-size: 1.05rem; margin-top: 1.5rem; }
table { border-collapse: collapse; font-size: 0.8rem; margin: 0.5rem 0 1rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.45rem; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td.label, th.label { text-align: left; }
table:not(.t1) td:first-child, table:not(.t1) th:first-child { text-align: left; }
table.t1 { font-size: 0.74rem; table-layout: auto; }
table.t1 th, table.t1 td { padding: 0.2rem 0.25rem; }
table.t1 th.g-mcq { background: #eef1f6; } table.t1 th.g-localize { background: #dcebd9; }
table.t1 td.label { min-width: 9rem; max-width: 13rem; overflow-wrap: anywhere; }
.cfg { display: block; font-size: 0.68rem; color: #555; }
tr.counts th { font-weight: normal; color: #555; }
td strong { font-weight: 700; } td u { text-decoration-thickness: 2px; }
td.incomplete { background: #fff7e0; }
.ref { display: block; font-size: 0.68rem; color: #8a5a00; font-style: italic; }
.ci, .n { display: block; font-size: 0.64rem; color: #666; white-space: nowrap; }
table.t1 .ci { white-space: normal; }  /* "[lo, hi]" may break after its comma: 17 columns fit 1400 px at any n */
td.wrap { text-align: left; max-width: 28rem; overflow-wrap: anywhere; }
.warnings { background: #fff3cd; border: 1px solid #e0c870; padding: 0.5rem 1rem; overflow-wrap: anywhere; }
.legend { color: #444; max-width: 60rem; }
table.quoted { color: #444; } table.quoted caption { text-align: left; font-style: italic; }
.scroll { overflow-x: auto; max-width: 100%; }
p, li, figcaption { overflow-wrap: anywhere; }
figure { margin: 0.5rem 0; } img { max-width: 100%; border: 1px solid #eee; }
"""


def _td(value) -> str:
    text = str(value)
    return f'<td class="wrap">{escape(text)}</td>' if len(text) > 60 else f"<td>{escape(text)}</td>"


def _table(header: list, rows: list[list], cls: str, caption: str = "") -> str:
    head = "".join(f"<th>{escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(_td(c) for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return f'<div class="scroll"><table class="{cls}">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


_TABLE_CLASS = {"Cost": "costs", "Per-length": "lengths", "Score": "curves", "Paired": "paired", "Failures": "failures"}


def _section(title: str, intro: str, table: tuple[list, list[list]], empty: str) -> str:
    header, rows = table
    intro_html = f"<p>{escape(intro)}</p>" if intro else ""
    cls = _TABLE_CLASS.get(title.split()[0], "family")
    return f"<h3>{escape(title)}</h3>" + (intro_html + _table(header, rows, cls) if rows else f"<p>{escape(empty)}</p>")


def _value_cell(cell) -> str:
    value = {"best": "<strong>{}</strong>", "second": "<u>{}</u>"}.get(cell.mark, "{}").format(escape(cell.text))
    if cell.incomplete:
        value += f" {INCOMPLETE}"
    classes = " ".join(c for c in (cell.mark, "incomplete" if cell.incomplete else "") if c)
    extra = (
        ""
        if cell.text == DASH
        else (f'<span class="ci">{escape(cell.ci)}</span><span class="n">{escape(cell.n_text)}</span>')
    )
    return f'<td class="{classes}">{value}{extra}</td>'


def _group_class(group: str) -> str:
    return "g-" + "".join(ch for ch in group.lower() if ch.isalnum())


def _group_row(columns) -> str:
    """One header cell per run of consecutive columns under the same group."""
    cells, previous, span = [], None, 0
    for column in [*columns, None]:
        group = column.group if column is not None else None
        if column is not None and group == previous:
            span += 1
            continue
        if previous is not None:
            cells.append(f'<th colspan="{span}" class="group {_group_class(previous)}">{escape(previous)}</th>')
        previous, span = group, 1
    return '<tr><th class="label"></th>' + "".join(cells) + "</tr>"


def _config_label(result: LeaderboardResult, dataset: str, config: tuple) -> str:
    """Model, then harness and depth on a small second line; a partial run gets †, a reference its note."""
    note = result.reference(dataset, config)
    mark = f" {INCOMPLETE}" if tuple(config) in result.incomplete_configs(dataset) else ""
    text = escape(str(config[0])) + mark + f'<span class="cfg">{escape(str(config[1]))} · depth {config[2]}</span>'
    return text + (f'<span class="ref">reference: {escape(note)}</span>' if note else "")


def _main_table(result: LeaderboardResult, dataset: str) -> str:
    columns = display_columns(result.columns.get(dataset, []))
    groups = _group_row(columns)
    header = (
        '<tr><th class="label">Model · harness · depth</th>'
        + "".join(
            f'<th class="{_group_class(c.group)}" data-category="{escape(c.category)}">{escape(c.header)}</th>'
            for c in columns
        )
        + "</tr>"
    )
    counts = (
        '<tr class="counts"><th class="label">Samples</th>'
        + "".join(f"<th>({result.count(dataset, c.category) or 0})</th>" for c in columns)
        + "</tr>"
    )
    body = []
    for config in result.configs(dataset):
        cells = "".join(_value_cell(display_cell(result, dataset, config, c)) for c in columns)
        body.append(f'<tr class="config"><td class="label">{_config_label(result, dataset, config)}</td>{cells}</tr>')
    return (
        f'<div class="scroll"><table class="t1"><thead>{groups}{header}{counts}</thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _figures(result: LeaderboardResult, dataset: str) -> str:
    parts = []
    for name, formats in result.figures.get(dataset, {}).items():
        title = escape(figure_title(name))
        data = base64.b64encode(formats["png"]).decode("ascii")
        others = ", ".join(f'<a href="{escape(name)}.{fmt}">{fmt.upper()}</a>' for fmt in formats if fmt != "png")
        parts.append(
            f'<figure><img alt="{title}" src="data:image/png;base64,{data}"><figcaption>{title} '
            f"(also as {others})</figcaption></figure>"
        )
    return "".join(parts)


def _dataset(result: LeaderboardResult, dataset: str) -> str:
    names = sorted({r.run_name for r in result.runs if r.dataset == dataset})
    parts = [
        f'<section class="dataset" data-dataset="{escape(dataset)}">',
        f"<h2>Dataset {escape(short_hash(dataset))}</h2><p>Runs: {escape(', '.join(names))}; {escape(result.data_label(dataset))}</p>",
        "<h3>Overall by tier</h3>" if dataset in result.family_sections else "<h3>Table 1 layout</h3>",
        _main_table(result, dataset),
    ]
    for section in dataset_sections(result, dataset):
        parts.append("<h3>Figures</h3>" + _figures(result, dataset) if section is FIGURES else _section(*section))
    return "".join([*parts, "</section>"])


def render_html(result: LeaderboardResult) -> str:
    parts = [
        f"<h1>tsbench leaderboard</h1><p>{len(result.runs)} run(s) on {len(result.datasets)} dataset(s); "
        f"bootstrap {result.n_boot} resamples, seed {result.seed}.</p>"
    ]
    if result.warnings:
        parts.append(
            '<div class="warnings"><strong>Warnings</strong><ul>'
            + "".join(f"<li>{escape(w)}</li>" for w in result.warnings)
            + "</ul></div>"
        )
    legend = (
        escape(LEGEND)
        .replace("Bold = best", "<strong>Bold</strong> = best", 1)
        .replace("underline = second-best", "<u>underline</u> = second-best", 1)
    )
    parts.append(f'<p class="legend">{legend}</p>')
    parts += [_dataset(result, dataset) for dataset in result.datasets]
    if result.paper is not None:
        parts.append(
            f"<h2>Paper Table 1 (quoted)</h2><p><em>{escape(PAPER_LABEL)}.</em> Shown for reference only: "
            "not ranked against the runs above and not produced by this code.</p>"
            + _table(*paper_section(result), "quoted", caption=PAPER_LABEL)
        )
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>tsbench leaderboard</title><style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n"
    )
