"""TimeClaw's ablation board (paper Fig. 5, Table 1): what the tools, memory (k) and evolution add.

From finished run dirs only (run.json's config and the samples): each run is placed in a setting by
what it played with, `no tools` (a harness without the tools capability, as run.json records the
harness's capabilities), `tools only`, `+ memory (k=K)` (a bank and
top_k = K > 0; K = 0 is tools only), `+ evolution` (evolved tools, no memory) or `full` (both), and
each benchmark (family) gets one line per setting: rows, the mean score, the mean RCRPS and sMAPE
when the rows report them (CiK: weighted by CiK's instance weights, attribute "weight"), RCRPS by
CiK context type (attribute "context_types"), and the mean tokens per row (input + output).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from tsbench.results import load_samples

CONTEXT_TYPES = ("intemporal", "historical", "future", "covariate", "causal")
ORDER = ("no tools", "tools only", "+ memory", "+ evolution", "full")


def setting_of(config: dict, tools: bool) -> tuple[str, int]:
    """(setting, k) of one run's config; `tools`: its harness has the tools capability."""
    memory = config.get("memory") if isinstance(config.get("memory"), dict) else config
    section = config.get("tools") if isinstance(config.get("tools"), dict) else config
    bank = memory.get("memory_bank") or config.get("memory_bank")
    k = int(memory.get("top_k", config.get("top_k", 0)) or 0) if bank else 0
    evolved = bool(section.get("tools_dir") or config.get("tools_dir"))
    if not tools:
        return ("no tools" if not (bank and k) else "+ memory"), k
    if evolved and bank and k:
        return "full", k
    if evolved:
        return "+ evolution", 0
    if bank and k:
        return "+ memory", k
    return "tools only", 0


def _metric(metrics, key: str) -> float | None:
    if metrics is None:
        return None
    pairs = metrics.items() if isinstance(metrics, dict) else metrics
    for name, value in pairs:
        if name == key:
            return None if value is None or (isinstance(value, float) and np.isnan(value)) else float(value)
    return None


def _attribute(attributes, key: str) -> str:
    if attributes is None:
        return ""
    pairs = attributes.items() if isinstance(attributes, dict) else attributes
    return next((str(v) for k, v in pairs if k == key), "")


def _weighted(values: pd.Series, weights: pd.Series) -> float | None:
    keep = values.notna()
    if not keep.any():
        return None
    return float(np.average(values[keep], weights=weights[keep]))


def run_rows(run_dir: str | Path) -> pd.DataFrame:
    """One line per finished row of a run, with its setting, metrics and tokens."""
    run_dir = Path(run_dir)
    run = json.loads((run_dir / "run.json").read_text())
    setting, k = setting_of(run.get("config", {}), bool(run.get("harness_capabilities", {}).get("tools")))
    samples = load_samples(run_dir)
    if "error_type" in samples:
        samples = samples[samples["error_type"].isna()]
    weight = [float(_attribute(a, "weight") or 1.0) for a in samples["attributes"]]
    return pd.DataFrame(
        {
            "benchmark": samples["family"],
            "setting": setting,
            "k": k,
            "run": str(run_dir),
            "score": samples["score"].astype(float),
            "rcrps": [_metric(m, "rcrps") for m in samples["metrics"]],
            "smape": [_metric(m, "smape") for m in samples["metrics"]],
            "tokens": samples["input_tokens"].fillna(0) + samples["output_tokens"].fillna(0),
            "weight": weight,
            "context_types": [_attribute(a, "context_types") for a in samples["attributes"]],
        }
    )


def ablation_board(run_dirs: list[str | Path]) -> pd.DataFrame:
    """One line per (benchmark, setting, k) over the runs' rows (see the module doc)."""
    rows = pd.concat([run_rows(r) for r in run_dirs], ignore_index=True)
    lines = []
    for (benchmark, setting, k), group in rows.groupby(["benchmark", "setting", "k"], sort=False):
        rcrps = pd.to_numeric(group["rcrps"], errors="coerce")
        smape = pd.to_numeric(group["smape"], errors="coerce")
        line = {
            "benchmark": benchmark,
            "setting": setting if setting != "+ memory" else f"+ memory (k={k})",
            "rows": len(group),
            "score": float(group["score"].mean()),
            "rcrps": _weighted(rcrps, group["weight"]),
            "smape": _weighted(smape, group["weight"]),
            "tokens_per_row": float(group["tokens"].mean()),
        }
        for kind in CONTEXT_TYPES:
            has = group["context_types"].str.split(",").apply(lambda types, kind=kind: kind in types)
            line[f"rcrps_{kind}"] = _weighted(rcrps[has], group["weight"][has]) if has.any() else None
        line["_order"] = (ORDER.index(setting), k)
        lines.append(line)
    board = pd.DataFrame(lines).sort_values(["benchmark", "_order"]).drop(columns="_order")
    empty = [c for c in board.columns if c.startswith("rcrps_") and board[c].isna().all()]
    return board.drop(columns=empty).reset_index(drop=True)


def render_board(board: pd.DataFrame) -> str:
    """The board as a markdown table (None: the benchmark does not report the metric)."""
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
