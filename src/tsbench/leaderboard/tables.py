"""Rows -> the numbers of the Table-1 layout: pure functions from pandas frames to pandas frames.

Conventions (they decide what a number means, so they are stated once here):
- A cell is one (dataset, model, harness, depth, category). Its value is the unweighted mean of
  `score` over the scored rows, each (id, epoch) counting once: epochs are not averaged per id
  first, so a run with 3 epochs simply has 3x the rows.
- Error rows (score null) are left out of means and macro-F1, but counted in the cost table's
  error rate and in the failures table. A row that finished without a parseable answer has a
  score (0) and is included; MCQ macro-F1 counts it as a miss.
- A cell is incomplete when it has fewer scored rows than the run has rows of that category (error
  rows left out) or its run says complete=false (killed, or still going). A complete run of fewer
  rows (a smaller --limit) is not incomplete: it is compared with the others on the rows they all
  scored (below), and its n says how many.
- Configurations are compared on their common rows: when the complete cells of a column did not
  all score the same (id, epoch) rows (different --limit draws, say), each of them is shown over
  the rows they all scored (`common` is True, `n_own` keeps its own count) so the numbers in a
  column mean the same thing. Incomplete cells keep their own rows and are marked.
- A column whose family names its own aggregation (`Column.aggregate`: CiK's RCRPS, weighted by
  task weight, capped at 5, an unusable answer at 5) shows that number, its interval a bootstrap of
  the weighted mean over rows.
- Best and second-best are marked per column among configurations on the same dataset; scores are
  "higher is better" (MMag and LL are already turned into [0, 1] scores by the scorer), a column
  whose aggregate says lower is better (RCRPS) is ranked the other way (`lower_is_better`).
  Reference policies (run.json "reference": they see what a model does not) and incomplete cells
  are never marked.
- `small_n`: fewer than SMALL_N scored rows, so the 95 % interval is rough (renderers flag it).
- Columns, their order and which are multiple choice come from the family's TaskFamily.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from tsbench.core.stats import bootstrap_ci, bootstrap_weighted_ci
from tsbench.results.summary import ANSWER_COUNTS, SMALL_N, answer_counts
from tsbench.tasks.base import Column

from .columns import columns_for, is_choice
from .load import CONFIG_KEY
from .paper_rows import OOM_ERROR
from .significance import holm, paired_comparison
from .stats import (
    bootstrap_macro_f1_ci,
    bootstrap_mean_of_means,
    cell_seed,
    gold_option,
    mcq_macro_f1,
    predicted_option,
)

CELL_COLUMNS = [
    *CONFIG_KEY,
    *"category n_rows n_ids n_scored n_own common mean mean_lo mean_hi f1 f1_lo f1_hi run_complete".split(),
    *"reference oom lower_is_better".split(),
]


def dataset_columns(rows: pd.DataFrame) -> dict[str, list[Column]]:
    """dataset -> its family's columns (plus any category the rows hold that the family lacks)."""
    out = {}
    for dataset, part in rows.groupby("dataset", sort=True):
        family = str(part["family"].iloc[0]) if "family" in part else "anomalyxl"
        out[dataset] = columns_for(family, list(part["category"].dropna().unique()))
    return out


def config_label(model: str, harness: str, depth: int) -> str:
    return f"{model} · {harness} · depth {depth}"


