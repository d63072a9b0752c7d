"""The classical baseline's per-row feature cache: features computed once per distinct signal.

The key is a hash of the row's plan without its MCQ projection (the plan fixes every value), so a
coarse row reuses its precise source's features and re-fitting heads never re-reads a series. Rows
are cached in part files of PART_ROWS rows under `<model>/features/`; extraction runs in a bounded
process pool, each row read from its own pages, so memory stays at a few rows' worth of values.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.baselines import features as F

Progress = Callable[[str, int, int], None]  # (what, done, total)
PART_ROWS = 64  # rows per feature-cache part file

CACHE_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("version", pa.int32()),
        ("length", pa.int32()),
        ("n_channels", pa.int32()),
        ("channel_features", pa.list_(pa.float64())),  # C * 25, row-major
        ("cross", pa.list_(pa.float64())),
        ("seconds", pa.float64()),
    ]
)


def signal_key(plan: dict) -> str:
    """Hash of everything that fixes a row's values: the plan without its MCQ projection."""
    core = {k: v for k, v in plan.items() if k != "projection"}
    return hashlib.blake2b(json.dumps(core, sort_keys=True).encode(), digest_size=12).hexdigest()


def values_key(values: np.ndarray, channel_names: list[str]) -> str:
    """Hash of a row's series and channel names: the key an episode (which has no plan) caches under;
    "v:" keeps it apart from plan keys in the same part files."""
    digest = hashlib.blake2b(digest_size=12)
    digest.update(json.dumps(list(channel_names)).encode())
    array = np.ascontiguousarray(np.asarray(values, dtype=np.float32))
    digest.update(str(array.shape).encode())
    digest.update(array.tobytes())
    return "v:" + digest.hexdigest()


def needs_cross(channel_names: list[str]) -> bool:
    """Cross features exist only for two-group (A_/B_) rows: the lead-lag and indicator tasks."""
    return F.lead_lag_groups(channel_names) is not None


@dataclass
class RowFeatures:
    matrix: np.ndarray  # (C, 25)
    cross: np.ndarray  # (5,)

    def question(self) -> np.ndarray:
        return F.question_features(self.matrix, self.cross)


def compute_row(values: np.ndarray, channel_names: list[str]) -> tuple[RowFeatures, float]:
    started = time.perf_counter()
    matrix, cross = F.row_features(values, channel_names, cross=needs_cross(channel_names))
    return RowFeatures(matrix, cross), time.perf_counter() - started


def load_cache(features_dir: Path) -> dict[str, RowFeatures]:
    """Every cached row of the current FEATURE_VERSION, by key."""
    out: dict[str, RowFeatures] = {}
    for part in sorted(Path(features_dir).glob("part-*.parquet")):
        for rec in pq.read_table(part).to_pylist():
            if rec["version"] != F.FEATURE_VERSION:
                continue
            matrix = np.asarray(rec["channel_features"], dtype=np.float64).reshape(rec["n_channels"], F.N_CHANNEL)
            out[rec["key"]] = RowFeatures(matrix, np.asarray(rec["cross"], dtype=np.float64))
    return out


