"""The per-category table `eval`, `show` and `score` print: every mean beside why rows scored 0.

Columns: n (scored rows), mean, 95 % interval, then the rows by what became of their answer: valid,
invalid (no parseable answer: scored 0), cut (the token cap stopped the reply: scored 0) and errors
(never scored). Names are never cut: at 80 columns the turns, tokens and cost columns go first.
"""

from __future__ import annotations

from rich import box
from rich.table import Table

WIDE = 110  # below this many columns: no turns, tokens or cost column


def _count(block: dict, key: str) -> str:
    value = block.get(key)
    return "" if value is None else str(value)


def summary_table(blocks: dict, title: str, width: int) -> Table:
    """`blocks`: results.json's summary ({"categories": [...], "overall": {...}})."""
    wide = width >= WIDE
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, title_justify="left")
    table.add_column("category", no_wrap=True)
    for name in ("n", "mean", "95% CI", "valid", "invalid", "cut", "errors"):
        table.add_column(name, justify="right", no_wrap=True)
    if wide:
        for name in ("turns", "tokens", "cost $"):
            table.add_column(name, justify="right", no_wrap=True)
    rows = [(b["category"], b) for b in blocks.get("categories", [])] + [("overall", blocks["overall"])]
    for name, block in rows:
        ci = block.get("ci95")
        cells = [
            name,
            str(block["n"]),
            "—" if block.get("mean") is None else f"{block['mean']:.3f}",
            "" if ci is None else f"{ci[0]:.2f}–{ci[1]:.2f}" + ("*" if block.get("small_n") else ""),
            *(_count(block, k) for k in ("valid", "invalid", "cut", "errors")),
        ]
        if wide:
            cells += [
                "—" if block.get("mean_turns") is None else f"{block['mean_turns']:.1f}",
                f"{block.get('input_tokens', 0) + block.get('output_tokens', 0):,}",
                "—" if block.get("cost_usd") is None else f"{block['cost_usd']:.4f}",
            ]
        table.add_row(*cells, end_section=name == rows[-2][0] if len(rows) > 1 else False)
    return table


def usage_line(overall: dict) -> str:
    """Tokens, turns and cost over the run: under the table where it has no columns for them."""
    tokens = overall.get("input_tokens", 0) + overall.get("output_tokens", 0)
    turns = "" if overall.get("mean_turns") is None else f", {overall['mean_turns']:.1f} turns a row"
    cost = "" if overall.get("cost_usd") is None else f", ${overall['cost_usd']:.4f}"
    return f"tokens {tokens:,}{turns}{cost}"
