"""Draw one row the way the paper's Fig. 5 does: the full series thin grey, the gold window shaded,
and a zoom on every gold window, large enough to read (its own panel with ticks, not a thumbnail).

The title names the category, L, each anomaly's kind and magnitude (in σ), and the gold answer; a
run's parsed answer (`predicted`) is drawn hatched, on the full series and in the zooms. Drawn on
matplotlib's object API (no pyplot), so a caller's backend is never touched; the suffix of `out`
picks the format (.png, .svg, .pdf).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tsbench.tasks.anomalyxl.rows import Row

GOLD, PREDICTED = "tab:red", "tab:blue"
MAX_ZOOMS = 4
_METADATA = {".png": {"Software": None}, ".svg": {"Date": None}, ".pdf": {"CreationDate": None}}


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


def _anomalies(row: Row) -> str:
    parts = []
    for inj in row.plan["injections"]:
        sign = (
            "" if inj["kind"] in ("Change in Seasonality", "Change in Variance") else ("+" if inj["sign"] > 0 else "−")
        )
        where = f" on {row.channel_names[inj['channel']]}" if len(row.channel_names) > 1 else ""
        parts.append(f"{inj['kind']} {sign}{inj['magnitude']:.2f}σ{where}, width {inj['end'] - inj['start']}")
    return "; ".join(parts) if parts else "no anomaly"


def title(row: Row, predicted: dict | None = None) -> str:
    """What the figure shows, in words: category, L, kind and magnitude of each anomaly, gold, prediction."""
    lines = [f"{row.id}: {row.category}, L = {row.length:,}", _anomalies(row), f"gold: {row.gold_text()}"]
    if predicted is not None:
        lines.append(f"predicted: {json.dumps(predicted)}")
    return "\n".join(lines)


def _zoom_range(start: int, end: int, length: int, guessed: list[tuple[int, int]]) -> tuple[int, int]:
    """The window with three widths of context each side (at least 64 samples), widened to take in a
    prediction that overlaps or nearly touches it."""
    pad = max(3 * (end - start), 64)
    lo, hi = start - pad, end + pad
    for s, e in guessed:
        if s < hi + pad and e > lo - pad:
            lo, hi = min(lo, s - 16), max(hi, e + 16)
    return max(0, lo), min(length, hi)


def plot_row(row: Row, out: str | Path, max_points: int = 20000, predicted: dict | None = None) -> Path:
    """The figure at `out`. `predicted` is a run's parsed answer for this row, drawn hatched."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    values = row.values
    n_ch = values.shape[0]
    windows = gold_windows(row)
    zooms = windows[:MAX_ZOOMS]
    guessed = predicted_windows(row, predicted)
    height = max(3.2, 0.55 * n_ch + 1.6, 2.3 * len(zooms) + 1.2)
    fig = Figure(figsize=(14 if zooms else 11, height), layout="constrained")
    FigureCanvasAgg(fig)
    if zooms:
        full, zoom_area = fig.subfigures(1, 2, width_ratios=[2.6, 1.0])
    else:
        full, zoom_area = fig, None
    axes = full.subplots(n_ch, 1, sharex=True, squeeze=False)[:, 0]
    stride = max(1, row.length // max_points)
    t = np.arange(0, row.length, stride)
    for c, ax in enumerate(axes):
        ax.plot(t, values[c, ::stride], color="0.45", lw=0.4)
        for ch, s, e in windows:
            if ch == c:
                ax.axvspan(s, e, color=GOLD, alpha=0.3, lw=0)
        for ch, s, e in guessed:
            if ch == c:
                ax.axvspan(s, e, facecolor="none", edgecolor=PREDICTED, hatch="///", lw=0.8)
        ax.set_ylabel(row.channel_names[c], rotation=0, ha="right", va="center", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_xlim(0, row.length)
    axes[-1].set_xlabel("sample index")
    handles = [Patch(color=GOLD, alpha=0.3, label="gold window")] if windows else []  # a no-anomaly row has none
    if guessed:
        handles.append(Patch(facecolor="none", edgecolor=PREDICTED, hatch="///", label="predicted window"))
    if handles:
        axes[0].legend(handles=handles, loc="upper right", fontsize=7, framealpha=0.9)
    if zooms:
        zoom_axes = zoom_area.subplots(len(zooms), 1, squeeze=False)[:, 0]
        for ax, (c, s, e) in zip(zoom_axes, zooms):
            lo, hi = _zoom_range(s, e, row.length, [(ps, pe) for pc, ps, pe in guessed if pc == c])
            ax.plot(np.arange(lo, hi), values[c, lo:hi], color="0.2", lw=0.8)
            ax.axvspan(s, e, color=GOLD, alpha=0.3, lw=0)
            for pc, ps, pe in guessed:
                if pc == c and ps < hi and pe > lo:
                    ax.axvspan(max(ps, lo), min(pe, hi), facecolor="none", edgecolor=PREDICTED, hatch="///", lw=0.8)
            ax.set_xlim(lo, hi)
            ax.set_title(f"zoom: {row.channel_names[c]} [{s}, {e})", fontsize=8)
            ax.tick_params(labelsize=7)
        zoom_axes[-1].set_xlabel("sample index", fontsize=8)
        if len(windows) > MAX_ZOOMS:
            zoom_area.suptitle(f"first {MAX_ZOOMS} of {len(windows)} windows", fontsize=8)
    fig.suptitle(title(row, predicted), fontsize=9, ha="left", x=0.01)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42, "svg.hashsalt": "tsbench"}):
        fig.savefig(out, dpi=120, metadata=_METADATA.get(out.suffix.lower()))
    return out
