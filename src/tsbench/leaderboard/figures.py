"""The paper's Fig. 3 (category x length heat map) and Fig. 4 (score vs length), as PNG, SVG and PDF.

Figures are drawn on matplotlib's Agg canvas through the object API (no pyplot), so building a
leaderboard never touches the global backend of a process that imported us, and needs no display.
Every figure labels a configuration as the tables do (`LeaderboardResult.config_name`), shows the
rows behind each number (n), and writes "n/a" where a category was not run at a length.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Callable
from pathlib import Path

import matplotlib
import matplotlib.text
import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Normalize, TwoSlopeNorm
from matplotlib.figure import Figure

from tsbench.tasks.base import Column

from .columns import is_choice, order, short_name
from .load import CONFIG_KEY
from .result import INCOMPLETE, NOT_RUN, SMALL_N_MARK
from .tables import SMALL_N, config_label

FORMATS = ("png", "svg", "pdf")
# Reproducible bytes: no creation dates in the vector formats.
_METADATA = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}
Namer = Callable[[tuple], str]


def length_tick(length: int) -> str:
    """16384 -> '16k', 131072 -> '131k' (the paper's labels), 512 -> '512'."""
    return f"{round(length / 1000)}k" if length >= 1000 else str(length)


DPI = 110
SHOWN_PX, LEAST_TEXT_PX = 800, 10  # a figure shown 800 px wide (a page, the HTML board) reads at 10 px or more


PAD_IN = 0.1  # savefig's pad_inches around the tight box


def least_font_pt(fig: Figure) -> float:
    """The smallest font size (points) that is LEAST_TEXT_PX tall once the figure, saved at DPI, is
    scaled to SHOWN_PX wide (a figure narrower than that is shown as it is)."""
    width_px = (fig.get_size_inches()[0] + 2 * PAD_IN) * DPI
    return LEAST_TEXT_PX * 72 / DPI * max(1.0, width_px / SHOWN_PX)


def legible(fig: Figure) -> Figure:
    """Every text of `fig` raised to `least_font_pt` (ticks, legends, annotations, titles), and titles
    wrapped at the figure's edge, so larger text never widens the saved image past its nominal width."""
    floor = least_font_pt(fig)
    for text in fig.findobj(matplotlib.text.Text):
        if text.get_text() and text.get_fontsize() < floor:
            text.set_fontsize(floor)
    titles = [fig._suptitle, fig._supxlabel, *(ax.title for ax in fig.axes)]
    for sub in fig.subfigs:
        titles += [sub._suptitle]
    for title in titles:
        if title is not None:
            title.set_wrap(True)
    return fig


def render(fig: Figure) -> dict[str, bytes]:
    """The figure in every format the leaderboard writes, its text legible at SHOWN_PX wide."""
    FigureCanvasAgg(legible(fig))
    out = {}
    # SVG keeps its text as text (searchable, editable for a paper); PDF embeds TrueType fonts.
    with matplotlib.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42, "svg.hashsalt": "tsbench"}):
        for fmt in FORMATS:
            buffer = io.BytesIO()
            fig.savefig(buffer, format=fmt, dpi=DPI, bbox_inches="tight", pad_inches=PAD_IN, metadata=_METADATA[fmt])
            out[fmt] = buffer.getvalue()
    return out


SAME_AS = "same values as"


def plot_series(ax, x, y, label: str, drawn: list, **style) -> None:
    """`ax.plot` that never hides a line silently: a series equal to one already drawn on `ax` says so in
    its label ("same values as ...") and is drawn dashed with hollow markers over it, so both show."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    same = next(
        (
            other
            for other, ox, oy in drawn
            if len(ox) == len(x) and np.allclose(ox, x) and np.allclose(oy, y, equal_nan=True)
        ),
        None,
    )
    if same is not None:
        label = f"{label} ({SAME_AS} {same})"
        style = {**style, "ls": (0, (4, 3)), "mfc": "none", "zorder": 3, "lw": 1.8}
    drawn.append((label, x, y))
    ax.plot(x, y, label=label, **style)


def safe_name(name: str) -> str:
    """A figure's file stem with nothing a shell, a URL or LaTeX trips on: letters, digits, `._-`
    ("by_length-anomalyxl seed42 test (3f2a9c)" -> "by_length-anomalyxl_seed42_test_3f2a9c")."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_.") or "figure"


