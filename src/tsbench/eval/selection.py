"""Which rows a run evaluates: the family's index, filtered, then drawn evenly for --limit.

--limit N takes N rows in all, as inspect and lm-eval count it; --limit-per-category N takes N of
each category (both may be given). Within a category rows are drawn round-robin over the family's
strata cells (for AnomalyXL: the series lengths), each cell in an order shuffled by --seed; each
round visits the cells in a seeded order too, so a small limit still reaches the long series (the
first rows of a file are the shortest). The total interleaves the categories a round at a time
(a seeded order each round), so N at least the number of categories covers every category. The
whole order is fixed for a seed, so a larger limit selects a superset and extends a run.

Where the family plays rows as chains (TimeSage in sequential mode or with skills: a scenario's
periods in order, with one agent state), both limits count whole chains, so no chain skips a period.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from tsbench.core.errors import UserError
from tsbench.tasks.base import TaskFamily


def _rng(*key) -> np.random.Generator:
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return np.random.default_rng(int.from_bytes(digest, "little"))


def _cell_order(ids: list[str], seed: int, cell: tuple) -> list[str]:
    return [ids[i] for i in _rng(seed, cell).permutation(len(ids))]


def _category_orders(rows: pd.DataFrame, strata: tuple[str, ...], seed: int) -> dict[str, list[str]]:
    """Each category's rows in draw order: round-robin over its strata cells, shuffled by seed."""
    orders: dict[str, list[str]] = {}
    for category, group in rows.groupby("category", sort=False):
        cells = [
            _cell_order(sorted(cell_rows["id"]), seed, (category, *(key if isinstance(key, tuple) else (key,))))
            for key, cell_rows in (group.groupby(list(strata), sort=True) if strata else [((), group)])
        ]
        order: list[str] = []
        depth = 0
        while any(depth < len(c) for c in cells):
            visit = _rng(seed, category, "round", depth).permutation(len(cells))
            order += [cells[i][depth] for i in visit if depth < len(cells[i])]
            depth += 1
        orders[str(category)] = order
    return orders


def _interleaved(orders: dict[str, list[str]], seed: int) -> list[str]:
    """All categories' orders merged a round at a time (round d: every category's d-th row, the
    categories in a seeded order), so a total limit spreads over categories before repeating one."""
    names = sorted(orders)
    merged: list[str] = []
    for depth in range(max((len(o) for o in orders.values()), default=0)):
        for i in _rng(seed, "categories", depth).permutation(len(names)):
            if depth < len(orders[names[i]]):
                merged.append(orders[names[i]][depth])
    return merged


def draw(
    rows: pd.DataFrame, strata: tuple[str, ...], limit: int | None, seed: int, *, per_category: int | None = None
) -> pd.DataFrame:
    """At most `per_category` rows of each category, then at most `limit` rows in all, both drawn
    round-robin over the strata cells (and over categories for the total), shuffled by seed."""
    orders = _category_orders(rows, strata, seed)
    if per_category is not None:
        orders = {category: order[:per_category] for category, order in orders.items()}
    keep = _interleaved(orders, seed)
    if limit is not None:
        keep = keep[:limit]
    return rows[rows["id"].isin(set(keep))]


def draw_chains(
    rows: pd.DataFrame,
    chains: list[list[str]],
    strata: tuple[str, ...],
    limit: int | None,
    seed: int,
    *,
    per_category: int | None = None,
) -> pd.DataFrame:
    """At most `limit` whole chains in all (`per_category` of each category), each drawn by its first row."""
    heads = rows[rows["id"].isin([chain[0] for chain in chains])]
    picked = set(draw(heads, strata, limit, seed, per_category=per_category)["id"])
    return rows[rows["id"].isin({rid for chain in chains if chain[0] in picked for rid in chain})]


def select_rows(
    taskset: TaskFamily,
    files,
    *,
    categories=None,
    sample_ids=None,
    limit=None,
    seed=42,
    filters=None,
    settings=None,
    limit_per_category=None,
) -> pd.DataFrame:
    for flag, value in (("--limit", limit), ("--limit-per-category", limit_per_category)):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1 (got {value})")
    rows = taskset.index(list(files), filters or {})
    if categories:
        unknown = sorted(set(categories) - set(rows["category"]))
        if len(unknown) == len(set(categories)):
            raise UserError(f"no rows of categories {unknown} in the selected data")
        rows = rows[rows["category"].isin(categories)]
    if sample_ids:
        missing = sorted(set(sample_ids) - set(rows["id"]))
        if missing:
            raise UserError(f"no sample {missing[0]!r} in the selected data")
        rows = rows[rows["id"].isin(sample_ids)]
    if limit is not None or limit_per_category is not None:
        chains = taskset.chains(rows, settings or {})
        strata = tuple(taskset.strata)
        per = {"per_category": limit_per_category}
        if chains is None:
            rows = draw(rows, strata, limit, seed, **per)
        else:
            rows = draw_chains(rows, chains, strata, limit, seed, **per)
    if rows.empty:
        raise UserError("no rows match the selection (check --regime, --categories, --lengths, --sample-id)")
    return rows.reset_index(drop=True)
