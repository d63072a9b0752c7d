"""Reads Context-is-Key's published task instances (nothing is downloaded).

Where the public data lives: the Hugging Face dataset `ServiceNow/context-is-key` (parquet,
`data/test-*.parquet`, 355 instances: 71 tasks x 5 seeds) or the `all_tasks.json` JSON-lines export
of the benchmark's code (github.com/ServiceNow/context-is-key-forecasting). Both carry one record
per instance with the same fields: name, seed, weight, context_sources, skills, background,
scenario, constraints, seasonal_period, past_time and future_time (a pandas frame as JSON,
{column: {timestamp: value}}; the target is the last column), metric_scaling, region_of_interest
(horizon step indices), constraint_min, constraint_max, constraint_variable_max_index and
constraint_variable_max_values. `--path` may be a file or a folder holding such files.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder, user_folder
from tsbench.tasks.cik.metrics import Constraints
from tsbench.tasks.timeclaw_protocol import split_train_test

SOURCE_HINT = (
    "the Context-is-Key instances: the Hugging Face dataset ServiceNow/context-is-key (data/test-*.parquet) "
    "or all_tasks.json (JSON lines) from github.com/ServiceNow/context-is-key-forecasting"
)
CONTEXT_TYPES = {  # CiK's context-source tags -> the paper's Table 1 column names
    "c_i": "intemporal",
    "c_h": "historical",
    "c_f": "future",
    "c_cov": "covariate",
    "c_causal": "causal",
}
TYPE_ORDER = ("intemporal", "historical", "future", "covariate", "causal")  # TimeClaw Table 1's columns
# TimeClaw's assignment of tasks to context types (evaluation/cik.py, from CiK's Table 2), where it
# differs from the records' own context_sources: 21 of the 71 tasks.
TIMECLAW_TYPES = {
    "ATMBuildingClosedTask": ("intemporal", "future"),
    "SensorTrendAccumulationTask": ("covariate",),
    "UnemploymentCountyUsingSingleStateData": ("future", "covariate"),
    "UnemploymentCountyUsingMultipleStateData": ("future", "covariate"),
    "UnemploymentCountyUsingExplicitMultipleStateData": ("future", "covariate"),
}
DOMAIN_RULES = (  # task-name fragments -> CiK domain (Table 12); first match wins
    (("MontrealFire",), "Public Safety"),
    (("Unemployment",), "Economics"),
    (("Electricity",), "Energy"),
    (("Solar", "Irradiance"), "Climatology"),
    (("Pressure", "SpeedFromLoad"), "Mechanics"),
    (("SVAR",), "Synthetic"),
    (("ATM", "Cash", "Withdrawal"), "Retail"),
    (("Traffic", "Sensor", "Pred"), "Transportation"),
)
MAX_ROWS = 100_000  # rows of one instance parquet file (the release has 355), each read into Python objects
DOMAINS = ("Climatology", "Economics", "Energy", "Mechanics", "Public Safety", "Retail", "Synthetic", "Transportation")


@dataclass
class Instance:
    """One CiK task instance, as published."""

    name: str
    seed: int
    background: str
    scenario: str
    constraints_text: str
    history: np.ndarray  # (columns, L)
    columns: list[str]
    times: list[pd.Timestamp]
    future_times: list[pd.Timestamp]
    target: np.ndarray  # (H,), the last column of future_time
    scaling: float
    region_of_interest: list[int]
    constraints: Constraints
    weight: float = 1.0
    context_sources: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    seasonal_period: int | None = None

    @property
    def key(self) -> str:
        return f"{self.name}__seed{self.seed}"

    @property
    def domain(self) -> str:
        return domain_of(self.name)

    @property
    def context_types(self) -> list[str]:
        """The record's own tags (context_sources) as Table 1's type names."""
        return [CONTEXT_TYPES[c] for c in self.context_sources if c in CONTEXT_TYPES]

    @property
    def timeclaw_context_types(self) -> list[str]:
        """The types TimeClaw's tables break RCRPS down by (its per-task assignment)."""
        if self.name.startswith("MontrealFire") and self.name.endswith("CausalConfoundingTask"):
            return list(TYPE_ORDER)  # every type, where the records omit future (and causal when implicit)
        chosen = TIMECLAW_TYPES.get(self.name, self.context_types)
        return [t for t in TYPE_ORDER if t in chosen]


def domain_of(name: str) -> str:
    for fragments, domain in DOMAIN_RULES:
        if any(f in name for f in fragments):
            return domain
    return "Other"


def find_files(path: Path | UserFolder) -> list[Path]:
    """The instance files at --path: parquet, .json or .jsonl files (a folder is searched recursively)."""
    folder = user_folder(path, "cik")
    found = folder.walk(lambda p: p.suffix in (".parquet", ".jsonl", ".json") and p.name != "manifest.json")
    if not found:
        raise UserError(f"no .parquet/.json/.jsonl files under {folder.given}; --family cik reads {SOURCE_HINT}")
    return found


