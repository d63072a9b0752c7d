"""Render a series as one PNG for the single-pass-image harness: channels stacked, shared index axis."""

from __future__ import annotations

import io

import numpy as np


def render_series_png(channel_names: list[str], values: np.ndarray, *, max_points: int = 8000, dpi: int = 100) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_ch, length = values.shape
    fig, axes = plt.subplots(n_ch, 1, figsize=(12, min(2.0 + 1.2 * n_ch, 24)), sharex=True, squeeze=False)
    # Min/max envelope per bucket keeps short spikes visible when the series is longer than the pixels.
    bucket = max(1, int(np.ceil(length / max_points)))
    t = np.arange(0, length, bucket)
    for c, ax in enumerate(axes[:, 0]):
        x = values[c].astype(np.float64)
        if bucket > 1:
            pad = (-len(x)) % bucket
            padded = np.pad(x, (0, pad), mode="edge").reshape(-1, bucket)
            ax.fill_between(t, padded.min(axis=1), padded.max(axis=1), color="tab:blue", lw=0.3)
        else:
            ax.plot(t, x, color="tab:blue", lw=0.6)
        ax.set_ylabel(channel_names[c], rotation=0, ha="right", fontsize=9)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
    axes[-1, 0].set_xlabel("sample index")
    axes[-1, 0].set_xlim(0, length - 1)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()
