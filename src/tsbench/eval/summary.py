"""Per-category summary of a run's rows (means over scored rows; errors counted apart)."""

from __future__ import annotations

import pandas as pd

from tsbench.anomalyxl import labels as lb


def summarize(samples: pd.DataFrame) -> pd.DataFrame:
    order = {c: i for i, c in enumerate(lb.ALL_CATEGORIES)}
    rows = []
    for category, group in samples.groupby("category"):
        scored = group[group["error_type"].isna()]
        rows.append({
            "category": category,
            "rows": len(group),
            "mean_score": scored["score"].mean() if len(scored) else float("nan"),
            "valid_rate": scored["valid"].mean() if len(scored) else float("nan"),
            "errors": int(group["error_type"].notna().sum()),
            "mean_turns": group["turns"].mean(),
            "forced_final": group["forced_final"].mean(),
            "tokens_in": int(group["input_tokens"].sum()),
            "tokens_out": int(group["output_tokens"].sum()),
        })
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    return table.sort_values("category", key=lambda s: s.map(order)).reset_index(drop=True)
