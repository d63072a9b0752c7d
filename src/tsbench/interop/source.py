"""One run directory as every exporter reads it: run.json, results.json (made when missing), the rows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tsbench.core import json_input
from tsbench.core.errors import UserError
from tsbench.results import RESULTS_JSON, is_run_dir, load_run, load_samples
from tsbench.results.records import transcript_events
from tsbench.results.summary import summarize


@dataclass
class RunSource:
    path: Path
    run: dict  # run.json
    results: dict  # results.json, or the same summary computed from the rows
    samples: pd.DataFrame  # one row per (id, epoch), results/schema.py columns

    @property
    def name(self) -> str:
        return str(self.run.get("run_name") or self.path.name)

    @property
    def model(self) -> str:
        return str(self.run.get("model") or "?")

    @property
    def family(self) -> str:
        return str(self.run.get("family") or "anomalyxl")

    def rows(self) -> list[dict]:
        """The rows as plain dicts, missing values as None (pandas reads them back as NaN/NaT)."""
        return [{k: (None if _missing(v) else v) for k, v in row.items()} for row in self.samples.to_dict("records")]


def _missing(value) -> bool:
    if isinstance(value, (dict, list)):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def read_source(run_dir: str | Path) -> RunSource:
    path = Path(run_dir)
    if not is_run_dir(path):
        raise UserError(f"{path} is not a run dir (no run.json)")
    run = load_run(path)
    samples = load_samples(path)
    results_path = path / RESULTS_JSON
    if results_path.is_file():
        results = json_input.read_json(results_path)
    else:  # a run from before results.json: the same summary, from the rows
        results = {
            "run_name": run.get("run_name"),
            "family": run.get("family"),
            "model": run.get("model"),
            "harness": run.get("harness"),
            "complete": run.get("complete"),
            "dataset": run.get("dataset"),
            "config": run.get("config"),
            "results": summarize(samples),
        }
    return RunSource(path, run, results, samples)


def transcript_of(row: dict) -> list[dict]:
    """A row's transcript events (an unreadable one is empty, never an error)."""
    try:
        events = transcript_events(row)
    except (TypeError, json.JSONDecodeError):
        return []
    return events if isinstance(events, list) else []


def is_error_row(row: dict) -> bool:
    return isinstance(row.get("error_type"), str)
