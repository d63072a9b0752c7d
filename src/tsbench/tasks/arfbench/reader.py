"""ARFBench's released files, as published (Datadog/ARFBench on Hugging Face).

Accepted layout under --path DIR:

    DIR/arfbench-qa.csv          one question per line; columns question, task_category,
                                 correct_answer, query_group (comma-separated series ids) and
                                 options_str or options (a JSON list of option texts, or of
                                 objects with a "value"/"text"/"option"/"answer" key)
    DIR/arfbench-data/           <query_group>_<interval>.parquet per series and resolution,
                                 interval in seconds (10, 60, 300, 1800, 3600, 86400); numeric
                                 columns other than "timestamp"/"epoch" are channels
                                 (arfbench-ts-data/ or DIR itself are looked in too)

A question's series are read at the finest interval whose longest series fits `max_length`
samples (the coarsest one otherwise). Series of two query groups are aligned on their timestamps
(union of the grids, linear interpolation in between, nearest value at the ends); without a
time column they are cut to the shortest. Read with pandas (parquet via pyarrow), every file through
the --path folder's checks (user_files): a query_group naming a file outside --path is refused, and a
series file is refused before it is read when its footer declares more than `MAX_ROWS` rows (or more
than the input budget once decoded).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder
from tsbench.tasks.recordings.sources import nothing_found

FAMILY = "arfbench"
QA_FILE = "arfbench-qa.csv"
DATA_DIRS = ("arfbench-data", "arfbench-ts-data", ".")
INTERVALS = (10, 60, 300, 1800, 3600, 86400)
TIME_COLUMNS = ("timestamp", "epoch", "time", "ts")
MAX_ROWS = 2**20  # rows of one series file: a month at ARFBench's finest interval (10 s) is 259,200
REQUIRED = ("question", "task_category", "correct_answer", "query_group")
TIERS = {
    "Tier 1": ("Anomaly Presence",),
    "Tier 2": ("Anomaly Identification", "Anomaly Start", "Anomaly End", "Anomaly Magnitude", "Anomaly Categorization"),
    "Tier 3": ("Anomaly Indicator", "Anomaly Correlation"),
}


def category_id(task_category: str) -> str:
    return "_".join(str(task_category).strip().lower().split())


@dataclass
class Series:
    names: list[str]
    values: np.ndarray  # (channels, L) float64
    start: str | None  # first timestamp, ISO 8601 UTC
    interval_s: int


def find_questions(folder: UserFolder) -> Path:
    if not folder.given.is_dir():
        return folder.given
    candidate = folder.root / QA_FILE
    if folder.is_file(candidate):
        return candidate
    others = [p for p in folder.listdir(folder.root) if p.suffix == ".csv"]
    if len(others) == 1:
        return others[0]
    raise nothing_found(folder.root, FAMILY, f"{QA_FILE}")


def read_questions(folder: UserFolder, csv: Path) -> pd.DataFrame:
    with folder.open_text(csv, newline="") as handle:
        try:
            frame = pd.read_csv(handle)
        except (ValueError, UnicodeDecodeError) as exc:  # pandas' ParserError is a ValueError
            raise UserError(f"{folder.label(csv)} is not a CSV file ({type(exc).__name__}: {str(exc)[:120]})") from None
    if "options_str" not in frame.columns and "options" in frame.columns:
        frame = frame.rename(columns={"options": "options_str"})
    missing = [c for c in (*REQUIRED, "options_str") if c not in frame.columns]
    if missing:
        raise UserError(f"{csv} lacks column(s) {', '.join(missing)}: not an ARFBench question file")
    return frame


def parse_options(raw) -> list[str]:
    """Option texts from the released JSON list (strings or small objects)."""
    try:
        items = json.loads(raw) if isinstance(raw, str) else list(raw)
    except (TypeError, ValueError):
        return []
    texts = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            item = next((item[k] for k in ("value", "text", "option", "answer") if item.get(k) not in (None, "")), None)
        if item is not None and str(item).strip():
            texts.append(str(item).strip())
    return texts


def data_dir(folder: UserFolder) -> Path:
    for name in DATA_DIRS:
        place = folder.root / name
        if any(p.suffix == ".parquet" for p in folder.listdir(place)):
            return place
    raise nothing_found(folder.root, FAMILY, "<query_group>_<interval>.parquet series (arfbench-data/)")


def _frame(folder: UserFolder, file: Path) -> tuple[pd.Series | None, pd.DataFrame]:
    frame = folder.parquet(file, rows=MAX_ROWS).to_pandas()
    time_col = next((c for c in frame.columns if str(c).lower() in TIME_COLUMNS), None)
    values = frame[[c for c in frame.select_dtypes(include=[np.number]).columns if c != time_col]]
    if time_col is None:
        return None, values.reset_index(drop=True)
    times = frame[time_col]
    if pd.api.types.is_numeric_dtype(times):
        unit = "ms" if times.abs().max() > 1e11 else "s"
        times = pd.to_datetime(times, unit=unit, utc=True)
    else:
        times = pd.to_datetime(times, utc=True)
    return times.reset_index(drop=True), values.reset_index(drop=True)


@dataclass(frozen=True)
class Plan:
    """The files a question's series are read from: one per query group, at one interval."""

    groups: list[str]
    interval_s: int
    files: list[Path]


