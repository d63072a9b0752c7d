"""The paper's Fig. 3 (category x length heat map) and Fig. 4 (score vs length) as PNG bytes.

Figures are drawn on matplotlib's Agg canvas through the object API (no pyplot), so building a
leaderboard never touches the global backend of a process that imported us, and needs no display.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from tsbench.tasks.base import Column

from .columns import is_choice, order, short_name
from .load import CONFIG_KEY
from .tables import config_label


def length_tick(length: int) -> str:
    """16384 -> '16k', 131072 -> '131k' (the paper's labels), 512 -> '512'."""
    return f"{round(length / 1000)}k" if length >= 1000 else str(length)


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return buffer.getvalue()


def length_heatmap(by_length: pd.DataFrame, columns: list[Column]) -> bytes | None:
    """One panel per configuration: categories x lengths, the mean in bold and its change (pp) from
    the shortest length below it; colour is that change (green improves with length, red degrades)."""
    if by_length.empty:
        return None
    precise = [c.category for c in columns if not is_choice(c)]
    if by_length["category"].isin(precise).any():  # the paper's Fig. 3 is the precise reward
        by_length = by_length[by_length["category"].isin(precise)]
    ranks = order(columns)
    lengths = sorted(by_length["length"].unique())
    panels = list(by_length.groupby(CONFIG_KEY[1:], sort=True))
    n_categories = by_length["category"].nunique()
    limit = max(1.0, float(np.nanmax(np.abs(by_length["delta_pp"].to_numpy(dtype=float)))))
    norm = TwoSlopeNorm(vmin=-limit, vcenter=0.0, vmax=limit)
    cmap = colormaps["RdYlGn"].with_extremes(bad="#eeeeee")
    ncols = min(2, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(1.2 * len(lengths) * ncols + 3.0, (0.5 * n_categories + 1.0) * nrows + 0.6),
                 layout="constrained")
    image = None
    for i, (config, part) in enumerate(panels):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        categories = sorted(part["category"].unique(), key=lambda c: ranks.get(c, 99))
        grid = np.full((len(categories), len(lengths)), np.nan)
        means = np.full_like(grid, np.nan)
        for row in part.itertuples(index=False):
            r, c = categories.index(row.category), lengths.index(row.length)
            grid[r, c], means[r, c] = row.delta_pp, row.mean
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, norm=norm, aspect="auto")
        for (r, c), mean in np.ndenumerate(means):
            if not np.isnan(mean):
                ax.text(c, r - 0.12, f"{mean:.3f}", ha="center", va="center", fontsize=8, fontweight="bold")
                ax.text(c, r + 0.22, f"{grid[r, c]:+.1f} pp", ha="center", va="center", fontsize=6.5)
        ax.set_xticks(range(len(lengths)), [length_tick(int(x)) for x in lengths], fontsize=8)
        ax.set_yticks(range(len(categories)), [short_name(columns, c) for c in categories], fontsize=8)
        ax.set_title(config_label(*config), fontsize=9)
        ax.set_xlabel("context length L", fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=fig.axes, shrink=min(0.6, 3.0 / (0.5 * n_categories + 1.0) / nrows + 0.2), aspect=25,
                     label="change from shortest L (pp)")
    fig.suptitle("Mean score by category and context length", fontsize=10)
    return _png(fig)


def length_curves_figure(curves: pd.DataFrame) -> bytes | None:
    """One line per configuration: mean over the length-swept precise categories at each length."""
    if curves.empty:
        return None
    fig = Figure(figsize=(6.5, 4.0), layout="constrained")
    ax = fig.add_subplot()
    lengths = sorted(curves["length"].unique())
    for config, part in curves.groupby(CONFIG_KEY[1:], sort=True):
        part = part.sort_values("length")
        ax.plot(part["length"], part["mean"], marker="o", label=config_label(*config))
    if len(lengths) > 1:
        ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [length_tick(int(x)) for x in lengths])
    ax.minorticks_off()
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel("context length L")
    ax.set_ylabel("mean score (length-swept precise categories)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    ax.set_title("Score versus context length", fontsize=10)
    return _png(fig)
