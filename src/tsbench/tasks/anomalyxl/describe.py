"""What a generated file holds, computed from its light columns (gold and plan), never the values."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from tsbench.core import json_input
from tsbench.tasks.anomalyxl import labels as lb


def composition(index: pd.DataFrame) -> dict:
    """Counts and ranges per category: rows x L, kinds, K, directions, no-anomaly share, widths, magnitudes."""
    cells = index.groupby(["category", "length"]).size().unstack(fill_value=0)
    summary: dict[str, dict] = {}
    for category, group in index.groupby("category", sort=False):
        golds = [json_input.loads(g, f"a {category} row's gold") for g in group["gold"]]
        plans = [json_input.loads(p, f"a {category} row's plan") for p in group["plan"]]
        injections = [inj for p in plans for inj in p["injections"]]
        info: dict = {"rows": len(group)}
        if category in lb.MCQ_CATEGORIES:
            info["answers"] = dict(Counter(g["answer"] for g in golds).most_common())
        else:
            info["kinds"] = dict(Counter(inj["kind"] for inj in injections).most_common())
            widths = [inj["end"] - inj["start"] for inj in injections]
            mags = [inj["magnitude"] for inj in injections]
            if widths:
                info["width min/max"] = (int(min(widths)), int(max(widths)))
                info["magnitude min/median/max"] = tuple(
                    round(float(v), 2) for v in (min(mags), np.median(mags), max(mags))
                )
            if category == lb.LOCALIZE:
                info["no_anomaly_share"] = round(float(np.mean([not g["present"] for g in golds])), 3)
            if category == lb.ALL_CHANNELS:
                ks = Counter(len(g["anomalies"]) for g in golds)
                info["K"] = {k: ks[k] for k in sorted(ks)}
                info["no_anomaly_share"] = round(ks.get(0, 0) / len(golds), 3)
            if category == lb.LEAD_LAG:
                info["directions"] = dict(Counter(g["direction"] for g in golds).most_common())
        summary[category] = info
    return {"cells": cells, "categories": summary, "rows": len(index)}