class CacheWriter:
    """Buffers computed rows and writes a new part file every PART_ROWS rows (and at close)."""

    def __init__(self, features_dir: Path):
        self.dir = Path(features_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.pending: list[dict] = []
        self.stamp = f"{int(time.time() * 1000)}-{os.getpid()}"
        self.parts = 0

    def add(self, key: str, length: int, feats: RowFeatures, seconds: float) -> None:
        self.pending.append(
            {
                "key": key,
                "version": F.FEATURE_VERSION,
                "length": length,
                "n_channels": len(feats.matrix),
                "channel_features": feats.matrix.ravel().tolist(),
                "cross": feats.cross.tolist(),
                "seconds": seconds,
            }
        )
        if len(self.pending) >= PART_ROWS:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        path = self.dir / f"part-{self.stamp}-{self.parts:05d}.parquet"
        tmp = path.with_suffix(".partial")
        pq.write_table(pa.Table.from_pylist(self.pending, schema=CACHE_SCHEMA), tmp)
        tmp.replace(path)
        self.parts += 1
        self.pending = []


def _worker_init() -> None:
    """Pool workers: one numba thread each (the pool is the parallelism) and stumpy compiled once."""
    try:
        import numba

        numba.set_num_threads(1)
    except Exception:
        pass
    F.warm_up()


def _worker_row(key: str, length: int, values: np.ndarray, names: list[str]):
    feats, seconds = compute_row(values, names)
    return key, length, feats, seconds


def row_cost(n_channels: int, length: int) -> int:
    """What a row's features cost, in channel-samples: every feature is a pass over each channel (a
    16-channel row is 12 % of the signals and 78 % of the time), so progress and ETAs count these."""
    return max(1, int(n_channels)) * max(1, int(length))


def extract_features(
    paths: Iterable[Path],
    features_dir: Path,
    *,
    workers: int = 2,
    progress: Progress | None = None,
    ids: dict[Path, set[str]] | None = None,
) -> dict[str, RowFeatures]:
    """Features for every row of the given parquet files (only `ids[path]` where given), computing only
    what the cache lacks.

    Rows are read in the main process one at a time from the pages that hold them and handed to at
    most `workers` processes (1 or less: in process), at most 2 x workers in flight, so memory stays
    at a few rows' worth of values whatever the split's size. `progress("features", done, total)`
    counts channel-samples (`row_cost`), not rows.
    """
    from tsbench.tasks import series_file
    from tsbench.tasks.anomalyxl.rows import read_row

    cache = load_cache(features_dir)
    todo: dict[Path, list[str]] = {}  # per file, in file order: the rows whose signal is not cached yet
    wanted: set[str] = set()
    total = 0
    for path in paths:
        index = series_file.read_index(path, ["id", "plan", "channel_names", "length"])
        allowed = None if ids is None else ids.get(Path(path), set())
        for rid, plan, names, length in zip(index["id"], index["plan"], index["channel_names"], index["length"]):
            if allowed is not None and rid not in allowed:
                continue
            key = signal_key(json.loads(plan))
            if key not in cache and key not in wanted:
                todo.setdefault(Path(path), []).append(rid)
                wanted.add(key)
                total += row_cost(len(names), length)
        del index
    if progress:
        progress("features", 0, total)
    if not total:
        return cache
    writer = CacheWriter(features_dir)
    done = 0

    def rows() -> Iterator[tuple[str, int, np.ndarray, list[str]]]:
        """One row at a time, its values read from the pages that hold them (`read_row`), never its
        row group: the reader holds the rows in flight, whatever the split's size."""
        for path, row_ids in todo.items():
            for rid in row_ids:
                row = read_row(path, rid)
                yield signal_key(row.plan), row.length, row.values, row.channel_names

    def finish(key: str, length: int, feats: RowFeatures, seconds: float) -> None:
        nonlocal done
        cache[key] = feats
        writer.add(key, length, feats, seconds)
        done += row_cost(len(feats.matrix), length)
        if progress:
            progress("features", done, total)

    try:
        if workers <= 1:
            F.warm_up()
            for key, length, values, names in rows():
                finish(*_worker_row(key, length, values, names))
        else:
            import multiprocessing as mp

            with ProcessPoolExecutor(
                max_workers=workers, mp_context=mp.get_context("spawn"), initializer=_worker_init
            ) as pool:
                in_flight = set()
                for item in rows():
                    in_flight.add(pool.submit(_worker_row, *item))
                    if len(in_flight) >= 2 * workers:
                        finished, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                        for future in finished:
                            finish(*future.result())
                for future in in_flight:
                    finish(*future.result())
    finally:
        writer.flush()
    return cache