def read_records(path: Path | UserFolder) -> Iterator[dict[str, Any]]:
    """Raw records of every instance file at `path`, each read through the --path folder's checks
    and input budget (a parquet file's footer and dictionaries first; JSON lines one at a time)."""
    folder = user_folder(path, "cik")
    for file in find_files(folder):
        if file.suffix == ".parquet":
            yield from folder.parquet(file, rows=MAX_ROWS).to_pandas().to_dict("records")
        elif folder.head(file).lstrip().startswith(b"["):
            yield from folder.read_json(file)
        else:
            yield from folder.json_lines(file)


def _frame(raw: Any, what: str, name: str) -> pd.DataFrame:
    """A {column: {timestamp: value}} frame (JSON text or dict) as a time-sorted DataFrame."""
    data = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(data, dict) or not data or not all(isinstance(v, dict) for v in data.values()):
        raise UserError(f"CiK instance {name}: {what} is not a {{column: {{timestamp: value}}}} frame")
    keys = list(next(iter(data.values())).keys())
    stamps = _timestamps(keys)
    frame = pd.DataFrame(
        {col: [_number(values.get(k)) for k in keys] for col, values in data.items()}, index=stamps
    ).sort_index()
    return frame


def _timestamps(keys: list[str]) -> pd.DatetimeIndex:
    if all(str(k).lstrip("-").isdigit() for k in keys):  # pandas' to_json default: epoch milliseconds
        return pd.to_datetime([int(k) for k in keys], unit="ms")
    return pd.to_datetime([str(k) for k in keys])


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _maybe_float(value: Any) -> float | None:
    """A number, or None for a missing one (null, NaN; the HF release writes an absent constraint as +-inf)."""
    if value is None:
        return None
    number = _number(value)
    return number if math.isfinite(number) else None


def _seq(value: Any) -> list:
    """A list field as read from JSON (list, None) or parquet (numpy array)."""
    if value is None:
        return []
    if isinstance(value, np.ndarray):
        return value.tolist()
    return list(value)


def _ints(value: Any) -> list[int]:
    return [int(v) for v in _seq(value)]


def task_weight(value: Any) -> float:
    """A published task weight ("1/3", "1", a number) as a float, as CiK reads them (Fractions); 1 if unreadable."""
    if value is None or value == "":
        return 1.0
    try:
        return float(Fraction(str(value)))
    except (ValueError, ZeroDivisionError):
        return 1.0


def parse_instance(record: dict[str, Any]) -> Instance:
    """One published record as an Instance (a malformed record is one clear UserError)."""
    name = str(record.get("name") or "")
    if not name:
        raise UserError("a CiK record has no name")
    past = _frame(record.get("past_time"), "past_time", name)
    future = _frame(record.get("future_time"), "future_time", name)
    target = future[future.columns[-1]].to_numpy(dtype=np.float64)
    scaling = _maybe_float(record.get("metric_scaling"))
    if scaling is None:
        raise UserError(f"CiK instance {name}: metric_scaling is missing")
    index = _ints(record.get("constraint_variable_max_index"))
    values = [float(v) for v in _seq(record.get("constraint_variable_max_values"))]
    if len(index) != len(values):
        raise UserError(f"CiK instance {name}: constraint_variable_max_index and _values differ in length")
    period = record.get("seasonal_period")
    return Instance(
        name=name,
        seed=int(record.get("seed") or 0),
        background=str(record.get("background") or ""),
        scenario=str(record.get("scenario") or ""),
        constraints_text=str(record.get("constraints") or ""),
        history=past.to_numpy(dtype=np.float64).T,
        columns=[str(c) for c in past.columns],
        times=list(past.index),
        future_times=list(future.index),
        target=target,
        scaling=float(scaling),
        region_of_interest=_ints(record.get("region_of_interest")),
        constraints=Constraints(
            minimum=_maybe_float(record.get("constraint_min")),
            maximum=_maybe_float(record.get("constraint_max")),
            variable_max_index=tuple(index),
            variable_max_values=tuple(values),
        ),
        weight=task_weight(record.get("weight")),
        context_sources=[str(c) for c in _seq(record.get("context_sources"))],
        skills=[str(s) for s in _seq(record.get("skills"))],
        seasonal_period=int(period) if period is not None and not pd.isna(period) else None,
    )


def read_instances(path: Path | UserFolder) -> list[Instance]:
    return [parse_instance(r) for r in read_records(path)]


def split_instances(instances: list[Instance], ratio: float = 0.5, seed: int = 2026):
    """The paper's split (Table 11) as TimeClaw's `split_train_test` draws it: per task name, in file
    order, ceil(ratio * n) instances to train (at least one), the rest to test (5 -> 3 + 2; CiK's
    355 instances -> 213 train, 142 test)."""
    return split_train_test(instances, lambda instance: instance.name, ratio, seed)
