"""Which rows a run evaluates: dataset files resolved from flags, filtered by regime, category, L, limit."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd

from tsbench.anomalyxl.rows import read_index
from tsbench.errors import UserError
from tsbench.eval.config import EvalConfig
from tsbench.manifest import sha256_file

REGIMES = {"precise": ("precise",), "coarse": ("coarse",), "both": ("precise", "coarse")}


def resolve_files(cfg: EvalConfig) -> list[Path]:
    if cfg.regime not in REGIMES:
        raise UserError(f"--regime must be precise, coarse or both (got {cfg.regime})")
    if cfg.data:
        files: list[Path] = []
        for item in cfg.data:
            path = Path(item)
            if path.is_dir():
                files += [path / f"{cfg.split}-{r}.parquet" for r in REGIMES[cfg.regime]]
            else:
                files.append(path)
    else:
        root = Path(cfg.data_root) / f"seed{cfg.seed}"
        files = [root / f"{cfg.split}-{r}.parquet" for r in REGIMES[cfg.regime]]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise UserError(
            f"dataset file not found: {missing[0]} (create it with: tsbench generate --seed {cfg.seed} --split {cfg.split})"
        )
    return files


def select_rows(cfg: EvalConfig, files: list[Path]) -> pd.DataFrame:
    frames = []
    for path in files:
        index = read_index(path)
        index["file"] = str(path)
        frames.append(index)
    rows = pd.concat(frames, ignore_index=True)
    if cfg.regime != "both":
        rows = rows[rows["regime"] == cfg.regime]
    if cfg.categories:
        unknown = set(cfg.categories) - set(rows["category"])
        if unknown == set(cfg.categories):
            raise UserError(f"no rows of categories {sorted(unknown)} in the selected data")
        rows = rows[rows["category"].isin(cfg.categories)]
    if cfg.lengths:
        rows = rows[rows["length"].isin(cfg.lengths)]
    if cfg.limit is not None:
        rows = rows.groupby("category", sort=False, group_keys=False).head(cfg.limit)
    if rows.empty:
        raise UserError("no rows match the selection (check --regime, --categories, --lengths)")
    return rows.reset_index(drop=True)


def dataset_fingerprint(files: list[Path]) -> dict:
    """The manifest hash ties a run to the exact data; the leaderboard keeps different data apart."""
    hashes = {}
    for path in files:
        manifest = path.parent / "manifest.json"
        recorded = {}
        if manifest.exists():
            for split in json.loads(manifest.read_text()).get("splits", {}).values():
                recorded.update({name: info["sha256"] for name, info in split.get("files", {}).items()})
        hashes[path.name] = recorded.get(path.name) or sha256_file(path)
    joined = "|".join(f"{name}:{digest}" for name, digest in sorted(hashes.items()))
    return {
        "paths": [str(f) for f in files],
        "file_sha256": hashes,
        "manifest_sha256": hashlib.sha256(joined.encode()).hexdigest(),
    }