STALE_LIST = ".tsbench-figures"  # in a leaderboard folder: the figure files the last build wrote
STALE_SUMS = ".tsbench-figures.sha256"  # and the SHA-256 of each, as written


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sweep_stale(out: Path, written: set[str], contents: dict[str, bytes] | None = None) -> list[Path]:
    """Remove the figures an earlier build left in `out` that this one does not write (so a folder
    never shows figures of runs it was not built from), then record `written`. Only files provably
    this tool's go: on the last build's list with the bytes it wrote (a figure the user replaced, or
    added under one of our names, stays). Folders from before the list had hashes are not swept.
    `contents`: the bytes about to be written under those names (else the files as they are now) are
    what the list records. A name alone proves nothing: a file is ours by the bytes we wrote."""
    out = Path(out)
    sums = out / STALE_SUMS
    try:
        earlier = json.loads(sums.read_text(encoding="utf-8")) if sums.is_file() and not sums.is_symlink() else {}
    except ValueError:
        earlier = {}
    earlier = earlier if isinstance(earlier, dict) else {}
    removed = []
    for path in sorted(out.iterdir()) if out.is_dir() else []:
        if path.name in written or path.suffix[1:] not in FORMATS or path.name not in earlier:
            continue
        if path.is_file() and not path.is_symlink() and _sha256(path) == earlier[path.name]:
            path.unlink()
            removed.append(path)
    out.mkdir(parents=True, exist_ok=True)
    (out / STALE_LIST).write_text("".join(f"{name}\n" for name in sorted(written)), encoding="utf-8")
    contents = contents or {}
    present = {
        name: hashlib.sha256(contents[name]).hexdigest() if name in contents else _sha256(out / name)
        for name in sorted(written)
        if name in contents or (out / name).is_file()
    }
    sums.write_text(json.dumps(present, indent=1), encoding="utf-8")
    return removed


def marks_note(labels: list[str]) -> str:
    """The line that explains the marks the labels carry (a figure is read apart from its table)."""
    notes = []
    if any(INCOMPLETE in label for label in labels):
        notes.append(f"{INCOMPLETE} incomplete run: fewer rows than it planned (errors or still going)")
    if any("(reference:" in label for label in labels):
        notes.append("reference: a policy that sees more than a model (never ranked)")
    return "; ".join(notes)


def _default_name(config: tuple) -> str:
    return config_label(*config)


def _row_label(columns: list[Column], category: str) -> str:
    column = next((c for c in columns if c.category == category), None)
    return f"{short_name(columns, category)} ({column.metric})" if column is not None else category


def _ink(rgba) -> str:
    """Black or white text, whichever reads on the cell colour."""
    r, g, b = rgba[:3]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "white"


def _grid(part: pd.DataFrame, categories: list[str], lengths: list[int], column: str) -> np.ndarray:
    grid = np.full((len(categories), len(lengths)), np.nan)
    for row in part.itertuples(index=False):
        grid[categories.index(row.category), lengths.index(row.length)] = getattr(row, column)
    return grid


def _heat(ax, values: np.ndarray, texts: list[list[list[tuple[str, dict]]]], cmap, norm) -> object:
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm, aspect="auto")
    for (r, c), value in np.ndenumerate(values):
        if np.isnan(value):
            ax.text(c, r, NOT_RUN, ha="center", va="center", fontsize=7.5, color="0.35")
            continue
        ink = _ink(cmap(norm(value)))
        lines = texts[r][c]
        offsets = np.linspace(-0.16, 0.16, len(lines)) if len(lines) > 1 else [0.0]
        for (text, style), dy in zip(lines, offsets):
            ax.text(c, r + dy, text, ha="center", va="center", color=ink, **style)
    return image


def length_heatmap(
    by_length: pd.DataFrame, columns: list[Column], name: Namer = _default_name
) -> dict[str, bytes] | None:
    """Fig. 3 in every format (see heatmap_figure)."""
    fig = heatmap_figure(by_length, columns, name)
    return None if fig is None else render(fig)


