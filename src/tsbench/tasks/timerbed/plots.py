"""The image a TimerBed row is shown as (TimeMaster G.1, after VL-Time): one RGB line plot in the
time domain, raw values, every channel overlaid on one shared Timestamp axis in its own colour with
a legend when there are several (HAR), x label "Timestamp", y label "Value", tight layout, PNG at
the paper's pixel size for the task. Drawn on matplotlib's object API (no pyplot state)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

# Width x height in pixels (TimeMaster G.1): ECG 980x230, CTU 562x230, TEE/RCW/EMG 789x239, HAR 389x233.
SIZES = {
    "ecg": (980, 230),
    "ctu": (562, 230),
    "tee": (789, 239),
    "rcw": (789, 239),
    "emg": (789, 239),
    "har": (389, 233),
}
DEFAULT_SIZE = (789, 239)
DPI = 100
# The public CTU script draws 720 points at width 2; a thinner line keeps 1500-4000 points legible.
LINE_WIDTH = {"ctu": 2.0, "har": 1.2, "tee": 1.2}
TITLE = "Complete Signal"


def plot_size(task: str) -> tuple[int, int]:
    return SIZES.get(task, DEFAULT_SIZE)


def render_png(task: str, channel_names: list[str], values: np.ndarray) -> bytes:
    """The row's plot as PNG bytes, exactly `plot_size(task)` pixels."""
    from matplotlib.figure import Figure

    width, height = plot_size(task)
    figure = Figure(figsize=(width / DPI, height / DPI), dpi=DPI)
    ax = figure.add_subplot(1, 1, 1)
    series = np.atleast_2d(np.asarray(values, dtype=np.float64))
    for c, (name, line) in enumerate(zip(channel_names, series)):
        ax.plot(line, linewidth=LINE_WIDTH.get(task, 1.0), color=f"C{c}", label=str(name))
    ax.set_title(TITLE, fontsize=9)
    ax.set_xlabel("Timestamp", fontsize=8)
    ax.set_ylabel("Value", fontsize=8)
    ax.tick_params(labelsize=7)
    if len(series) > 1:
        ax.legend(fontsize=6, loc="upper right")
    figure.tight_layout(pad=0.3)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def save_plot(task: str, channel_names: list[str], values: np.ndarray, out: Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(render_png(task, channel_names, values))
    return out