def _configs(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per configuration, in a stable order: all its runs complete? a reference policy?"""
    if rows.empty:
        return pd.DataFrame(columns=CONFIG_KEY + ["complete", "reference"])
    if "reference" not in rows:
        rows = rows.assign(reference=None)
    grouped = (
        rows.groupby(CONFIG_KEY, sort=True, dropna=False)
        .agg(complete=("run_complete", "all"), reference=("reference", "first"))
        .reset_index()
    )
    return grouped


def _cell(column: Column | None, group: pd.DataFrame, n_boot: int, seed: int) -> dict:
    scored = group[group["score"].notna()]
    out = {
        "n_rows": len(group),
        "n_ids": int(group["id"].nunique()),
        "n_scored": len(scored),
        **dict.fromkeys(("mean", "mean_lo", "mean_hi", "f1", "f1_lo", "f1_hi"), np.nan),
        # Out of memory at some of its lengths: no number, the cell reads OOM* (the paper's Table 1).
        "oom": bool((group["error_type"] == OOM_ERROR).any()),
        "lower_is_better": bool(column is not None and column.aggregate and column.aggregate.lower_is_better),
    }
    if scored.empty or out["oom"]:
        return out
    if column is not None and column.mean_metric and column.aggregate is not None:
        return _aggregated(out, column, scored, n_boot, seed)
    scores = scored["score"].astype(float).to_numpy()
    if column is not None and column.mean_metric:
        reported = scored["metrics"].map(lambda m: (m or {}).get(column.mean_metric))
        scores = reported.dropna().astype(float).to_numpy()
    if len(scores):
        out["mean"] = float(scores.mean())
        out["mean_lo"], out["mean_hi"] = bootstrap_ci(scores, n_boot=n_boot, seed=seed)
    if is_choice(column):
        golds = [gold_option(g) for g in scored["gold"]]
        preds = [predicted_option(p) for p in scored["parsed_answer"]]
        out["f1"] = mcq_macro_f1(column.options, golds, preds)
        out["f1_lo"], out["f1_hi"] = bootstrap_macro_f1_ci(column.options, golds, preds, n_boot=n_boot, seed=seed + 1)
    return out


def _aggregated(out: dict, column: Column, scored: pd.DataFrame, n_boot: int, seed: int) -> dict:
    """A cell whose family names the aggregation: its weighted, capped mean and a weighted bootstrap."""
    aggregate = column.aggregate
    values, weights = aggregate.inputs(scored["metrics"], scored["attributes"], column.mean_metric)
    kept = [(v, w) for v, w in zip(aggregate.filled(values), weights) if v is not None]
    if kept:
        vector, weight = np.array([v for v, _ in kept]), np.array([w for _, w in kept])
        out["mean"] = aggregate.value(values, weights)
        out["mean_lo"], out["mean_hi"] = bootstrap_weighted_ci(vector, weight, n_boot=n_boot, seed=seed)
    return out


def _scored_keys(group: pd.DataFrame) -> frozenset:
    scored = group[group["score"].notna()]
    return frozenset(zip(scored["id"], scored["epoch"]))


def cell_table(rows: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Long table: one line per (configuration, category) with mean, macro-F1, 95 % intervals, counts."""
    records = []
    configs = _configs(rows).set_index(CONFIG_KEY)
    columns = {d: {c.category: c for c in cols} for d, cols in dataset_columns(rows).items()}
    groups = dict(iter(rows.groupby(CONFIG_KEY + ["category"], sort=True, dropna=False)))
    for key, group in groups.items():
        *config, category = key
        stats = _cell(columns.get(key[0], {}).get(category), group, n_boot, cell_seed(seed, *key))
        info = configs.loc[tuple(config)]
        records.append(
            {
                **dict(zip(CONFIG_KEY, config)),
                "category": category,
                **stats,
                "n_own": stats["n_scored"],
                "common": False,
                "run_complete": bool(info["complete"]),
                "reference": info["reference"],
            }
        )
    cells = pd.DataFrame(records, columns=CELL_COLUMNS)
    cells["incomplete"] = (cells["n_scored"] < cells["n_rows"]) | ~cells["run_complete"].astype(bool)
    cells = _on_common_rows(cells, groups, columns, n_boot, seed)
    cells["small_n"] = cells["n_scored"] < SMALL_N
    return mark_ranks(cells.drop(columns="run_complete"))


def _on_common_rows(cells: pd.DataFrame, groups: dict, columns: dict, n_boot: int, seed: int) -> pd.DataFrame:
    """Recompute the complete cells of a column over the (id, epoch) rows they all scored, when
    they did not all score the same rows; a column with no common row keeps its own numbers."""
    cells = cells.copy()
    cells["disjoint"] = False
    complete = cells[~cells["incomplete"].astype(bool) & (cells["n_scored"] > 0)]
    for (dataset, category), part in complete.groupby(["dataset", "category"], sort=False):
        keys = {i: tuple(part.loc[i, CONFIG_KEY + ["category"]]) for i in part.index}
        scored = {i: _scored_keys(groups[k]) for i, k in keys.items()}
        common = frozenset.intersection(*scored.values())
        if len(set(scored.values())) == 1:
            continue
        if not common:
            cells.loc[list(keys), "disjoint"] = True
            continue
        for i, key in keys.items():
            group = groups[key]
            on_common = group[[k in common for k in zip(group["id"], group["epoch"])]]
            stats = _cell(columns.get(dataset, {}).get(category), on_common, n_boot, cell_seed(seed, *key, "common"))
            for name in ("n_scored", "mean", "mean_lo", "mean_hi", "f1", "f1_lo", "f1_hi"):
                cells.at[i, name] = stats[name]
            cells.at[i, "common"] = True
    return cells


def common_row_notes(cells: pd.DataFrame) -> list[str]:
    """One warning per column whose configurations were compared on a subset of their rows."""
    notes = []
    for (dataset, category), part in cells[cells["common"].astype(bool)].groupby(["dataset", "category"], sort=True):
        notes.append(
            f"{category} on {dataset[:40]}: configurations scored different rows; compared on the "
            f"{int(part['n_scored'].iloc[0])} rows all complete ones scored (their own counts: "
            f"{', '.join(str(int(n)) for n in part['n_own'])})"
        )
    for (dataset, category), _part in cells[cells["disjoint"].astype(bool)].groupby(["dataset", "category"], sort=True):
        notes.append(
            f"{category} on {dataset[:40]}: complete configurations share no scored row; each is shown "
            "over its own rows and none is ranked"
        )
    return notes


def column_counts(cells: pd.DataFrame) -> pd.DataFrame:
    """Sample count under each column header: the most distinct rows (ids, whatever the number of
    epochs) any configuration has, per dataset."""
    if cells.empty:
        return pd.DataFrame(columns=["dataset", "category", "column_n"])
    counts = cells.groupby(["dataset", "category"])["n_ids"].max().reset_index()
    return counts.rename(columns={"n_ids": "column_n"})


def _ranks(values: pd.Series, lower_is_better: bool = False) -> pd.Series:
    """'best' / 'second' / '' by distinct value (ties share a mark); nothing marked with < 2 values,
    nor where every value ties (all 0, say): no configuration is better than another there."""
    present = values.dropna()
    marks = pd.Series("", index=values.index)
    distinct = sorted(present.unique(), reverse=not lower_is_better)
    if len(present) < 2 or len(distinct) < 2:
        return marks
    marks[values == distinct[0]] = "best"
    if len(distinct) > 1:
        marks[values == distinct[1]] = "second"
    return marks


def mark_ranks(cells: pd.DataFrame) -> pd.DataFrame:
    """Add mean_mark and f1_mark: best and second-best per (dataset, category) column, among
    complete cells of models (reference policies and incomplete cells are shown, never ranked)."""
    cells = cells.copy()
    cells["mean_mark"] = ""
    cells["f1_mark"] = ""
    rankable = ~cells["incomplete"].astype(bool)
    if "reference" in cells:
        rankable &= cells["reference"].isna()
    if "disjoint" in cells:  # complete cells that share no row cannot be ranked against each other
        rankable &= ~cells["disjoint"].astype(bool)
    for _, index in cells[rankable].groupby(["dataset", "category"]).groups.items():
        lower = "lower_is_better" in cells and bool(cells.loc[index, "lower_is_better"].fillna(False).any())
        cells.loc[index, "mean_mark"] = _ranks(cells.loc[index, "mean"], lower_is_better=lower)
        cells.loc[index, "f1_mark"] = _ranks(cells.loc[index, "f1"])
    return cells


def wide_table(cells: pd.DataFrame, all_columns: list[Column]) -> pd.DataFrame:
    """One line per configuration, the category columns in the paper's order (the CSV layout).

    Multiple-choice categories carry `<cat>_acc*` and `<cat>_f1*`; others `<cat>_score*`; every
    category also `<cat>_n` (scored rows), `<cat>_rows` and `<cat>_incomplete`.
    """
    configs = cells[CONFIG_KEY].drop_duplicates().sort_values(CONFIG_KEY).reset_index(drop=True)
    indexed = cells.set_index(CONFIG_KEY + ["category"])
    keys = [tuple(cfg) for cfg in configs.itertuples(index=False)]
    columns: dict[str, list] = {}
    for column in all_columns:
        parts = {"acc": "mean", "f1": "f1"} if is_choice(column) else {"score": "mean"}
        fields = {
            f"{part}{suffix}": f"{src}{suffix}" for part, src in parts.items() for suffix in ("", "_lo", "_hi", "_mark")
        }
        fields.update(n="n_scored", rows="n_rows", incomplete="incomplete")
        for name, src in fields.items():
            columns[f"{column.category}_{name}"] = [_lookup(indexed, key + (column.category,), src) for key in keys]
    return pd.concat([configs, pd.DataFrame(columns)], axis=1)


def _lookup(indexed: pd.DataFrame, key: tuple, column: str):
    try:
        return indexed.at[key, column]
    except KeyError:
        return None


COST_COLUMNS = CONFIG_KEY + [
    "rows",
    *ANSWER_COUNTS,
    "turns",
    "code_cells",
    "sub_calls",
    "input_tokens",
    "output_tokens",
    "sub_call_tokens",
    "latency_s",
    "forced_final_rate",
    "error_rate",
    "cost_usd",
    "cost_per_row_usd",
    "cost_known",
    "tokens_estimated",
]


def cost_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: mean turns, code cells, sub-calls, tokens; forced-final and error rates; dollars.

    Means are over all rows (an errored episode still spent its tokens); the forced-final rate is
    over finished rows. Dollars are summed over rows that know their cost, and `cost_known` says
    how many did, so a partial sum is never mistaken for the total.
    """
    records = []
    for key, group in rows.groupby(CONFIG_KEY, sort=True, dropna=False):
        finished = group[group["error_type"].isna()]
        known = group["cost_usd"].dropna()
        records.append(
            {
                **dict(zip(CONFIG_KEY, key)),
                "rows": len(group),
                **answer_counts(group),  # a zero says why: valid, invalid, cut by the token cap, errors
                "turns": _mean(group["turns"]),
                "code_cells": _mean(group["code_cells"]),
                "sub_calls": _mean(group["sub_calls"]),
                "input_tokens": _mean(group["input_tokens"]),
                "output_tokens": _mean(group["output_tokens"]),
                "sub_call_tokens": _mean(group["sub_call_tokens"]),
                "latency_s": _mean(group["latency_s"]),
                "forced_final_rate": _mean(finished["forced_final"].astype("float")) if len(finished) else np.nan,
                "error_rate": float(group["error_type"].notna().mean()),
                "cost_usd": float(known.sum()) if len(known) else np.nan,
                "cost_per_row_usd": float(known.mean()) if len(known) else np.nan,
                "cost_known": len(known),
                # rows whose server sent token counts that were no counts: tokens are our estimate, cost unknown
                "tokens_estimated": int(
                    sum(1 for a in group.get("attributes", ()) if _attribute(a, "usage_invalid_calls"))
                ),
            }
        )
    return pd.DataFrame(records, columns=COST_COLUMNS)


def _attribute(attributes: Any, key: str) -> str | None:
    """One attribute of a row (a dict, or the (key, value) pairs parquet's map type reads back as)."""
    if attributes is None or (isinstance(attributes, float) and attributes != attributes):
        return None
    pairs = attributes.items() if isinstance(attributes, dict) else attributes
    return next((value for name, value in pairs if name == key), None)


def _mean(values: pd.Series) -> float:
    numeric = pd.to_numeric(values, errors="coerce").dropna()
    return float(numeric.mean()) if len(numeric) else np.nan


def _invalid_reason(answer_error) -> str:
    return (
        f"no parseable answer ({answer_error})"
        if isinstance(answer_error, str) and answer_error
        else "no parseable answer"
    )


def failure_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows that errored or finished without a usable answer, counted by cause per configuration."""
    records = []
    for key, group in rows.groupby(CONFIG_KEY, sort=True, dropna=False):
        causes: Counter[str] = Counter()
        examples: dict[str, str] = {}
        for row in group.itertuples(index=False):
            if isinstance(row.error_type, str):
                cause, example = f"error: {row.error_type}", row.error
            elif pd.isna(row.valid) or not bool(row.valid) or not isinstance(row.parsed_answer, str):
                cause, example = _invalid_reason(row.answer_error), row.final_message
            else:
                continue
            causes[cause] += 1
            if cause not in examples and isinstance(example, str):
                examples[cause] = " ".join(example.split())[:160]
        for cause, count in sorted(causes.items(), key=lambda kv: (-kv[1], kv[0])):
            records.append(
                {
                    **dict(zip(CONFIG_KEY, key)),
                    "cause": cause,
                    "count": count,
                    "share": count / len(group),
                    "example": examples.get(cause, ""),
                }
            )
    return pd.DataFrame(records, columns=CONFIG_KEY + ["cause", "count", "share", "example"])


def length_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Fig. 3 numbers: mean score per (configuration, category, length) and its change, in
    percentage points, from that category's shortest length in the same configuration."""
    scored = rows[rows["score"].notna() & rows["length"].notna()]
    if scored.empty:
        return pd.DataFrame(columns=CONFIG_KEY + ["category", "length", "n", "mean", "delta_pp"])
    table = (
        scored.groupby(CONFIG_KEY + ["category", "length"], sort=True)["score"].agg(n="size", mean="mean").reset_index()
    )
    first = table.sort_values("length").groupby(CONFIG_KEY + ["category"])["mean"].transform("first")
    table["delta_pp"] = (table["mean"] - first) * 100.0
    return table


def length_curves(
    by_length: pd.DataFrame, precise: list[str], rows: pd.DataFrame | None = None, n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Fig. 4 numbers: per configuration and length, the mean over the precise (not multiple-choice)
    categories that were run at every length that configuration has (unweighted across categories),
    the rows behind it (`n`) and, given the rows, a 95 % interval that resamples rows within each
    category."""
    precise = by_length[by_length["category"].isin(precise)]
    scores = {}
    if rows is not None:
        scored = rows[rows["score"].notna() & rows["length"].notna()]
        scores = {
            key: group["score"].astype(float).to_numpy()
            for key, group in scored.groupby(CONFIG_KEY + ["category", "length"], sort=False)
        }
    records = []
    for key, group in precise.groupby(CONFIG_KEY, sort=True):
        lengths = sorted(group["length"].unique())
        swept = [c for c, g in group.groupby("category") if set(g["length"]) == set(lengths)]
        used = group[group["category"].isin(swept)]
        for length, at in used.groupby("length"):
            arrays = [scores.get((*key, c, length), []) for c in at["category"]]
            low, high = (
                bootstrap_mean_of_means(arrays, n_boot, cell_seed(seed, *key, length)) if scores else (np.nan, np.nan)
            )
            records.append(
                {
                    **dict(zip(CONFIG_KEY, key)),
                    "length": int(length),
                    "mean": float(at["mean"].mean()),
                    "lo": low,
                    "hi": high,
                    "n": int(at["n"].sum()),
                    "categories": ",".join(sorted(swept)),
                }
            )
    return pd.DataFrame(records, columns=CONFIG_KEY + ["length", "mean", "lo", "hi", "n", "categories"])


def paired_table(rows: pd.DataFrame, n_boot: int = 1000, seed: int = 0, min_shared: int = 2) -> pd.DataFrame:
    """For every two configurations on the same dataset and every category: mean(a) - mean(b)
    over the (id, epoch) rows both scored, with a paired bootstrap 95 % interval, the exact (0/1
    scores) or permutation p-value Holm-corrected across the pair's categories, and the rows a
    replication needs at 80 % power (significance.py, as `tsbench compare`)."""
    scored = rows[rows["score"].notna()]
    records = []
    for dataset, on_dataset in scored.groupby("dataset", sort=True):
        by_config = {key: group for key, group in on_dataset.groupby(CONFIG_KEY[1:], sort=True)}
        for a, b in itertools.combinations(sorted(by_config), 2):
            joined = by_config[a].merge(by_config[b], on=["id", "epoch", "category"], suffixes=("_a", "_b"))
            found = []
            for category, pair in joined.groupby("category", sort=True):
                if len(pair) < min_shared:
                    continue
                result = paired_comparison(
                    pair["score_a"], pair["score_b"], n_boot=n_boot, seed=cell_seed(seed, dataset, a, b, category)
                )
                found.append(
                    {
                        "dataset": dataset,
                        "a": config_label(*a),
                        "b": config_label(*b),
                        "category": category,
                        "n": result.n,
                        "mean_a": result.mean_a,
                        "mean_b": result.mean_b,
                        "diff": result.diff,
                        "lo": result.lo,
                        "hi": result.hi,
                        "excludes_zero": bool(result.lo > 0 or result.hi < 0),
                        "test": result.test,
                        "p": result.p,
                        "rows_needed": result.rows_needed,
                    }
                )
            for record, adjusted in zip(found, holm([r["p"] for r in found])):
                records.append({**record, "p_holm": adjusted})
    return pd.DataFrame(records, columns=PAIRED_COLUMNS)


PAIRED_COLUMNS = "dataset a b category n mean_a mean_b diff lo hi excludes_zero test p p_holm rows_needed".split()
