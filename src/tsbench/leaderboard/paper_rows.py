"""The paper's published Table 1, quoted from a small data file, for reference next to our runs.

The numbers are kept as the paper prints them (text: "0.467", "OOM*"), never recomputed or
ranked against tsbench's rows: they come from other code, other samples and other model versions.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from importlib import resources

import pandas as pd

from .columns import family_columns, is_choice

OOM_ERROR = "oom"  # the error type a model records when it runs out of memory at a length
OOM_MARK = "OOM*"  # how the paper prints such a cell, and so do our boards
PAPER_FILE = "paper_table1.csv"
PAPER_LABEL = "Quoted from the paper's Table 1 (published numbers, not computed by tsbench)"


FAMILY = "anomalyxl"  # whose paper this table is


def paper_table() -> tuple[pd.DataFrame, dict[str, str]]:
    """(rows, sample counts): rows have section, model and one text column per category."""
    text = resources.files(__package__).joinpath(PAPER_FILE).read_text(encoding="utf-8")
    frame = pd.read_csv(io.StringIO(text), comment="#", dtype=str, keep_default_na=False)
    counts_row = frame[frame["section"] == "Samples"].iloc[0]
    counts = {c.category: counts_row[c.category] for c in family_columns(FAMILY)}
    return frame[frame["section"] != "Samples"].reset_index(drop=True), counts


def attach(result, rows: pd.DataFrame, datasets: list[str], with_paper: bool = False) -> dict[str, pd.DataFrame]:
    """With --with-paper, the paper's Table 1 beside the `datasets` (AnomalyXL's), our TSLM runs placed
    in its TSLM block; it adds no CSV."""
    if with_paper:
        result.paper, result.paper_counts = paper_table()
        families = {dataset: FAMILY for dataset in datasets}
        result.paper = with_tslm_rows(result.paper, result.cells, families, result.config_name)
        result.paper_columns = list(family_columns(FAMILY) or ())
    return {}


TSLM_SECTION = "TSLM"
OUR_TSLM_SECTION = "TSLM (tsbench)"
TSLM_PROVIDERS = ("tslm/", "toto/")
REGIME_SUFFIX = re.compile(r"[-_](coarse|precise)(?=[\s/·]|$)")  # the model kinds that belong in Table 1's TSLM block


def _cell_text(cell: pd.Series, choice: bool) -> str:
    if bool(cell.get("oom", False)):
        return OOM_MARK
    value = cell["f1"] if choice else cell["mean"]
    return "" if value != value else f"{float(value):.3f}"


def with_tslm_rows(
    paper: pd.DataFrame, cells: pd.DataFrame, families: dict[str, str], name: Callable[[str, tuple], str]
) -> pd.DataFrame:
    """The paper's rows with our AnomalyXL TSLM runs (tslm/, toto/) placed right after its TSLM block,
    in the paper's metrics (macro-F1 for MCQ, the primary score otherwise; `OOM*` where a length ran
    out of memory), labelled as ours. `families` maps each dataset to its family; `name` labels a
    (dataset, (model, harness, depth)) configuration as every other table does."""
    columns = family_columns(FAMILY)
    mine = cells[cells["model"].astype(str).str.startswith(TSLM_PROVIDERS)]
    mine = mine[mine["dataset"].isin([d for d, family in families.items() if family == FAMILY])]
    if mine.empty:
        return paper
    rows: dict[str, dict] = {}
    for (dataset, *config), group in mine.groupby(["dataset", "model", "harness", "depth"], sort=True):
        by_category = {r["category"]: r for _, r in group.iterrows()}
        # One row per model, as the paper's: the coarse and the precise variant (run dirs named
        # ...-coarse / ...-precise, one per regime) fill the MCQ and the Localize columns of one line.
        label = REGIME_SUFFIX.sub("", name(dataset, tuple(config))) + " (tsbench run)"
        row = rows.setdefault(label, {"section": OUR_TSLM_SECTION, "model": label})
        for column in columns:
            cell = by_category.get(column.category)
            if cell is not None and not row.get(column.category):
                row[column.category] = _cell_text(cell, is_choice(column))
    if not rows:
        return paper
    in_block = paper.index[paper["section"] == TSLM_SECTION]
    at = int(in_block.max()) + 1 if len(in_block) else len(paper)
    ours = pd.DataFrame(list(rows.values()), columns=paper.columns).fillna("")
    return pd.concat([paper.iloc[:at], ours, paper.iloc[at:]], ignore_index=True)
