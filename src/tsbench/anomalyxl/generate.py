"""Generate AnomalyXL splits: plan every row, pick MCQ sources, then materialize and stream to parquet.

Files land under `<out>/seed<seed>/` as `<split>-precise.parquet` and `<split>-coarse.parquet`,
written to a temporary name and renamed when complete, with `manifest.json` beside them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from tsbench.anomalyxl.config import GenConfig
from tsbench.anomalyxl.mcq import TEMPLATES_BY_SOURCE, project, select_sources
from tsbench.anomalyxl.rowplan import RowPlan, materialize, plan_row
from tsbench.anomalyxl.rows import RowWriter
from tsbench.manifest import read_json, sha256_file, versions, git_commit, write_json

ProgressFn = Callable[[int, int], None]  # (rows done this call, values written this call)


def plan_split(cfg: GenConfig, split: str) -> list[RowPlan]:
    plans = []
    for (category, length), n in cfg.rows_in_cells(split).items():
        plans.extend(plan_row(cfg, split, category, length, i) for i in range(n))
    return plans


def split_dir(cfg: GenConfig, out_root: str | Path) -> Path:
    return Path(out_root) / f"seed{cfg.seed}"


def generate_split(cfg: GenConfig, split: str, out_root: str | Path, progress: ProgressFn | None = None) -> dict:
    """Write one split's precise and coarse files; returns their manifest entries."""
    out = split_dir(cfg, out_root)
    out.mkdir(parents=True, exist_ok=True)
    plans = plan_split(cfg, split)
    sources = select_sources(plans, split, cfg.seed)
    paths = {regime: out / f"{split}-{regime}.parquet" for regime in ("precise", "coarse")}
    temps = {regime: p.with_name(p.name + f".partial-{os.getpid()}") for regime, p in paths.items()}
    cells: dict[str, dict[str, int]] = {}
    try:
        with RowWriter(temps["precise"]) as precise, RowWriter(temps["coarse"]) as coarse:
            for row in plans:
                values = materialize(row.plan)
                precise.write(row, values)
                written = values.size
                if row.id in sources:
                    for template in TEMPLATES_BY_SOURCE[row.category]:
                        mcq_row = project(row, template)
                        coarse.write(mcq_row, values)
                        cells.setdefault(template, {}).setdefault(str(row.length), 0)
                        cells[template][str(row.length)] += 1
                        written += values.size
                cells.setdefault(row.category, {}).setdefault(str(row.length), 0)
                cells[row.category][str(row.length)] += 1
                if progress is not None:
                    progress(1, written)
        for regime in paths:
            temps[regime].replace(paths[regime])
    finally:
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)
    files = {}
    for regime, path in paths.items():
        files[path.name] = {
            "rows": precise.rows if regime == "precise" else coarse.rows,
            "bytes": path.stat().st_size,
            "sha256": sha256_file(path),
        }
    return {"files": files, "cells": cells}


def update_manifest(cfg: GenConfig, out_root: str | Path, split_entries: dict[str, dict]) -> Path:
    """Merge this run's splits into `manifest.json`; a config change for the same seed dir is recorded per split."""
    path = split_dir(cfg, out_root) / "manifest.json"
    manifest = read_json(path) if path.exists() else {"dataset": "AnomalyXL", "seed": cfg.seed, "splits": {}}
    for split, entry in split_entries.items():
        manifest["splits"][split] = {"config": cfg.to_dict(), **entry}
    manifest["versions"] = versions(("numpy", "scipy", "pyarrow"))
    manifest["git_commit"] = git_commit()
    write_json(path, manifest)
    return path


def total_rows(cfg: GenConfig, split: str) -> int:
    return sum(cfg.rows_in_cells(split).values())
