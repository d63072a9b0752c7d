"""The results table's columns, from each family's TaskFamily (never a table written here).

Results copied from elsewhere may name a family this install cannot load: its columns are then
the categories found in the rows, each a plain mean score, and a warning says so.
"""

from __future__ import annotations

import functools

from tsbench.core.errors import UserError
from tsbench.tasks import get_taskset
from tsbench.tasks.base import Column


@functools.cache
def family_columns(family: str) -> tuple[Column, ...] | None:
    try:
        return tuple(get_taskset(family).columns())
    except UserError:
        return None


def columns_for(family: str, categories_seen: list[str]) -> list[Column]:
    """The family's columns, then any category the rows hold that the family does not list."""
    known = list(family_columns(family) or ())
    listed = {c.category for c in known}
    extra = [Column(c, c, "score", "other") for c in sorted(set(categories_seen) - listed)]
    return known + extra


def is_choice(column: Column | None) -> bool:
    return column is not None and column.options is not None


def short_name(columns: list[Column], category: str) -> str:
    return next((c.short for c in columns if c.category == category), category)


def order(columns: list[Column]) -> dict[str, int]:
    return {c.category: i for i, c in enumerate(columns)}
