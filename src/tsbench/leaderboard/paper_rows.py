"""The paper's published Table 1, quoted from a small data file, for reference next to our runs.

The numbers are kept as the paper prints them (text: "0.467", "OOM*"), never recomputed or
ranked against tsbench's rows: they come from other code, other samples and other model versions.
"""

from __future__ import annotations

import io
from importlib import resources

import pandas as pd

from .columns import family_columns

PAPER_FILE = "paper_table1.csv"
PAPER_LABEL = "Quoted from the paper's Table 1 (published numbers, not computed by tsbench)"


def paper_table() -> tuple[pd.DataFrame, dict[str, str]]:
    """(rows, sample counts): rows have section, model and one text column per category."""
    text = resources.files(__package__).joinpath(PAPER_FILE).read_text(encoding="utf-8")
    frame = pd.read_csv(io.StringIO(text), comment="#", dtype=str, keep_default_na=False)
    counts_row = frame[frame["section"] == "Samples"].iloc[0]
    counts = {c.category: counts_row[c.category] for c in family_columns("anomalyxl")}
    return frame[frame["section"] != "Samples"].reset_index(drop=True), counts
