"""Generate AnomalyXL splits: plan every row, pick MCQ sources, then materialize and stream to parquet.

Files land under `<out>/seed<seed>/` as `<split>-precise.parquet` and `<split>-coarse.parquet`,
written to a temporary name and renamed when complete, with `manifest.json` beside them.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from tsbench.core.provenance import git_commit, read_json, versions, write_json
from tsbench.tasks.anomalyxl.config import GenConfig
from tsbench.tasks.anomalyxl.mcq import TEMPLATES_BY_SOURCE, project, select_sources
from tsbench.tasks.anomalyxl.rowplan import materialize, plan_row, synthesize
from tsbench.tasks.anomalyxl.rows import Row, RowWriter

ProgressFn = Callable[[int, int], None]  # (rows done this call, values written this call)
# Threads building the channels of the next rows (numpy releases the GIL) while the two files are
# encoded on their writers' threads; on one core the rows are built on the calling thread. On 2 shared
# cores 2 synthesis threads measured faster than 1 (bench/generation.py, issue 26).
SYNTHESIS_THREADS = max(1, min(4, os.cpu_count() or 1))
ROWS_AHEAD = 8  # rows whose channels are being built while earlier rows are written


def plan_split(cfg: GenConfig, split: str) -> list[Row]:
    plans = []
    for (category, length), n in cfg.rows_in_cells(split).items():
        plans.extend(plan_row(cfg, split, category, length, i) for i in range(n))
    return plans


def split_dir(cfg: GenConfig, out_root: str | Path) -> Path:
    return Path(out_root) / f"seed{cfg.seed}"


@contextlib.contextmanager
def cyclic_gc_paused():
    """Rows make many small dicts and no reference cycles; the cyclic collector's passes over them
    were about 2 % of a split's CPU (issue 26). Reference counting still frees everything."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _synthesis_pool() -> ThreadPoolExecutor | contextlib.nullcontext:
    if SYNTHESIS_THREADS < 2:
        return contextlib.nullcontext()
    return ThreadPoolExecutor(SYNTHESIS_THREADS, thread_name_prefix="synthesis")


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
        with (
            cyclic_gc_paused(),
            _synthesis_pool() as pool,
            RowWriter(temps["precise"]) as precise,
            RowWriter(temps["coarse"]) as coarse,
        ):

            def count(category: str, length: int) -> None:
                cell = cells.setdefault(category, {})
                cell[str(length)] = cell.get(str(length), 0) + 1

            def finish(row: Row, values: np.ndarray, building: list) -> None:
                for done in building:
                    done.result()
                precise.write(row, values)
                written = values.size
                if row.id in sources:
                    for template in TEMPLATES_BY_SOURCE[row.category]:
                        coarse.write(project(row, template, cfg), values)
                        count(template, row.length)
                        written += values.size
                count(row.category, row.length)
                if progress is not None:
                    progress(1, written)

            in_flight: deque = deque()  # rows being synthesised ahead of the one being written, in order
            for row in plans:
                block = precise.reserve(len(row.channel_names), row.length)
                if pool is None:
                    in_flight.append((row, materialize(row.plan, block), []))
                else:
                    in_flight.append((row, block, synthesize(row.plan, block, pool)))
                if len(in_flight) > ROWS_AHEAD:
                    finish(*in_flight.popleft())
            while in_flight:
                finish(*in_flight.popleft())
        for regime in paths:
            temps[regime].replace(paths[regime])
    finally:
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)
    files = {  # size and sha256 as the writers wrote them: the files are not read back
        paths[regime].name: {"rows": writer.rows, "bytes": writer.size, "sha256": writer.sha256}
        for regime, writer in (("precise", precise), ("coarse", coarse))
    }
    return {"files": files, "cells": cells}


def update_manifest(cfg: GenConfig, out_root: str | Path, split_entries: dict[str, dict]) -> Path:
    """Merge this run's splits into `manifest.json`; a config change for the same seed dir is recorded per split."""
    path = split_dir(cfg, out_root) / "manifest.json"
    manifest = (
        read_json(path)
        if path.exists()
        else {"dataset": "AnomalyXL", "family": "anomalyxl", "seed": cfg.seed, "splits": {}}
    )
    manifest.setdefault("family", "anomalyxl")
    for split, entry in split_entries.items():
        manifest["splits"][split] = {"config": cfg.to_dict(), **entry}
    manifest["versions"] = versions(("numpy", "scipy", "pyarrow"))
    manifest["git_commit"] = git_commit()
    write_json(path, manifest)
    return path


def total_rows(cfg: GenConfig, split: str) -> int:
    return sum(cfg.rows_in_cells(split).values())


# What `tsbench generate --family anomalyxl` takes; list values may come as comma strings.
OPTIONS = (
    "seed",
    "split",
    "preset",
    "rows_per_cell",
    "train_rows",
    "val_rows",
    "lengths",
    "categories",
    "p_present",
    "min_k",
    "width_range",
    "magnitude_range",
    "noise_weights",
)


def generate_from_options(options: dict, out_root: str | Path, progress=None) -> tuple[Path, list[dict]]:
    """Validate the options, then write every requested split; returns the manifest path and one
    summary line per file. `progress(description, total)` gives an `advance(rows)` callback."""
    from tsbench.core.errors import UserError
    from tsbench.tasks.anomalyxl import config as gen_config
    from tsbench.tasks.anomalyxl.validate import check_config
    from tsbench.tasks.recordings.sources import refuse_unknown

    refuse_unknown(options, OPTIONS, "anomalyxl")
    split = options.get("split") or "test"
    splits = list(gen_config.SPLITS) if split == "all" else [split]
    if any(s not in gen_config.SPLITS for s in splits):
        raise UserError(f"--split must be test, val, train or all (got {split})")
    cfg = gen_config.preset(
        options.get("preset") or "paper",
        seed=options.get("seed", 42),
        rows_per_cell=options.get("rows_per_cell"),
        train_rows=options.get("train_rows"),
        val_rows=options.get("val_rows"),
        p_present=options.get("p_present"),
        min_k=options.get("min_k"),
        width_range=tuple(options["width_range"]) if options.get("width_range") else None,
        magnitude_range=tuple(options["magnitude_range"]) if options.get("magnitude_range") else None,
    )
    if options.get("lengths"):
        cfg.single_lengths = cfg.multi_lengths = tuple(sorted(set(options["lengths"])))
    if options.get("categories"):
        cfg.categories = tuple(options["categories"])
    if options.get("noise_weights"):
        cfg.noise_weights = tuple(options["noise_weights"])
    check_config(cfg)
    entries = {}
    for name in splits:
        advance = progress(f"anomalyxl {name}", total_rows(cfg, name)) if progress else None
        entries[name] = generate_split(
            cfg, name, out_root, progress=(lambda rows, values, advance=advance: advance(rows)) if advance else None
        )
    manifest = update_manifest(cfg, out_root, entries)
    lines = [{"file": fname, **info} for entry in entries.values() for fname, info in entry["files"].items()]
    return manifest, lines
