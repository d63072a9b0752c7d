"""The seam between a benchmark and everything that runs it: the `Taskset` protocol.

A task family (AnomalyXL, TimeSage-EV, a recording set, a test family) gives data and scoring;
harnesses, executors, trainers and the leaderboard only ever talk to it through this protocol
(the `verifiers` taskset/harness split). A family is added in one place: its own package, named
in `tasks/__init__.py` or passed as `module:attribute`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import pandas as pd

from tsbench.core.episode import EpisodeTask

# Columns every index frame has; a family adds its own strata (e.g. length) after these.
INDEX_COLUMNS = ("id", "category", "path", "gold")


@dataclass(frozen=True)
class SampleRef:
    """Where one sample lives: enough for any process that can read `path` to load it."""

    family: str
    path: str
    id: str


@dataclass
class Sample:
    """One row as the coordinator sees it: the harness gets `task`, only the scorer reads `gold`."""

    ref: SampleRef
    task: EpisodeTask
    gold: Any
    # Result columns the family fills in (see results/schema.py): split, subset, length,
    # n_channels, attributes (a str -> str dict of family facts such as a scenario or period).
    columns: dict[str, Any] = field(default_factory=dict)


@dataclass
class Scored:
    """A final message judged: `score` in [0, 1]; `valid` is False when no usable answer was found."""

    score: float
    valid: bool
    parsed: Any = None  # the typed answer the scorer read, JSON-able
    error: str | None = None  # why the answer is unusable
    metrics: dict[str, float | None] = field(default_factory=dict)  # secondary numbers


@dataclass(frozen=True)
class JudgeReply:
    """What a judge model returns to a family scored by a judge (the optional `scorer(options,
    judge_models)` hook, where `judge_models(spec)` gives a `prompt -> JudgeReply` callable): the reply
    and what it cost, so a run reports its judge's tokens and dollars apart from the agent's."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None  # None: the judge model has no known price


@dataclass(frozen=True)
class Column:
    """One column of the family's results table, in display order.

    With `options`, the category is a multiple choice: the table shows accuracy and macro-F1
    over those options; without, one mean score labelled `metric`.
    """

    category: str
    short: str  # the paper's column label
    metric: str  # what the number is ("IoU", "F1", ...)
    group: str  # the header it sits under ("MCQ", "Localize", ...)
    options: tuple[str, ...] | None = None
    # The mean shown is of metrics[mean_metric] over the rows that report it (e.g. IoU over anomalous
    # windows only, as a paper's table has it), not of the row score.
    mean_metric: str | None = None


@dataclass
class Selection:
    """Which rows a run takes. `filters` are the family's own (AnomalyXL: regime, lengths)."""

    split: str = "test"
    categories: list[str] | None = None
    sample_ids: list[str] | None = None
    limit: int | None = None  # rows per category, drawn evenly over the family's strata
    seed: int = 42  # shuffles the --limit draw
    filters: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Taskset(Protocol):
    name: str  # the family name, recorded in every run
    strata: tuple[str, ...]  # index columns whose cells --limit draws from evenly, e.g. ("length",)

    def resolve(self, data: list[str], *, seed: int, split: str, root: str | None, filters: dict[str, Any]) -> list[Path]:
        """The dataset files a run reads (explicit paths, a seed dir, or the default location)."""
        ...

    def index(self, files: list[Path], filters: dict[str, Any]) -> pd.DataFrame:
        """One light line per row (INDEX_COLUMNS + strata), no series values; filters applied."""
        ...

    def load(self, ref: SampleRef) -> Sample:
        """The full sample, values included."""
        ...

    def score(self, category: str, gold: Any, message: str) -> Scored:
        """Judge one final message. Pure; never raises on the message."""
        ...

    def columns(self) -> list[Column]:
        """The results table's columns, in order."""
        ...

    def dataset_identity(self, files: list[Path]) -> dict[str, Any]:
        """family, seed, split and content hashes: how runs on the same data are recognised."""
        ...


# Optional methods a family may add (the CLI checks with hasattr):
#   generate(options: dict, out: Path, progress) -> (manifest path, [file summary dicts])
#   default_root() -> Path                        where `generate` writes by default
#   describe(files) -> [(title, DataFrame)]       what `tsbench describe` prints
#   answer_class(category, gold, text) -> str | None and gold_class(category, gold) -> str
#                                                 the class TimeMaster's hard reward compares


def is_multiple_choice(column: Column) -> bool:
    return column.options is not None
