"""A generated benchmark folder (parquet files + manifest.json) as a Hugging Face dataset folder.

`tsbench export DATA_DIR --format hf` copies each parquet file byte for byte (its sha256 stays the
manifest's) to `data/<config>/<split>-00000-of-00001.parquet` and writes a card whose YAML header
names every config's files and typed features, so `datasets.load_dataset(folder)` reads it offline
and the folder can be pushed to the Hub as is. A file with map columns (TimeSage's `files`), which
`datasets` has no type for, is rewritten with them as lists of {key, value}, and one whose `gold`
carries the scorer's bookkeeping (AnomalyXL's `_L`, the series length: the `length` column) is
rewritten without it (the card says which). A file `<split>-<config>.parquet` (AnomalyXL's
`test-precise`) is split `<split>` of config `<config>`; `<split>.parquet` is the `default` config;
any other name is a config of its own with one `test` split. `val` is written as `validation`, the
split name `datasets` and the Hub expect.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.core import json_input
from tsbench.core.errors import UserError
from tsbench.core.own_folder import check_replaceable, record_owned
from tsbench.interop.hf_card import data_card
from tsbench.interop.hf_dataset import hf_table
from tsbench.interop.public_gold import has_private_keys

MANIFEST = "manifest.json"
CARD = "README.md"
_SPLIT_FILE = re.compile(r"^(train|val|validation|test)(?:-(\w+))?$")
_HF_SPLIT = {"val": "validation"}
Progress = Callable[[int], None]  # advance by n files


@dataclass(frozen=True)
class DataFile:
    """One parquet file of the benchmark and where it sits in the dataset."""

    source: Path
    config: str
    split: str  # the Hub's name (validation, not val)
    stored_split: str  # the name in tsbench and its manifest
    rows: int
    num_bytes: int  # Arrow memory, as `datasets` counts a split's size
    file_bytes: int
    converted: bool = False  # rewritten (hf_table): map columns as lists of {key, value}, gold without `_L`

    @property
    def target(self) -> str:
        return f"data/{self.config}/{self.split}-00000-of-00001.parquet"


def is_data_dir(path: Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def data_dir_of(path: Path) -> Path:
    """`path` itself when it holds a manifest, else its one `seed*/` folder that does (the layout
    `generate --out ROOT` writes)."""
    path = Path(path)
    if is_data_dir(path):
        return path
    seeds = sorted(p for p in path.glob("seed*") if is_data_dir(p))
    if len(seeds) == 1:
        return seeds[0]
    if seeds:
        names = ", ".join(str(p) for p in seeds)
        raise UserError(f"{path} holds {len(seeds)} generated sets ({names}): export one of them")
    raise UserError(f"{path} is neither a run dir (run.json) nor a generated data dir (manifest.json)")


def _arrow_bytes(path: Path) -> int:
    """A file's size in Arrow memory, one row group at a time (a paper-size file never loads whole)."""
    reader = pq.ParquetFile(path)
    return sum(reader.read_row_group(i).nbytes for i in range(reader.num_row_groups))


def plan(folder: Path) -> list[DataFile]:
    """Every parquet file of the folder placed in a config and split."""
    files = sorted(folder.glob("*.parquet"))
    if not files:
        raise UserError(f"no parquet files in {folder}")
    placed: list[DataFile] = []
    for path in files:
        match = _SPLIT_FILE.match(path.stem)
        if match:
            stored, config = match.group(1), match.group(2) or "default"
        else:
            stored, config = "test", re.sub(r"\W+", "_", path.stem)
        meta = pq.read_metadata(path)
        schema = pq.read_schema(path)
        has_maps = any(pa.types.is_map(f.type) for f in schema)
        private_gold = "gold" in schema.names and _private_gold(path)
        placed.append(
            DataFile(
                source=path,
                config=config,
                split=_HF_SPLIT.get(stored, stored),
                stored_split=stored,
                rows=meta.num_rows,
                num_bytes=_arrow_bytes(path),
                file_bytes=path.stat().st_size,
                converted=has_maps or private_gold,
            )
        )
    return placed


def _private_gold(path: Path) -> bool:
    """Whether the file's gold carries scorer bookkeeping (`_L`): then it is rewritten without it."""
    reader = pq.ParquetFile(path)
    if not reader.num_row_groups:
        return False
    golds = reader.read_row_group(0, columns=["gold"]).column("gold").to_pylist()[:50]
    return any(has_private_keys(g) for g in golds)


def _check_schemas(placed: list[DataFile]) -> dict[str, object]:
    """One schema per config: `datasets` casts every split of a config to the same features."""
    schemas: dict[str, object] = {}
    for item in placed:
        schema = hf_table(pq.read_schema(item.source).remove_metadata().empty_table()).schema
        if item.config in schemas and not schemas[item.config].equals(schema):
            raise UserError(f"{item.source.name} does not have the columns of the other {item.config!r} files")
        schemas.setdefault(item.config, schema)
    return schemas


def _write_converted(source: Path, target: Path) -> None:
    """Rewrite a file with map columns as lists of {key, value}, one row group at a time."""
    reader = pq.ParquetFile(source)
    writer = None
    try:
        for i in range(reader.num_row_groups):
            part = hf_table(reader.read_row_group(i))
            writer = writer or pq.ParquetWriter(target, part.schema)
            writer.write_table(part)
        if writer is None:
            pq.write_table(hf_table(reader.schema_arrow.empty_table()), target)
    finally:
        if writer is not None:
            writer.close()


def write_hf_data(data_dir: Path, out: Path, progress: Progress | None = None) -> Path:
    """Write the dataset folder `out` (replacing an earlier export there); returns it."""
    folder = data_dir_of(data_dir)
    manifest = json_input.read_json(folder / MANIFEST)
    placed = plan(folder)
    schemas = _check_schemas(placed)
    out = Path(out)
    if out.resolve() == folder.resolve() or folder.resolve() in out.resolve().parents:
        raise UserError(f"--out {out} is inside the data dir {folder}: choose a folder outside it")
    if (out / CARD).exists():
        check_replaceable(out, "data-export", "a dataset export", marker=f"tsbench/{MANIFEST}")
        shutil.rmtree(out)
    for item in placed:
        target = out / item.target
        target.parent.mkdir(parents=True, exist_ok=True)
        if item.converted:
            _write_converted(item.source, target)
        else:
            shutil.copyfile(item.source, target)
        if progress is not None:
            progress(1)
    (out / "tsbench").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(folder / MANIFEST, out / "tsbench" / MANIFEST)
    (out / CARD).write_text(data_card(manifest, folder, placed, schemas), encoding="utf-8")
    record_owned(out, "data-export")
    return out


def default_data_out(data_dir: Path) -> Path:
    """Beside the data dir, never inside it (a family reading the folder must not see the copy)."""
    folder = data_dir_of(data_dir)
    return folder.parent / f"{folder.name}-hf"


__all__ = ["DataFile", "data_dir_of", "default_data_out", "is_data_dir", "plan", "write_hf_data"]
