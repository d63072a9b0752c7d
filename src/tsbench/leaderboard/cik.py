"""CiK's own numbers (TimeClaw Table 1 layout): per configuration, the average RCRPS as CiK
aggregates it, the average sMAPE as TimeClaw does, RCRPS by context type and tokens per row.

* Average RCRPS: CiK's `compute_all_rcprs` (the family's column aggregate): each instance capped at
  5, weighted by its task weight, an unusable answer at 5. Error rows (no answer at all) are left
  out and counted, so a run with errors reads as incomplete rather than better.
* Average sMAPE: TimeClaw's mean of per-instance sMAPE in percent, an unusable answer at 200 (its
  bound, as TimeClaw scores a parse failure).
* RCRPS by context type: the same aggregate over the rows whose `context_types` attribute names the
  type (TimeClaw's assignment of tasks to types; `context_types_cik` keeps the records' own tags).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tsbench.tasks.base import Aggregate

from .columns import family_columns
from .load import CONFIG_KEY
from .result import DASH, LeaderboardResult, fmt

FAMILY = "cik"
CONTEXT_TYPES = ("intemporal", "historical", "future", "covariate", "causal")
UNUSABLE_SMAPE = 200.0  # TimeClaw's sMAPE of a reply it cannot parse
FALLBACK = Aggregate(weight="weight", cap=5.0, unusable=5.0, lower_is_better=True)


def rcrps_aggregate() -> Aggregate:
    """The family's RCRPS aggregate (its columns say it); CiK's rule when the family is not installed."""
    columns = family_columns(FAMILY) or ()
    return next((c.aggregate for c in columns if c.aggregate is not None), FALLBACK)


def _attribute(attributes, key: str) -> str:
    if attributes is None:
        return ""
    pairs = attributes.items() if isinstance(attributes, dict) else attributes
    return next((str(v) for k, v in pairs if k == key), "")


def _metric(metrics, key: str) -> float | None:
    if metrics is None:
        return None
    pairs = metrics.items() if isinstance(metrics, dict) else metrics
    for name, value in pairs:
        if name == key:
            return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
    return None


def mean_smape(values: list[float | None]) -> float | None:
    """TimeClaw's average sMAPE: an unusable answer (None) at 200, NaN left out."""
    filled = [UNUSABLE_SMAPE if v is None else v for v in values]
    kept = [v for v in filled if not math.isnan(v)]
    return float(np.mean(kept)) if kept else None


def summary(rows: pd.DataFrame) -> dict:
    """CiK's numbers for one set of rows (one configuration, or one ablation setting)."""
    aggregate = rcrps_aggregate()
    errors = rows["error_type"].notna() if "error_type" in rows else pd.Series(False, index=rows.index)
    scored = rows[~errors & rows["score"].notna()]
    rcrps = [_metric(m, "rcrps") for m in scored["metrics"]]
    weights = [float(_attribute(a, aggregate.weight or "") or 1.0) for a in scored["attributes"]]
    tokens = rows["input_tokens"].fillna(0) + rows["output_tokens"].fillna(0)
    line = {
        "rows": len(rows),
        "errors": int(errors.sum()),
        "unusable": sum(v is None for v in rcrps),
        "rcrps": aggregate.value(rcrps, weights) if rcrps else None,
        "smape": mean_smape([_metric(m, "smape") for m in scored["metrics"]]) if len(scored) else None,
        "tokens_per_row": float(tokens.mean()) if len(rows) else None,
    }
    types = [_attribute(a, "context_types").split(",") for a in scored["attributes"]]
    for kind in CONTEXT_TYPES:
        keep = [kind in t for t in types]
        picked = [(v, w) for v, w, k in zip(rcrps, weights, keep) if k]
        line[f"rcrps_{kind}"] = aggregate.value([v for v, _ in picked], [w for _, w in picked]) if picked else None
    return line


def board(rows: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """One line per configuration on a CiK dataset."""
    part = rows[rows["dataset"] == dataset]
    lines = [{**dict(zip(CONFIG_KEY, key)), **summary(group)} for key, group in part.groupby(CONFIG_KEY, sort=True)]
    return pd.DataFrame(lines)


def sections(table: pd.DataFrame) -> list:
    header = ["Model", "Harness", "Rows", "Errors", "Unusable", "Avg RCRPS", "Avg sMAPE (%)", "Tokens / row"]
    header += [f"RCRPS {kind}" for kind in CONTEXT_TYPES]
    body = []
    for line in table.to_dict("records"):
        tokens = DASH if line["tokens_per_row"] is None else f"{line['tokens_per_row']:,.0f}"
        cells = [line["model"], line["harness"], line["rows"], line["errors"], line["unusable"]]
        cells += [fmt(line["rcrps"], 4), fmt(line["smape"], 2), tokens]
        cells += [fmt(line[f"rcrps_{kind}"], 4) for kind in CONTEXT_TYPES]
        body.append([str(c) for c in cells])
    intro = (
        "RCRPS as CiK aggregates it (each instance capped at 5, weighted by task weight, an unusable answer at 5); "
        "sMAPE in percent as TimeClaw averages it (an unusable answer at 200); lower is better. Error rows are "
        "left out and counted; context types as TimeClaw assigns CiK's tasks."
    )
    return [("CiK (TimeClaw Table 1 layout)", intro, (header, body))]


def attach(
    result: LeaderboardResult, rows: pd.DataFrame, datasets: list[str], with_paper: bool = False
) -> dict[str, pd.DataFrame]:
    """Add the CiK board to the `datasets` (those whose family names this board); returns the CSV frames
    to write."""
    frames = []
    for dataset in datasets:
        table = board(rows, dataset)
        if table.empty:
            continue
        result.family_sections.setdefault(dataset, []).extend(sections(table))
        frames.append(table.assign(dataset=dataset))
    return {"cik_board.csv": pd.concat(frames, ignore_index=True)} if frames else {}
