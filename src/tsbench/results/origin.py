"""Rows grouped by where they were played (the `node` and `worker` columns): what `tsbench show
--by node|worker` prints and the leaderboard writes as by_node.csv. A slow or failing machine of a
cluster shows as its own line: its errors, its mean latency, its mean score over scored rows."""

from __future__ import annotations

import pandas as pd

ORIGINS = ("node", "worker")
UNRECORDED = "(not recorded)"  # rows written before the columns existed, or by an executor that sets none


def by_origin(rows: pd.DataFrame, by: str = "node", keys: tuple[str, ...] = ()) -> pd.DataFrame:
    """One line per `keys` + `by` value: rows, errors (never in a mean), scored rows, their mean score,
    the mean latency of finished rows and, per node, how many workers played there."""
    if by not in ORIGINS:
        raise ValueError(f"group by one of {', '.join(ORIGINS)} (got {by!r})")
    frame = rows.copy()
    for column in ORIGINS:
        values = frame[column] if column in frame else pd.Series(None, index=frame.index, dtype=object)
        frame[column] = values.where(values.notna(), UNRECORDED)
    error = frame["error_type"].notna()
    frame["_error"] = error.astype(int)
    frame["_score"] = frame["score"].where(~error & frame["score"].notna())
    frame["_latency"] = frame["latency_s"].where(~error)
    columns = [*keys, by, "rows", "errors", "scored", "mean_score", "mean_latency_s"] + (["workers"] * (by == "node"))
    if frame.empty:
        return pd.DataFrame(columns=columns)
    grouped = frame.groupby([*keys, by], sort=True, dropna=False)
    table = grouped.agg(
        rows=("id", "size"),
        errors=("_error", "sum"),
        scored=("_score", "count"),
        mean_score=("_score", "mean"),
        mean_latency_s=("_latency", "mean"),
        workers=("worker", "nunique"),
    ).reset_index()
    return table[columns]
