"""Release calendars: the dates of a table's rows for each cadence, ending at a fixed month so a
seed gives the same bytes on any day (the paper's snapshot ends May 2026)."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

END = dt.date(2026, 5, 29)  # a Friday: the last weekly and daily release of the snapshot
PERIODS_PER_YEAR = {"monthly": 12, "weekly": 52, "daily": 252, "irregular": 8}


def label(day: dt.date, cadence: str) -> str:
    """How the issuer names a period: YYYY-MM for monthly releases, the release date otherwise."""
    return day.strftime("%Y-%m") if cadence == "monthly" else day.isoformat()


def dates(cadence: str, n: int, rng: np.random.Generator | None = None, end: dt.date = END) -> list[dt.date]:
    """`n` release dates in order, the last at (or, monthly, in the month of) `end`.

    irregular: 35 to 56 days apart (central-bank style meeting calendars), drawn from `rng`.
    """
    if cadence == "monthly":
        out = []
        year, month = end.year, end.month
        for _ in range(n):
            out.append(dt.date(year, month, 1))
            year, month = (year, month - 1) if month > 1 else (year - 1, 12)
        return out[::-1]
    if cadence == "weekly":
        return [end - dt.timedelta(weeks=i) for i in range(n)][::-1]
    if cadence == "daily":
        out, day = [], end
        while len(out) < n:
            if day.weekday() < 5:
                out.append(day)
            day -= dt.timedelta(days=1)
        return out[::-1]
    if cadence == "irregular":
        if rng is None:
            raise ValueError("irregular calendars need a random generator")
        gaps = rng.integers(35, 57, size=n - 1)
        out = [end]
        for gap in gaps:
            out.append(out[-1] - dt.timedelta(days=int(gap)))
        return out[::-1]
    raise ValueError(f"unknown cadence {cadence!r}")
