"""Deterministic truth rules over the cumulative table (the `x-rule` of answer_schema.json).

Each rule reads the table exactly as written to timeseries.csv (rows in time order, the last row
is the target period) and returns a JSON value. The generator uses these to derive the truth of
table-grounded fields, and the audit re-runs them (paper Table 8, gate 4: rule reproducibility).
Thresholds that follow arithmetic are stated one decimal finer than the data, so no value sits on
a boundary that float rounding could tip.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np
import pandas as pd


def _col(table: pd.DataFrame, rule: dict) -> np.ndarray:
    return table[rule["column"]].to_numpy(dtype=float)


def band_of(value: float, edges: list[float], labels: list[str]) -> str:
    """labels[i] where i = number of edges <= value (an edge belongs to the band above it)."""
    return labels[bisect.bisect_right(edges, value)]


def status_path(values: np.ndarray, edges: list[float], labels: list[str], persistence: int) -> list[str]:
    """The status after every row: it moves to a new band only once the last `persistence`
    rows all sit in that band (the issuer's persistence rule); the first row takes its band."""
    raw = [band_of(v, edges, labels) for v in values]
    status = [raw[0]]
    for t in range(1, len(raw)):
        window = raw[max(0, t - persistence + 1) : t + 1]
        status.append(raw[t] if len(window) == persistence and len(set(window)) == 1 else status[-1])
    return status


def direction_of(delta: float, flat: float) -> str:
    """up, down or flat: a move within the flat band is flat."""
    return "up" if delta > flat else "down" if delta < -flat else "flat"


def robust_z(diffs: np.ndarray, t: int, baseline: int) -> float:
    """z of diffs[t] against the `baseline` diffs before it (median, 1.4826 x MAD)."""
    base = diffs[t - baseline : t]
    median = float(np.median(base))
    mad = 1.4826 * float(np.median(np.abs(base - median)))
    return (float(diffs[t]) - median) / max(mad, 1e-9)


def _latest_shares(table: pd.DataFrame, rule: dict) -> dict[str, float]:
    values = {name: float(table[col].iloc[-1]) for col, name in zip(rule["columns"], rule["names"])}
    total = sum(values.values())
    return {name: 100.0 * v / total for name, v in values.items()}


def derive(table: pd.DataFrame, rule: dict[str, Any]) -> Any:
    """The truth a rule gives for the table's last row."""
    kind = rule["kind"]
    dates = table["date"].astype(str).tolist()
    if kind == "bands":
        return status_path(_col(table, rule), rule["edges"], rule["labels"], int(rule.get("persistence", 1)))[-1]
    if kind == "latest":
        return round(float(_col(table, rule)[-1]), rule.get("decimals", 2))
    if kind == "direction":
        x = _col(table, rule)
        return direction_of(x[-1] - x[-1 - rule.get("lag", 1)], rule["flat"])
    if kind == "change":
        x = _col(table, rule)
        return round(float(x[-1] - x[-1 - rule.get("lag", 1)]), rule.get("decimals", 2))
    if kind == "run_length":
        x = _col(table, rule)
        above = x >= rule["threshold"]
        run = 0
        for flag in above[::-1]:
            if flag != above[-1]:
                break
            run += 1
        return run
    if kind == "baseline_dev":
        x = _col(table, rule)
        n = rule["window"]
        return round(float(x[-1] - x[-1 - n : -1].mean()), rule.get("decimals", 2))
    if kind == "record":
        x = _col(table, rule)[-rule["window"] :]
        return bool(x[-1] >= x.max())
    if kind == "rank":
        x = _col(table, rule)[-rule["window"] :]
        return int((x > x[-1]).sum()) + 1
    if kind in ("top_components", "dominant"):
        values = {name: float(table[col].iloc[-1]) for col, name in zip(rule["columns"], rule["names"])}
        ordered = sorted(values, key=lambda name: (-values[name], name))
        return ordered[0] if kind == "dominant" else sorted(ordered[: rule["n"]])
    if kind == "shares":
        return {name: round(share, rule.get("decimals", 1)) for name, share in _latest_shares(table, rule).items()}
    if kind == "buckets":
        return sorted(name for name, share in _latest_shares(table, rule).items() if share >= rule["threshold"])
    if kind in ("flag_events", "event_class"):
        diffs = np.diff(_col(table, rule))
        last = len(diffs) - 1
        if kind == "event_class":
            z = robust_z(diffs, last, rule["baseline"])
            return "spike" if z > rule["z"] else "dip" if z < -rule["z"] else "none"
        flagged = [
            dates[t + 1]
            for t in range(last - rule["window"] + 1, last + 1)
            if abs(robust_z(diffs, t, rule["baseline"])) > rule["z"]
        ]
        return sorted(flagged)
    if kind in ("largest_change", "next_changes"):
        moves = {
            name: abs(float(table[col].iloc[-1] - table[col].iloc[-2]))
            for col, name in zip(rule["columns"], rule["names"])
        }
        order = sorted(moves, key=lambda name: (-moves[name], name))
        if kind == "largest_change":
            return order[0]
        return sorted(
            n for n in order[1 : 1 + rule.get("n", 2)] if moves[n] >= rule.get("share", 0.35) * moves[order[0]]
        )
    if kind == "yoy":
        x = _col(table, rule)
        lag = rule["lag"]
        return {"reference": dates[-1 - lag], "direction": direction_of(x[-1] - x[-1 - lag], rule["flat"])}
    raise ValueError(f"unknown rule kind {kind!r}")


def rows_needed(rule: dict[str, Any]) -> int:
    """The fewest rows (target included) the rule can be evaluated on."""
    kind = rule["kind"]
    if kind in ("direction", "change"):
        return rule.get("lag", 1) + 1
    if kind == "baseline_dev":
        return rule["window"] + 1
    if kind in ("record", "rank"):
        return rule["window"]
    if kind in ("flag_events", "event_class"):
        return rule["baseline"] + rule.get("window", 1) + 1
    if kind == "yoy":
        return rule["lag"] + 1
    if kind in ("largest_change", "next_changes"):
        return 2
    return 1