def plan_series(
    folder: UserFolder, data: Path, groups: list[str], max_length: int, source: Path | None = None
) -> Plan | None:
    """The finest interval (under `data`) whose files fit `max_length` (else the coarsest), read from
    the footers alone, each chosen file checked against the input budget; None if no file exists. A
    query_group is a name from the question file (`source`): it must name a file under --path."""
    named = {(g, i): folder.named(data, f"{g}_{i}.parquet", source) for g in groups for i in INTERVALS}
    available = [i for i in INTERVALS if all(folder.is_file(named[g, i]) for g in groups)]
    if not available:
        return None
    chosen = available[-1]
    for interval in available:
        lengths = [pq_rows(folder, named[g, interval]) for g in groups]
        if max(lengths) <= max_length:
            chosen = interval
            break
    files = [named[g, chosen] for g in groups]
    for file in files:
        folder.check_parquet(file, rows=MAX_ROWS)
    return Plan(groups, chosen, files)


def read_series(folder: UserFolder, plan: Plan) -> Series | None:
    """The planned channels, aligned; None when the files hold no numeric column."""
    groups, chosen = plan.groups, plan.interval_s
    parts = [_frame(folder, f) for f in plan.files]
    names, columns, times = [], [], []
    for group, (stamp, frame) in zip(groups, parts):
        for column in frame.columns:
            names.append(str(column) if len(groups) == 1 else f"{group}/{column}")
            columns.append(frame[column].astype(float))
            times.append(stamp)
    if not columns:
        return None
    if all(t is not None for t in times):
        grid = pd.DatetimeIndex(sorted(set().union(*[set(t) for t in times])))
        aligned = []
        for stamp, column in zip(times, columns):
            s = pd.Series(column.to_numpy(), index=pd.DatetimeIndex(stamp)).groupby(level=0).mean()
            s = s.reindex(grid.union(s.index)).interpolate(method="time", limit_area="inside").reindex(grid)
            aligned.append(s.ffill().bfill().to_numpy())
        start = grid[0].isoformat()
    else:
        shortest = min(len(c) for c in columns)
        aligned = [c.to_numpy()[:shortest] for c in columns]
        start = times[0][0].isoformat() if times[0] is not None else None
    values = np.nan_to_num(np.vstack(aligned), nan=0.0)
    return Series(names, values, start, chosen)


def pq_rows(folder: UserFolder, file: Path) -> int:
    """The rows a series file's footer declares (nothing else is read)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(folder.path(file)).metadata.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise UserError(
            f"{folder.label(file)} is not a parquet file ({type(exc).__name__}: {str(exc)[:120]})"
        ) from None
