"""AnomalyXL as a TaskFamily: where its files are, what a row looks like to a harness, how it is scored."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from tsbench.core.errors import UserError
from tsbench.core.provenance import read_json
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.metrics import metrics
from tsbench.tasks.anomalyxl.rows import gold_text, read_index, read_row, schema_problem
from tsbench.tasks.base import (
    Column,
    Sample,
    SampleRef,
    Scored,
    TaskFamily,
    TrainingRequest,
    TrainingStream,
    identity,
    read_indexes,
    recorded_hashes,
    row_sample,
)

REGIMES = {"precise": ("precise",), "coarse": ("coarse",), "both": ("precise", "coarse")}
DEFAULT_ROOT = "data/anomalyxl"

COLUMNS = (
    Column(lb.PRESENCE, "Pres", "F1", "MCQ", (lb.YES, lb.NO)),
    Column(lb.START_TIME, "ST", "F1", "MCQ", (*lb.START_BINS, lb.NO_ANOMALY_OPTION)),
    Column(lb.CATEGORIZATION, "Cat", "F1", "MCQ", (*lb.KINDS, lb.NO_ANOMALY_OPTION)),
    Column(lb.MAGNITUDE_BAND, "Mag", "F1", "MCQ", (*lb.MAGNITUDE_BANDS, lb.NO_ANOMALY_OPTION)),
    Column(lb.IDENTIFICATION, "Id", "F1", "MCQ", ()),  # options differ per row: classes are what occurs
    Column(lb.INDICATOR, "Ind", "F1", "MCQ", lb.INDICATOR_OPTIONS),
    Column(lb.LOCALIZE, "Loc", "IoU", "Localize"),
    Column(lb.CLASSIFY, "C+E", "cls·IoU", "Localize"),
    Column(lb.MAGNITUDE, "MMag", "1−err", "Localize"),  # scores: the paper's Table 1 heads them "err" and "cls·err"
    Column(lb.ALL_CHANNELS, "LAC", "F1", "Localize"),
    Column(lb.LEAD_LAG, "LL", "cls·(1−err)", "Localize"),
)


# Generator settings that choose which rows exist, not what a row holds.
GRID_SETTINGS = frozenset(
    {"preset", "categories", "single_lengths", "multi_lengths", "rows_per_cell", "train_rows", "val_rows"}
)


class AnomalyXL(TaskFamily):
    name = "anomalyxl"
    strata = ("length",)
    boards = ("anomalyxl-paper",)  # the paper's Table 1, quoted (leaderboard --with-paper)

    def resolve(
        self, data: list[str], *, seed: int, split: str, root: str | None, filters: dict[str, Any]
    ) -> list[Path]:
        regime = filters.get("regime") or "both"
        if regime not in REGIMES:
            raise UserError(f"--regime must be precise, coarse or both (got {regime})")
        names = [f"{split}-{r}.parquet" for r in REGIMES[regime]]
        if data:
            files = []
            for item in map(Path, data):
                files += [item / name for name in names] if item.is_dir() else [item]
        else:
            seed_dir = Path(root or DEFAULT_ROOT) / f"seed{seed}"
            files = [seed_dir / name for name in names]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            from tsbench.tasks.data_hint import missing_data_hint

            create = (
                f"tsbench generate --preset small --seed {seed} --split {split} (or the paper's ~1 GB set: no --preset)"
            )
            raise UserError(f"dataset file not found: {missing[0]} {missing_data_hint('anomalyxl', names, create)}")
        return files

    def index(self, files: list[Path], filters: dict[str, Any]) -> pd.DataFrame:
        rows = read_indexes(files, _read_index, "an AnomalyXL parquet file")
        regime = filters.get("regime") or "both"
        if regime != "both":
            rows = rows[rows["regime"] == regime]
        if filters.get("lengths"):
            rows = rows[rows["length"].isin(filters["lengths"])]
        return rows.reset_index(drop=True)

    def load(self, ref: SampleRef) -> Sample:
        row = read_row(ref.path, ref.id)
        return row_sample(ref, row, row.values)

    def score(self, category: str, gold: Any, message: str) -> Scored:
        m = metrics(category, gold, message)
        numbers = {k: _number(v) for k, v in m.items() if k not in ("score", "valid", "parsed", "error")}
        return Scored(
            score=float(m["score"]), valid=bool(m["valid"]), parsed=m["parsed"], error=m["error"], metrics=numbers
        )

    def columns(self) -> list[Column]:
        return list(COLUMNS)

    def dataset_identity(self, files: list[Path]) -> dict[str, Any]:
        """Runs on the same generated split are comparable whatever regime they selected: the key is
        (family, seed, split, the generator settings that shape a row), read from the manifest beside
        the files. Settings that only choose which rows exist (the grid and its sizes) are left out:
        a row's draws hash its place in the grid (seeds.py), so a shared id is the same row and the
        leaderboard compares runs on their common ids."""
        splits = sorted({_split_of(f) for f in files})
        manifest_path = files[0].parent / "manifest.json"
        manifest = read_json(manifest_path) if manifest_path.exists() else {}
        configs = [manifest.get("splits", {}).get(s, {}).get("config") for s in splits]
        configs = [{k: v for k, v in c.items() if k not in GRID_SETTINGS} if c is not None else None for c in configs]
        hashes = recorded_hashes(files, manifest, _split_of)
        basis = configs if all(c is not None for c in configs) else hashes  # no manifest: the files' bytes
        return identity(self.name, manifest.get("seed"), ",".join(splits), basis, files, hashes)

    def generate(self, options: dict[str, Any], out: Path, progress=None) -> tuple[Path, list[dict]]:
        from tsbench.tasks.anomalyxl.generate import generate_from_options

        return generate_from_options(options, out, progress)

    def default_root(self) -> Path:
        return Path(DEFAULT_ROOT)

    def describe(self, files: list[Path]) -> list[tuple[str, pd.DataFrame]]:
        """Tables `tsbench describe` prints: rows per category x L, then each category's make-up."""
        from tsbench.tasks.anomalyxl.describe import composition

        tables = []
        for path in files:
            comp = composition(self.index([path], {}))
            cells = comp["cells"].assign(total=comp["cells"].sum(axis=1)).reset_index()
            cells.columns = [str(c) for c in cells.columns]
            tables.append((f"{path.name}: {comp['rows']} rows (category x L)", cells))
            details = pd.DataFrame(
                [
                    {"category": c, "composition": "\n".join(f"{k}: {v}" for k, v in info.items() if k != "rows")}
                    for c, info in comp["categories"].items()
                ]
            )
            tables.append((f"{path.name}: composition", details))
        return tables

    def plot(self, files: list[Path], row_id: str, out: Path, predicted: Any = None) -> Path | None:
        """The paper's Fig. 5 view of one row (figure.py); `predicted`: a parsed answer's window(s)."""
        from tsbench.tasks.anomalyxl.figure import plot_row
        from tsbench.tasks.anomalyxl.rows import iter_rows

        self.index(files, {})  # a file that is not AnomalyXL's ends here, in one line
        for path in files:
            row = next(iter_rows(path, ids={row_id}), None)
            if row is not None:
                return plot_row(row, out, predicted=predicted if isinstance(predicted, dict) else None)
        return None

    def answer_class(self, category: str, gold: Any, text: str) -> str | None:
        from tsbench.tasks.anomalyxl.answer_class import answer_class  # analysis only: episodes never load it

        return answer_class(category, gold, text)

    def gold_class(self, category: str, gold: Any) -> str:
        from tsbench.tasks.anomalyxl.answer_class import gold_class

        return gold_class(category, gold)

    def training_stream(self, request: TrainingRequest) -> TrainingStream:
        """Fresh generator tasks every step, with the negatives curriculum (curriculum.py)."""
        from tsbench.tasks.anomalyxl.curriculum import GeneratorStream

        return GeneratorStream(self.name, request)

    def split_files(self, data: list[str], split: str) -> list[Path]:
        """Both regimes' `<split>-<regime>.parquet` beside `data`; a regime whose file is absent is skipped."""
        folders = sorted({p if p.is_dir() else p.parent for p in map(Path, data)})
        found = [folder / f"{split}-{r}.parquet" for folder in folders for r in REGIMES["both"]]
        return [f for f in found if f.is_file()]

    def memory_key(self, sample: Sample) -> str:
        """The row whose series this is: an MCQ row shares its series with the precise row it came from."""
        return _source_ids(sample.ref.path).get(sample.ref.id) or sample.ref.id

    def sft_target(self, category: str, gold: Any) -> str:
        """The gold as a user would see it: without the scorer's private keys (rows.Row.gold_text)."""
        return gold_text(gold)


@functools.lru_cache(maxsize=8)
def _source_ids(path: str) -> dict[str, str]:
    table = pq.read_table(path, columns=["id", "source_id"])
    return dict(zip(table.column("id").to_pylist(), table.column("source_id").to_pylist()))


def _read_index(path: Path) -> pd.DataFrame:
    problem = schema_problem(path)
    if problem:
        raise UserError(f"{path} is not an AnomalyXL parquet file ({problem})")
    return read_index(path)


def _split_of(path: Path) -> str:
    return path.name.split("-", 1)[0]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None  # a bool too: it is an int
