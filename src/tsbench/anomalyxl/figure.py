"""Draw one row the way the paper's Fig. 5 does: full series thin grey, gold window shaded, a zoom inset."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tsbench.anomalyxl.rows import Row


def gold_windows(row: Row) -> list[tuple[int, int, int]]:
    """(channel index, start, end) of every injected window, from the plan."""
    return [(inj["channel"], inj["start"], inj["end"]) for inj in row.plan["injections"]]


def plot_row(row: Row, out: str | Path, max_points: int = 20000) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = row.values
    n_ch = values.shape[0]
    windows = gold_windows(row)
    fig, axes = plt.subplots(n_ch, 1, figsize=(11, max(2.2, 1.1 * n_ch + 1)), sharex=True, squeeze=False)
    stride = max(1, row.length // max_points)
    t = np.arange(0, row.length, stride)
    for c, ax in enumerate(axes[:, 0]):
        ax.plot(t, values[c, ::stride], color="0.45", lw=0.4)
        ax.set_ylabel(row.channel_names[c], rotation=0, ha="right", fontsize=8)
        ax.tick_params(labelsize=7)
        for ch, s, e in windows:
            if ch != c:
                continue
            ax.axvspan(s, e, color="tab:red", alpha=0.25, lw=0)
            pad = max(3 * (e - s), 64)
            lo, hi = max(0, s - pad), min(row.length, e + pad)
            left = 0.02 if (s + e) / 2 > row.length / 2 else 0.72  # keep the inset off the window
            inset = ax.inset_axes([left, 0.52, 0.26, 0.44])
            inset.plot(np.arange(lo, hi), values[c, lo:hi], color="0.2", lw=0.6)
            inset.axvspan(s, e, color="tab:red", alpha=0.25, lw=0)
            inset.tick_params(labelsize=6)
    axes[0, 0].set_title(f"{row.id}  (L={row.length})  gold: {row.gold_text()}", fontsize=8)
    axes[-1, 0].set_xlabel("sample index")
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