def heatmap_figure(by_length: pd.DataFrame, columns: list[Column], name: Namer = _default_name) -> Figure | None:
    """Fig. 3: per configuration (one band, titled with its label), two panels over categories x
    lengths. Left: the mean score (bold) and the rows behind it; right: its change in percentage
    points from the category's shortest length, on a colour-blind-safe diverging scale (blue improves
    with length, red degrades); a change resting on fewer than SMALL_N rows on either side is marked
    `*` and drawn pale, never read as measured. Cells whose category was not run at that length read "n/a"."""
    if by_length.empty:
        return None
    precise = [c.category for c in columns if not is_choice(c)]
    if by_length["category"].isin(precise).any():  # the paper's Fig. 3 is the precise reward
        by_length = by_length[by_length["category"].isin(precise)]
    ranks = order(columns)
    lengths = [int(x) for x in sorted(by_length["length"].unique())]
    categories = sorted(by_length["category"].unique(), key=lambda c: (ranks.get(c, 99), c))
    panels = list(by_length.groupby(CONFIG_KEY[1:], sort=True))
    limit = max(1.0, float(np.nanmax(np.abs(by_length["delta_pp"].to_numpy(dtype=float)))))
    mean_cmap, mean_norm = colormaps["YlGnBu"].with_extremes(bad="#eeeeee"), Normalize(0.0, 1.0)
    delta_cmap = colormaps["RdBu"].with_extremes(bad="#eeeeee")  # red-blue: no red-green pair
    delta_norm = TwoSlopeNorm(vmin=-limit, vcenter=0.0, vmax=limit)
    band = 0.55 * len(categories) + 1.3
    fig = Figure(
        figsize=(max(9.0, 2 * (0.95 * len(lengths) + 1.6) + 3.2), band * len(panels) + 0.5), layout="constrained"
    )
    bands = fig.subfigures(len(panels), 1, squeeze=False)[:, 0]
    flagged = False
    for (config, part), sub in zip(panels, bands):
        left, right = sub.subplots(1, 2)
        means, counts = _grid(part, categories, lengths, "mean"), _grid(part, categories, lengths, "n")
        deltas = _grid(part, categories, lengths, "delta_pp")
        mean_texts = [
            [
                [
                    (f"{means[r, c]:.3f}", {"fontsize": 8.5, "fontweight": "bold"}),
                    (f"n={int(counts[r, c])}" if not np.isnan(counts[r, c]) else "", {"fontsize": 7}),
                ]
                for c in range(len(lengths))
            ]
            for r in range(len(categories))
        ]
        base = [int(np.argmax(~np.isnan(deltas[r]))) for r in range(len(categories))]  # each row's shortest L
        rough = np.minimum(counts, counts[np.arange(len(categories)), base][:, None]) < SMALL_N
        flagged = flagged or bool((rough & ~np.isnan(deltas)).any())
        delta_texts = [
            [
                [
                    (
                        "shortest L"
                        if c == base[r]
                        else f"{deltas[r, c]:+.1f} pp" + (SMALL_N_MARK if rough[r, c] else ""),
                        {"fontsize": 8, "alpha": 0.55 if rough[r, c] and c != base[r] else 1.0},
                    )
                ]
                for c in range(len(lengths))
            ]
            for r in range(len(categories))
        ]
        mean_image = _heat(left, means, mean_texts, mean_cmap, mean_norm)
        delta_image = _heat(right, deltas, delta_texts, delta_cmap, delta_norm)
        for ax, what in ((left, "mean score"), (right, "change from the shortest L")):
            ax.set_xticks(range(len(lengths)), [length_tick(x) for x in lengths], fontsize=8)
            ax.set_yticks(range(len(categories)), [_row_label(columns, c) for c in categories], fontsize=8)
            ax.set_xlabel("context length L (samples)", fontsize=8)
            ax.set_title(what, fontsize=8.5)
        right.tick_params(labelleft=False)
        left.set_ylabel("category (metric)", fontsize=8)
        right.set_ylabel("category, as on the left", fontsize=8)
        sub.colorbar(mean_image, ax=left, shrink=0.9, aspect=15).set_label("mean score (0 to 1)", fontsize=7.5)
        sub.colorbar(delta_image, ax=right, shrink=0.9, aspect=15).set_label("percentage points", fontsize=7.5)
        sub.suptitle(name(config), fontsize=9, fontweight="bold")
    fig.suptitle(
        "Mean score by category and context length (n = scored rows per cell; right: change from "
        "the category's shortest L)",
        fontsize=10,
    )
    notes = [marks_note([name(config) for config, _ in panels])]
    if flagged:
        notes.append(
            f"{SMALL_N_MARK} fewer than {SMALL_N} rows in the cell or at its shortest L: not a measured change"
        )
    if note := "; ".join(n for n in notes if n):
        fig.supxlabel(note, fontsize=7.5, color="0.3")
    return fig


def length_curves_figure(
    curves: pd.DataFrame, name: Namer = _default_name, references: set[tuple] = frozenset()
) -> dict[str, bytes] | None:
    """Fig. 4: one line per configuration, the mean over its length-swept precise categories at each
    length, a 95 % bootstrap band where a point has SMALL_N rows or more, and the rows behind each point
    (hollow below SMALL_N rows). Reference policies (`references`) are dashed."""
    fig = curves_figure(curves, name, references)
    return None if fig is None else render(fig)


DODGE = 0.07  # log2 units between configurations at one length: equal points never hide each other
STACK = 0.04  # points closer than this in score share a label column, stacked one above the other


