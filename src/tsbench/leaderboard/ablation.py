"""TimeClaw's ablation board (paper Fig. 5, Table 1): what the tools, memory (k) and evolution add.

From finished run dirs only (run.json's config and the samples): each run is placed in a setting by
what it played with, and each benchmark (family) gets one line per setting:

| setting            | harness   | memory (bank, top_k > 0) | evolved tools | paper (Fig. 5)             |
|--------------------|-----------|--------------------------|---------------|----------------------------|
| `no tools`         | no tools  | no                       | -             | (plain prompting baseline) |
| `w/o tools`        | no tools  | yes                      | -             | w/o tools                  |
| `tools only`       | tools     | no (k = 0)               | no            | k = 0                      |
| `+ memory (k=K)`   | tools     | yes                      | no            | k = K; w/o evolution (K=3) |
| `+ evolution`      | tools     | no                       | yes           | w/o memory                 |
| `full`             | tools     | yes                      | yes           | TimeClaw                   |

Each line: rows, the mean score, and for CiK its own numbers (leaderboard/cik.py: the average RCRPS
as CiK aggregates it, sMAPE in percent as TimeClaw averages it, RCRPS by context type), tokens per
row (input + output). Error rows are left out of the numbers and counted.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tsbench.results import load_run, load_samples

from .cik import FAMILY as CIK
from .cik import summary as cik_summary

TOOL_HARNESSES = ("tools", "tools-image")
ORDER = ("no tools", "w/o tools", "tools only", "+ memory", "+ evolution", "full")
PAPER = {
    "no tools": "",
    "w/o tools": "w/o tools",
    "tools only": "k = 0",
    "+ evolution": "w/o memory",
    "full": "TimeClaw",
}


def setting_of(config: dict) -> tuple[str, int]:
    """(setting, k) of one run's config."""
    harness = str(config.get("harness") or "")
    memory = config.get("memory") if isinstance(config.get("memory"), dict) else config
    tools = config.get("tools") if isinstance(config.get("tools"), dict) else config
    bank = memory.get("memory_bank") or config.get("memory_bank")
    k = int(memory.get("top_k", config.get("top_k", 0)) or 0) if bank else 0
    evolved = bool(tools.get("tools_dir") or config.get("tools_dir"))
    if harness not in TOOL_HARNESSES:  # without the tool harness, evolved tools are never offered
        return ("w/o tools", k) if bank and k else ("no tools", 0)
    if evolved and bank and k:
        return "full", k
    if evolved:
        return "+ evolution", 0
    if bank and k:
        return "+ memory", k
    return "tools only", 0


def label(setting: str, k: int) -> str:
    return f"+ memory (k={k})" if setting == "+ memory" else setting


def paper_label(setting: str, k: int) -> str:
    if setting == "+ memory":
        return f"k = {k}" + ("; w/o evolution" if k == 3 else "")
    if setting == "w/o tools":
        return f"w/o tools (k = {k})"
    return PAPER.get(setting, "")


def run_rows(run_dir: str | Path) -> pd.DataFrame:
    """A run's rows with its setting and k."""
    run_dir = Path(run_dir)
    config = load_run(run_dir).get("config", {})
    setting, k = setting_of(config)
    samples = load_samples(run_dir)
    return samples.assign(benchmark=samples["family"], setting=setting, k=k, run=str(run_dir))


def _line(benchmark: str, setting: str, k: int, group: pd.DataFrame) -> dict:
    finished = group[group["error_type"].isna()]
    line = {
        "benchmark": benchmark,
        "setting": label(setting, k),
        "paper": paper_label(setting, k),
        "rows": len(group),
        "errors": int(group["error_type"].notna().sum()),
        "score": float(finished["score"].astype(float).mean()) if len(finished) else None,
    }
    if benchmark == CIK:
        cik = cik_summary(group)
        line.update({key: value for key, value in cik.items() if key not in ("rows", "errors", "tokens_per_row")})
    tokens = group["input_tokens"].fillna(0) + group["output_tokens"].fillna(0)
    line["tokens_per_row"] = float(tokens.mean())
    return line


def ablation_board(run_dirs: list[str | Path]) -> pd.DataFrame:
    """One line per (benchmark, setting, k) over the runs' rows (see the module doc)."""
    rows = pd.concat([run_rows(r) for r in run_dirs], ignore_index=True)
    lines = []
    for (benchmark, setting, k), group in rows.groupby(["benchmark", "setting", "k"], sort=False):
        lines.append({**_line(benchmark, setting, int(k), group), "_order": (ORDER.index(setting), int(k))})
    board = pd.DataFrame(lines).sort_values(["benchmark", "_order"]).drop(columns="_order")
    empty = [c for c in board.columns if c.startswith("rcrps_") and board[c].isna().all()]
    return board.drop(columns=empty).reset_index(drop=True)


def render_board(board: pd.DataFrame) -> str:
    """The board as a markdown table (empty: the benchmark does not report the metric)."""
    columns = list(board.columns)
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for record in board.to_dict("records"):
        cells = []
        for column in columns:
            value = record[column]
            if value is None or (isinstance(value, float) and np.isnan(value)):
                cells.append("")
            elif isinstance(value, float):
                cells.append(f"{value:.0f}" if column == "tokens_per_row" else f"{value:.3f}")
            else:
                cells.append(str(value))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)
