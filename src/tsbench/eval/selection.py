"""Which rows a run evaluates: the family's index, filtered, then drawn evenly for --limit.

--limit N takes N rows per category, spread round-robin over the family's strata cells (for
AnomalyXL: the series lengths), each cell in an order shuffled by --seed. Each round visits the
cells in a seeded order too, so a limit smaller than the number of cells still reaches the long
series (the first rows of a file are the shortest). The whole order is fixed for a seed, so a
larger --limit selects a superset and extends a run instead of replacing it.

Where the family plays rows as chains (TimeSage in sequential mode or with skills: a scenario's
periods in order, with one agent state), --limit counts whole chains per category, so no chain
skips a period.
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


def draw(rows: pd.DataFrame, strata: tuple[str, ...], limit: int, seed: int) -> pd.DataFrame:
    """At most `limit` rows per category, round-robin over the strata cells, shuffled by seed."""
    keep: list[str] = []
    for category, group in rows.groupby("category", sort=False):
        cells = [
            _cell_order(sorted(cell_rows["id"]), seed, (category, *(key if isinstance(key, tuple) else (key,))))
            for key, cell_rows in (group.groupby(list(strata), sort=True) if strata else [((), group)])
        ]
        taken: list[str] = []
        depth = 0
        while len(taken) < limit and any(depth < len(c) for c in cells):
            visit = _rng(seed, category, "round", depth).permutation(len(cells))
            taken += [cells[i][depth] for i in visit if depth < len(cells[i])][: limit - len(taken)]
            depth += 1
        keep += taken
    chosen = set(keep)
    return rows[rows["id"].isin(chosen)]


def draw_chains(
    rows: pd.DataFrame, chains: list[list[str]], strata: tuple[str, ...], limit: int, seed: int
) -> pd.DataFrame:
    """At most `limit` whole chains per category, each drawn by its first row."""
    heads = rows[rows["id"].isin([chain[0] for chain in chains])]
    picked = set(draw(heads, strata, limit, seed)["id"])
    return rows[rows["id"].isin({rid for chain in chains if chain[0] in picked for rid in chain})]


def select_rows(
    taskset: TaskFamily, files, *, categories=None, sample_ids=None, limit=None, seed=42, filters=None, settings=None
) -> pd.DataFrame:
    if limit is not None and limit < 1:
        raise UserError(f"--limit must be at least 1 (got {limit})")
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
    if limit is not None:
        chains = taskset.chains(rows, settings or {})
        strata = tuple(taskset.strata)
        rows = draw(rows, strata, limit, seed) if chains is None else draw_chains(rows, chains, strata, limit, seed)
    if rows.empty:
        raise UserError("no rows match the selection (check --regime, --categories, --lengths, --sample-id)")
    return rows.reset_index(drop=True)