def _label_rows(groups_y: list[np.ndarray]) -> list[np.ndarray]:
    """Per configuration and length, the label's place in its stack: 0 for the lowest of the points
    within STACK of each other at that length, 1 for the next, ... (so their n= labels never overlap)."""
    ranks = [np.zeros(len(y), dtype=int) for y in groups_y]
    for j in range(max((len(y) for y in groups_y), default=0)):
        at = sorted((float(y[j]), i) for i, y in enumerate(groups_y) if j < len(y) and not np.isnan(y[j]))
        for k, (value, i) in enumerate(at):
            below = [v for v, _ in at[:k] if value - v < STACK]
            ranks[i][j] = len(below)
    return ranks


def curves_figure(
    curves: pd.DataFrame, name: Namer = _default_name, references: set[tuple] = frozenset()
) -> Figure | None:
    """Fig. 4 as a matplotlib Figure (tests measure where its labels land). Configurations are dodged
    side by side at each length and their n= labels stacked where points coincide; a 95 % band (and
    bar) is drawn where a point rests on at least SMALL_N rows, and the title says when none is."""
    if curves.empty:
        return None
    fig = Figure(figsize=(7.5, 4.6), layout="constrained")
    ax = fig.add_subplot()
    lengths = sorted(int(x) for x in curves["length"].unique())
    palette = colormaps["tab10"]
    groups = [(config, part.sort_values("length")) for config, part in curves.groupby(CONFIG_KEY[1:], sort=True)]
    labels = [name(config) for config, _ in groups]
    stacks = _label_rows([part["mean"].to_numpy(dtype=float) for _, part in groups])
    banded = False
    for i, ((config, part), label) in enumerate(zip(groups, labels)):
        colour = palette(i % 10)
        x = part["length"].to_numpy(dtype=float) * 2 ** ((i - (len(groups) - 1) / 2) * DODGE)
        y = part["mean"].to_numpy(dtype=float)
        ax.plot(x, y, color=colour, lw=1.6, ls="--" if tuple(config) in references else "-", label=label)
        n = part["n"].to_numpy() if "n" in part else np.full(len(part), SMALL_N)
        small = n < SMALL_N
        if {"lo", "hi"} <= set(part):
            lo, hi = part["lo"].to_numpy(dtype=float), part["hi"].to_numpy(dtype=float)
            shown = ~small & ~np.isnan(lo) & ~np.isnan(hi)
            if shown.any():
                banded = True
                ax.fill_between(x, np.where(shown, lo, np.nan), np.where(shown, hi, np.nan), color=colour, alpha=0.15)
                ax.vlines(x[shown], lo[shown], hi[shown], color=colour, lw=1.0, alpha=0.7)
        # clip_on=False: a point at 0 or 1 shows whole, never half under the frame
        ax.scatter(x[~small], y[~small], color=colour, s=22, zorder=3, clip_on=False)
        ax.scatter(x[small], y[small], facecolors="white", edgecolors=[colour], s=22, zorder=3, clip_on=False)
        for xi, yi, ni, rank in zip(x, y, n, stacks[i]):
            above = yi < 0.75  # near the top the labels stack under their point, inside the axes
            step = 8 * int(rank)
            ax.annotate(
                f"n={int(ni)}",
                (xi, yi),
                textcoords="offset points",
                xytext=(0, 7 + step if above else -8 - step),
                ha="center",
                va="bottom" if above else "top",
                fontsize=6.5,
                color=colour,
                annotation_clip=False,
            )
    if len(lengths) > 1:
        ax.set_xscale("log", base=2)
        ax.set_xlim(lengths[0] / 2**0.45, lengths[-1] * 2**0.45)  # room for the end points' labels
    else:
        ax.set_xlim(lengths[0] * 0.6, lengths[0] * 1.4)
    ax.set_xticks(lengths, [length_tick(x) for x in lengths])
    ax.minorticks_off()
    ax.set_ylim(-0.06, 1.1)
    ax.set_xlabel("context length L (samples)")
    ax.set_ylabel("mean score, length-swept precise categories")
    ax.grid(alpha=0.3)
    # outside the axes, with room made for it by the layout: never clipped, whatever the labels' length
    columns = 1 if max(map(len, labels), default=0) > 45 else 2
    legend = fig.legend(fontsize=7, loc="outside lower center", ncol=columns, frameon=False)
    if note := marks_note(labels):
        legend.set_title(note, prop={"size": 7})
    bands = (
        f"bands: 95 % bootstrap where n ≥ {SMALL_N}"
        if banded
        else f"no 95 % bands: every point rests on fewer than {SMALL_N} rows"
    )
    ax.set_title(
        f"Score versus context length ({bands}; hollow: n < {SMALL_N}; dashed: reference policy)", fontsize=9.5
    )
    return fig
