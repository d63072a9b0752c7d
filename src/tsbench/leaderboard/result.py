"""What a leaderboard build produces, and the small formatting rules every renderer shares."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tsbench.tasks.base import Column

from .columns import is_choice
from .load import CONFIG_KEY, RunInfo
from .paper_rows import OOM_MARK

INCOMPLETE = "†"
DASH = "—"
SMALL_N_MARK = "*"  # after an interval resting on fewer than SMALL_N rows
NOT_RUN = "n/a"  # a figure cell whose category was not run at that length

# The one legend: every renderer (Markdown, HTML, terminal, figures) marks things this way.
LEGEND = (
    "MCQ columns give accuracy and macro-F1 (the AnomalyXL paper reports macro-F1; TimeMaster's TimerBed table "
    "reports accuracy only); Localize columns give each task's "
    "primary score; columns are higher-is-better (MMag and LL score 1 − the relative error, 0 from 50 % "
    "and 5 % off: the paper heads them err and cls·err) except where a benchmark aggregates its own way "
    "(CiK's RCRPS: weighted by task weight, each instance capped at 5, an unusable answer at 5; lower is better, "
    "and ranked so). Other values are unweighted means over scored (id, epoch) rows; error rows are left out and "
    "counted under Cost and Failures. Bold = best, underline = second-best among complete cells of models on the "
    "same dataset (reference policies are shown and never ranked); "
    f"{INCOMPLETE} = incomplete (a partial run, or error rows left out of the cell); n = scored rows "
    'behind the value; "common" = the column\'s configurations scored different rows and are compared on the rows '
    "they all scored. Intervals are 95 % percentile bootstraps over rows; "
    f"{SMALL_N_MARK} = fewer than 10 rows, so the interval is rough."
)


@dataclass
class LeaderboardResult:
    """Every table of the leaderboard as a pandas frame (see tables.py for what each number means).

    Frames are long or wide as suits them; all carry the dataset (manifest hash) column, and
    renderers show one section per dataset so runs on different data are never ranked together.
    """

    runs: list[RunInfo]
    columns: dict[str, list[Column]]  # dataset -> its family's table columns
    cells: pd.DataFrame  # one line per (configuration, category)
    counts: pd.DataFrame  # sample count per (dataset, category) column
    wide: pd.DataFrame  # the CSV layout: one line per configuration
    costs: pd.DataFrame
    by_length: pd.DataFrame  # Fig. 3 numbers
    curves: pd.DataFrame  # Fig. 4 numbers
    paired: pd.DataFrame
    failures: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    paper: pd.DataFrame | None = None  # quoted rows, text values
    paper_counts: dict[str, str] | None = None
    paper_columns: list[Column] = field(default_factory=list)  # the columns the quoted rows fill
    figures: dict[str, dict[str, dict[str, bytes]]] = field(default_factory=dict)  # dataset -> name -> format -> bytes
    files: dict[str, Path] = field(default_factory=dict)
    n_boot: int = 1000
    seed: int = 0
    # dataset -> extra (title, intro, (header, rows)) sections a family's boards add (TimeSage)
    family_sections: dict[str, list] = field(default_factory=dict)

    @property
    def datasets(self) -> list[str]:
        """Every dataset a run was on, including runs with no rows yet (they get an empty section)."""
        return sorted({run.dataset for run in self.runs} | set(self.cells["dataset"]))

    def data_label(self, dataset: str) -> str:
        """ "data sha 3f2a9c…": the hash of the split files the dataset's runs read, for its heading."""
        hashes = sorted({r.data_hash for r in self.runs if r.dataset == dataset and r.data_hash})
        return f"data sha {', '.join(hashes)}" if hashes else "data sha unrecorded"

    def family(self, dataset: str) -> str:
        return next((r.family for r in self.runs if r.dataset == dataset), "anomalyxl")

    def reference(self, dataset: str, config: tuple) -> str | None:
        """What a reference configuration knows that a model does not (None for models)."""
        return next(
            (
                r.reference
                for r in self.runs
                if r.dataset == dataset and (r.model, r.harness, r.depth) == tuple(config) and r.reference
            ),
            None,
        )

    def configs(self, dataset: str) -> list[tuple]:
        """(model, harness, depth) of the configurations on one dataset, in table order."""
        part = self.cells[self.cells["dataset"] == dataset]
        configs = part[CONFIG_KEY[1:]].drop_duplicates().sort_values(CONFIG_KEY[1:])
        return [tuple(k) for k in configs.itertuples(index=False)]

    def cell(self, dataset: str, config: tuple, category: str) -> pd.Series | None:
        part = self.cells
        hit = part[
            (part["dataset"] == dataset)
            & (part["model"] == config[0])
            & (part["harness"] == config[1])
            & (part["depth"] == config[2])
            & (part["category"] == category)
        ]
        return None if hit.empty else hit.iloc[0]

    def incomplete_configs(self, dataset: str) -> set[tuple]:
        """(model, harness, depth) of configurations with a partial run on this dataset."""
        return {(r.model, r.harness, r.depth) for r in self.runs if r.dataset == dataset and not r.complete}

    def config_name(self, dataset: str, config: tuple) -> str:
        """The one label a configuration carries in every table and figure (model · harness · depth),
        with † for a partial run and the reference note for a reference policy."""
        label = f"{config[0]} · {config[1]} · depth {config[2]}"
        if tuple(config) in self.incomplete_configs(dataset):
            label += f" {INCOMPLETE}"
        if note := self.reference(dataset, config):
            label += f" (reference: {note})"
        return label

    def count(self, dataset: str, category: str) -> int | None:
        hit = self.counts[(self.counts["dataset"] == dataset) & (self.counts["category"] == category)]
        return None if hit.empty else int(hit["column_n"].iloc[0])


def missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt_dollars(total: float, known: int, rows: int) -> str:
    """A dollar total, DASH when no row's price is known, and how many rows it covers when some are."""
    if known == 0:
        return DASH
    return f"{total:.4f}" + ("" if known == rows else f" ({known}/{rows} known)")


def fmt(value, digits: int = 3) -> str:
    return DASH if missing(value) else f"{float(value):.{digits}f}"


def fmt_ci(lo, hi, digits: int = 2) -> str:
    return "" if missing(lo) or missing(hi) else f"[{float(lo):.{digits}f}, {float(hi):.{digits}f}]"


def fmt_count(value, digits: int = 1) -> str:
    """Big means (tokens) without decimals, small ones (turns) with one."""
    if missing(value):
        return DASH
    value = float(value)
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.{digits}f}"


def short_hash(dataset: str) -> str:
    """A dataset as people say it: "anomalyxl seed42 test (3f2a9c)" from its identity key."""
    parts = dataset.split("/")
    if len(parts) == 4:
        family, seed, split, digest = parts
        return f"{family} {seed} {split} ({digest[:6]})"
    return dataset[:12]


@dataclass(frozen=True)
class DisplayColumn:
    category: str
    part: str  # "acc" or "f1" (multiple choice), "score" (the rest)
    header: str
    group: str = ""  # the header it sits under


def display_columns(columns: list[Column]) -> list[DisplayColumn]:
    """The columns as shown: multiple-choice categories get accuracy and macro-F1, others one score."""
    shown = []
    for column in columns:
        if is_choice(column):
            mean = "acc" if column.metric in ("F1", "acc") else column.metric  # e.g. IoU, a mean that is no accuracy
            shown += [
                DisplayColumn(column.category, "acc", f"{column.short} {mean}", column.group),
                DisplayColumn(column.category, "f1", f"{column.short} F1", column.group),
            ]
        else:
            shown.append(DisplayColumn(column.category, "score", f"{column.short} ({column.metric})", column.group))
    return shown


@dataclass(frozen=True)
class DisplayCell:
    text: str  # the value, "—" when the configuration has no scored row there
    mark: str  # "best", "second" or ""
    ci: str  # "[lo, hi]" (with SMALL_N_MARK when n is small) or ""
    incomplete: bool
    n: int  # scored rows behind the value
    common: bool = False  # the value is over the column's common rows
    n_own: int = 0  # the configuration's own scored rows in this column

    @property
    def n_text(self) -> str:
        return f"n={self.n} common of {self.n_own}" if self.common else f"n={self.n}"


def display_cell(result: LeaderboardResult, dataset: str, config: tuple, column: DisplayColumn) -> DisplayCell:
    cell = result.cell(dataset, config, column.category)
    if cell is None:  # not run by this configuration: a gap, incomplete only if its run is
        return DisplayCell(DASH, "", "", tuple(config) in result.incomplete_configs(dataset), 0)
    if bool(cell.get("oom", False)):
        return DisplayCell(OOM_MARK, "", "", bool(cell["incomplete"]), int(cell["n_scored"]))
    source = "f1" if column.part == "f1" else "mean"
    interval = fmt_ci(cell[f"{source}_lo"], cell[f"{source}_hi"])
    if interval and bool(cell.get("small_n", False)):
        interval += SMALL_N_MARK
    return DisplayCell(
        fmt(cell[source]),
        str(cell[f"{source}_mark"] or ""),
        interval,
        bool(cell["incomplete"]),
        int(cell["n_scored"]),
        bool(cell.get("common", False)),
        int(cell.get("n_own", cell["n_scored"])),
    )
