"""A run's numbers per category and overall: what `eval` prints and results.json holds.

Means are over scored rows; error rows are counted apart and never enter a mean. Intervals are
95 % percentile bootstraps of the mean (seed 0), flagged when a cell has fewer than 10 rows.

A zero always says why: every block counts its rows as `valid` (the answer parsed and passed the
type check), `invalid` (it did not: scored 0), `cut` (no usable answer because the token cap stopped
the reply: scored 0) and `errors` (the episode failed: never scored).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd

from tsbench.core.stats import bootstrap_ci

SMALL_N = 10  # below this many scored rows an interval carries a warning (here and on every board)


ANSWER_COUNTS = ("valid", "invalid", "cut", "errors")


def answer_kind(record: dict) -> str:
    """What became of one row's answer: valid, invalid, cut (no usable answer, a reply stopped by the
    token cap) or error (the episode failed)."""
    if isinstance(record.get("error_type"), str):
        return "error"
    valid = record.get("valid")
    if isinstance(valid, bool | np.bool_) and valid:
        return "valid"
    truncated = record.get("truncated_replies")
    if isinstance(truncated, int | float | np.integer | np.floating) and truncated == truncated and truncated > 0:
        return "cut"
    return "invalid"


def answer_counts(group: pd.DataFrame) -> dict[str, int]:
    """Rows by answer_kind: valid, invalid, cut, errors (they add up to the rows)."""
    fields = [c for c in ("error_type", "valid", "truncated_replies") if c in group]
    kinds = Counter(answer_kind(r) for r in group[fields].to_dict("records"))
    return {"valid": kinds["valid"], "invalid": kinds["invalid"], "cut": kinds["cut"], "errors": kinds["error"]}


def why_text(counts: dict[str, int]) -> str:
    """ "8 valid, 2 invalid, 1 cut by the token cap, 0 errors": the line beside every mean."""
    return (
        f"{counts['valid']} valid, {counts['invalid']} invalid, {counts['cut']} cut by the token cap, "
        f"{counts['errors']} error{'s' if counts['errors'] != 1 else ''}"
    )


def _block(group: pd.DataFrame) -> dict:
    scored = group[group["error_type"].isna() & group["score"].notna()]
    scores = scored["score"].astype(float).to_numpy()
    n = len(scores)
    mean = float(scores.mean()) if n else None
    stderr = float(scores.std(ddof=1) / math.sqrt(n)) if n > 1 else None
    low, high = bootstrap_ci(scores, n_boot=1000, seed=0) if n else (None, None)
    cost = group["cost_usd"].dropna()
    return {
        "rows": int(len(group)),
        "n": n,
        **answer_counts(group),
        "mean": mean,
        "stderr": stderr,
        "ci95": [low, high] if n else None,
        "small_n": bool(n < SMALL_N),
        "valid_rate": float(scored["valid"].astype(float).mean()) if n else None,
        "mean_turns": float(group["turns"].mean()) if len(group) else None,
        "forced_final_rate": float(scored["forced_final"].astype(float).mean()) if n else None,
        "input_tokens": int(group["input_tokens"].sum()),
        "output_tokens": int(group["output_tokens"].sum()),
        "cost_usd": float(cost.sum()) if len(cost) else None,
        "cost_known_rows": int(len(cost)),
    }


def summarize(samples: pd.DataFrame, category_order: list[str] | None = None) -> dict:
    """{"categories": [{"category": c, **block}, ...] in table order, "overall": block}."""
    order = {c: i for i, c in enumerate(category_order or [])}
    categories = sorted(samples["category"].dropna().unique(), key=lambda c: (order.get(c, len(order)), c))
    return {
        "categories": [{"category": c, **_block(samples[samples["category"] == c])} for c in categories],
        "overall": _block(samples),
    }


def error_share(samples: pd.DataFrame) -> tuple[int, float]:
    errors = int(samples["error_type"].notna().sum())
    return errors, errors / len(samples) if len(samples) else 0.0


def fails(errors: int, rows: int, tolerated: float) -> bool:
    """inspect's --fail-on-error rule: a value below 1 is a share of rows, from 1 a count."""
    if errors == 0:
        return False
    if tolerated >= 1:
        return errors > tolerated
    return errors / max(rows, 1) > tolerated


__all__ = ["ANSWER_COUNTS", "SMALL_N", "answer_counts", "answer_kind", "error_share", "fails", "summarize", "why_text"]
