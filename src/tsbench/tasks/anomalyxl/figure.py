"""Draw one row the way the paper's Fig. 5 does: full series thin grey, gold window shaded, a zoom inset."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tsbench.tasks.anomalyxl.rows import Row


def gold_windows(row: Row) -> list[tuple[int, int, int]]:
    """(channel index, start, end) of every injected window, from the plan."""
    return [(inj["channel"], inj["start"], inj["end"]) for inj in row.plan["injections"]]


def predicted_windows(row: Row, answer: dict | None) -> list[tuple[int, int, int]]:
    """(channel index, start, end) of the windows a parsed answer names."""
    if not answer:
        return []
    if "anomalies" in answer:
        index = {name: c for c, name in enumerate(row.channel_names)}
        return [(index[e["channel"]], e["start"], e["end"]) for e in answer["anomalies"] if e.get("channel") in index]
    if "start" in answer and "end" in answer:
        return [(0, int(answer["start"]), int(answer["end"]))]
    return []


def _title(row: Row) -> str:
    kinds = sorted({f"{inj['kind']} {inj['magnitude']:.1f}σ" for inj in row.plan["injections"]})
    what = "; ".join(kinds) if kinds else "no anomaly"
    return f"{row.id}  (L={row.length})  {what}\ngold: {row.gold_text()}"


def plot_row(row: Row, out: str | Path, max_points: int = 20000, predicted: dict | None = None) -> Path:
    """The figure at `out`; the suffix picks the format (.png, .svg, .pdf). `predicted` is a run's
    parsed answer, drawn as a hatched window beside the gold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = row.values
    n_ch = values.shape[0]
    windows = gold_windows(row)
    fig, axes = plt.subplots(n_ch, 1, figsize=(11, max(2.2, 1.1 * n_ch + 1)), sharex=True, squeeze=False)
    stride = max(1, row.length // max_points)
    t = np.arange(0, row.length, stride)
    guessed = predicted_windows(row, predicted)
    for c, ax in enumerate(axes[:, 0]):
        for ch, s, e in guessed:
            if ch == c:
                ax.axvspan(s, e, facecolor="none", edgecolor="tab:blue", hatch="///", lw=0.8, label="predicted")
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
            inset = ax.inset_axes([left, 0.45, 0.3, 0.5])
            inset.plot(np.arange(lo, hi), values[c, lo:hi], color="0.2", lw=0.6)
            inset.axvspan(s, e, color="tab:red", alpha=0.25, lw=0)
            inset.tick_params(labelsize=7)
    axes[0, 0].set_title(_title(row), fontsize=9)
    if guessed:
        axes[0, 0].legend(loc="lower right", fontsize=7)
    axes[-1, 0].set_xlabel("sample index")
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
