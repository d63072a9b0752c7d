"""A run as one long CSV: a line per (row, measure), for spreadsheets, R and `pandas.pivot`.

Identity columns repeat on every line; `measure` names the number in `value`: the score, the
validity flag, the counts and costs of the episode, and each secondary metric as `metric:<name>`.
An error row keeps its `error_type` and has no `score` line (an error is never a 0).
"""

from __future__ import annotations

import csv
from pathlib import Path

from tsbench.core.sanitize import csv_cell
from tsbench.interop.source import RunSource

IDENTITY = (
    "run",
    "model",
    "harness",
    "depth",
    "family",
    "split",
    "regime",
    "category",
    "length",
    "n_channels",
    "id",
    "epoch",
    "error_type",
)
MEASURES = (
    "score",
    "valid",
    "turns",
    "code_cells",
    "sub_calls",
    "forced_final",
    "input_tokens",
    "output_tokens",
    "sub_call_tokens",
    "latency_s",
    "cost_usd",
)
HEADER = (*IDENTITY, "measure", "value")


def long_rows(source: RunSource) -> list[tuple]:
    lines = []
    for row in source.rows():
        identity = tuple(source.name if key == "run" else row.get(key) for key in IDENTITY)
        failed = row.get("error_type") is not None
        for measure in MEASURES:
            value = row.get(measure)
            if value is None or (failed and measure in ("score", "valid")):
                continue
            lines.append((*identity, measure, float(value)))
        for name, value in sorted((row.get("metrics") or {}).items()):
            lines.append((*identity, f"metric:{name}", float(value)))
    return lines


def write_long_csv(source: RunSource, out: Path) -> Path:
    out = Path(out)
    if out.suffix != ".csv":
        out = out / f"{source.name}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(HEADER)
        writer.writerows(("" if v is None else csv_cell(v) for v in line) for line in long_rows(source))
    return out
