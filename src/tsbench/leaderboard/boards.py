"""Boards: the sections, figures and CSVs a family's runs get beyond the main table, by name.

A family names its boards (`TaskFamily.boards`); the leaderboard calls each board named by the
families of the runs it reads, once, with the datasets it shows: `attach(result, rows, datasets,
with_paper) -> {csv name: frame}` adds its sections (`result.family_sections`), figures or quoted
rows to `result`. A new board is one line here, or a `board.<name>` entry point in the
`tsbench.plugins` group (see tsbench.core.registry); the build never names a family.
"""

from __future__ import annotations

import functools

import pandas as pd

from tsbench.core.errors import UserError
from tsbench.core.registry import Registry
from tsbench.tasks import get_taskset

from .result import LeaderboardResult

BOARDS = Registry(
    "board",
    {
        "anomalyxl-paper": "tsbench.leaderboard.paper_rows:attach",  # the paper's Table 1, quoted (--with-paper)
        "timesage": "tsbench.leaderboard.timesage_render:attach",  # TimeSage-EV Tables 2 and 12, Figs. 7, 9, 10
        "timerbed": "tsbench.leaderboard.timerbed:attach",  # TimeMaster Tables 1 and 3
        "cik": "tsbench.leaderboard.cik:attach",  # TimeClaw Table 1 (CiK's weighted, capped RCRPS)
    },
)


@functools.cache
def family_boards(family: str) -> tuple[str, ...]:
    """The boards a family names (none for a family this install cannot load)."""
    try:
        return tuple(get_taskset(family).boards)
    except UserError:
        return ()


def attach_boards(result: LeaderboardResult, rows: pd.DataFrame, with_paper: bool) -> dict[str, pd.DataFrame]:
    """Every board the datasets' families name, each given its datasets; the CSV frames they return."""
    wanted: dict[str, list[str]] = {}
    for dataset in result.datasets:
        for name in family_boards(result.family(dataset)):
            wanted.setdefault(name, []).append(dataset)
    frames: dict[str, pd.DataFrame] = {}
    for name, datasets in wanted.items():
        frames.update(BOARDS.load(name)(result, rows, datasets, with_paper))
    return frames
