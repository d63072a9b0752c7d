"""From one scenario's full table and releases to its period instances, cutting each at its cutoff.

Shared by the synthetic and replay sources: the visible table of period t_k is the rows up to and
including t_k, the visible releases those of rows strictly before t_k; the release of t_k is kept
aside as the withheld target.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tsbench.tasks.timesage.contract import SCHEMA_FILE, SOURCE_DIR, TABLE_FILE, Period, Scenario
from tsbench.tasks.timesage.sources.catalog import PRIOR_KEYPOINT
from tsbench.tasks.timesage.sources.render import context_lines


@dataclass
class Table:
    """The full table as text lines (the exact CSV bytes agents see) and as numbers (for rules)."""

    header: str
    lines: list[str]
    frame: pd.DataFrame  # parsed back from the CSV text, so rules see what agents see

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, decimals: dict[str, int]) -> Table:
        text = pd.DataFrame(
            {
                c: frame[c] if c not in decimals else frame[c].map(lambda x, d=decimals[c]: f"{x:.{d}f}")
                for c in frame.columns
            }
        )
        header = ",".join(text.columns)
        lines = [",".join(map(str, row)) for row in text.itertuples(index=False)]
        parsed = pd.read_csv(io.StringIO(header + "\n" + "\n".join(lines) + "\n"), dtype={"date": str})
        return cls(header, lines, parsed)

    def csv(self, upto: int) -> bytes:
        """Rows 0..upto inclusive."""
        return (self.header + "\n" + "\n".join(self.lines[: upto + 1]) + "\n").encode()

    def rows(self, first: int, last: int) -> list[dict[str, Any]]:
        return [dict(zip(self.header.split(","), line.split(","))) for line in self.lines[first : last + 1]]


def release_name(label: str, ext: str = "md") -> str:
    return f"{SOURCE_DIR}/{label}.{ext}"


def assemble(
    scenario: Scenario,
    table: Table,
    releases: dict[int, tuple[str, str]],
    first_row: int,
    n_periods: int,
    truth_at: Callable[[int], dict[str, Any]],
    driver_at: Callable[[int], Any],
) -> list[Period]:
    """Period k (1-based) targets row first_row + k - 1. `releases` maps a row to (file name,
    text); `truth_at(row)` gives the truth, `driver_at(row)` the driver the release of that row named
    (the prior-document keypoint's truth is the previous release's)."""
    schema = (json.dumps(scenario.answer_schema(), indent=2, sort_keys=True) + "\n").encode()
    periods = []
    for k in range(1, n_periods + 1):
        row = first_row + k - 1
        label = str(table.frame["date"].iloc[row])
        files = {TABLE_FILE: table.csv(row), SCHEMA_FILE: schema}
        prior = sorted(r for r in releases if r < row)
        for r in prior:
            name, text = releases[r]
            files[name] = text.encode()
        target_name, target_text = releases[row]
        latest_prior = releases[prior[-1]] if prior else None
        context = context_lines(scenario.background, scenario.columns, table.rows(max(0, row - 2), row), latest_prior)
        truth = truth_at(row)
        keypoints = {kp.id: truth.get(kp.field) for kp in scenario.keypoints if kp.field is not None}
        if any(kp.id == PRIOR_KEYPOINT for kp in scenario.keypoints):
            keypoints[PRIOR_KEYPOINT] = driver_at(row - 1)
        periods.append(
            Period(
                scenario=scenario.id,
                index=k,
                label=label,
                cutoff=label,
                files=files,
                truth=truth,
                keypoint_truths=keypoints,
                context=context,
                target_name=target_name,
                target_doc=target_text.encode(),
                prior_truth=truth_at(row - 1) if latest_prior is not None else None,
            )
        )
    return periods
