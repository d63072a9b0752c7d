"""The default `describe --plot` figure of any family: each channel of one row's series, one panel
each, drawn on matplotlib's object API (no pyplot, so a caller's backend is never touched)."""

from __future__ import annotations

from pathlib import Path

from tsbench.core.episode import EpisodeTask
from tsbench.core.errors import UserError

MAX_PANELS = 8


def plot_series(task: EpisodeTask, out: Path, *, title: str) -> Path:
    """Write the figure to `out` (its suffix picks the format) and return the path."""
    from matplotlib.figure import Figure

    if task.values is None or task.values.size == 0:
        raise UserError(f"row {task.row_id} has no series to draw (its task is files only)")
    channels = list(zip(task.channel_names or [f"ch_{c}" for c in range(len(task.values))], task.values))[:MAX_PANELS]
    figure = Figure(figsize=(12, 1.6 * len(channels) + 0.6))
    axes = figure.subplots(len(channels), 1, squeeze=False, sharex=True)[:, 0]
    for ax, (name, values) in zip(axes, channels):
        ax.plot(values, color="0.3", linewidth=0.6)
        ax.set_ylabel(str(name))
    axes[0].set_title(title)
    axes[-1].set_xlabel("sample")
    figure.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out)
    return out
