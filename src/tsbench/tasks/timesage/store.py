"""The on-disk set: scenarios.parquet (one contract per scenario), periods.parquet (one row per
scenario-period: visible files, question, schema, truth, keypoints, cutoff, period index, and the
withheld target release) and manifest.json, written to temporary names and renamed when complete.

`gold` is the scoring bundle of a period (fields and rules, truth, keypoints with their texts,
rubric, context, the target release's name): everything the scorer reads, nothing the jail gets.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.core import json_input
from tsbench.core.input_budget import Budget, check_parquet
from tsbench.core.provenance import git_commit, sha256_file, versions, write_json
from tsbench.tasks.timesage.contract import Period, Scenario, dumps, truth_text
from tsbench.tasks.timesage.prompt import period_meta, period_question

SCENARIOS = "scenarios.parquet"
PERIODS = "periods.parquet"
MANIFEST = "manifest.json"
COMPRESSION = "zstd"

_TEXT = pa.string()
# scenario columns copied as they are from the Scenario (the rest are built in _scenario_row)
SCENARIO_COPIED = ("id", "source", "domain", "cadence", "tier", "role", "publisher", "release_name")


def _texts(*names: str) -> list[tuple[str, pa.DataType]]:
    return [(name, _TEXT) for name in names]


SCENARIO_SCHEMA = pa.schema(
    [*_texts(*SCENARIO_COPIED), ("n_periods", pa.int32()), ("tags", pa.list_(_TEXT)), *_texts("contract")]
)
PERIOD_SCHEMA = pa.schema(
    [
        *_texts("id", "scenario"),
        ("period_index", pa.int32()),
        *_texts("period_label", "cutoff", "source", "domain", "cadence", "tier", "question", "meta", "answer_schema"),
        ("files", pa.map_(_TEXT, pa.binary())),
        *_texts("truth", "keypoints", "context", "gold", "target_name"),
        ("target_doc", pa.binary()),
    ]
)
INDEX_FIELDS = ["id", "scenario", "period_index", "period_label", "domain", "cadence", "tier", "source", "gold"]


def keypoints(scenario: Scenario, period: Period) -> list[dict[str, Any]]:
    out = []
    for kp in scenario.keypoints:
        value = period.keypoint_truths.get(kp.id)
        out.append(
            {
                "id": kp.id,
                "field": kp.field,
                "description": kp.description,
                "verify": kp.verify,
                "truth": value,
                "truth_text": truth_text(value),
                "subject": list(kp.subject),
            }
        )
    return out


def gold(scenario: Scenario, period: Period) -> dict[str, Any]:
    contract = scenario.to_dict()
    return {
        "scenario": scenario.id,
        "period_label": period.label,
        "period_index": period.index,
        "tier": scenario.tier,
        "fields": contract["fields"],
        "truth": period.truth,
        "keypoints": keypoints(scenario, period),
        "quality": contract["quality"],
        "context": period.context,
        "target_name": period.target_name,
        "prior_docs": period.prior_docs,
        "prior_truth": period.prior_truth,
    }


def _scenario_row(scenario: Scenario, n_periods: int) -> dict[str, Any]:
    copied = {name: getattr(scenario, name) for name in SCENARIO_COPIED}
    return {**copied, "n_periods": n_periods, "tags": scenario.tags, "contract": dumps(scenario.to_dict())}


def _period_row(scenario: Scenario, period: Period) -> dict[str, Any]:
    return {
        "id": period.id,
        "scenario": scenario.id,
        "period_index": period.index,
        "period_label": period.label,
        "cutoff": period.cutoff,
        **{name: getattr(scenario, name) for name in ("source", "domain", "cadence", "tier")},
        "question": period_question(scenario, period),
        "meta": dumps(period_meta(scenario, period)),
        "answer_schema": dumps(scenario.answer_schema()),
        "files": sorted(period.files.items()),
        "truth": dumps(period.truth),
        "keypoints": dumps(keypoints(scenario, period)),
        "context": dumps(period.context),
        "gold": dumps(gold(scenario, period)),
        "target_name": period.target_name,
        "target_doc": period.target_doc,
    }


def write_set(
    sets: list[tuple[Scenario, list[Period]]], out: Path, manifest: dict[str, Any]
) -> tuple[Path, list[dict]]:
    """Write the two parquet files and the manifest; returns (manifest path, one line per file)."""
    out.mkdir(parents=True, exist_ok=True)
    tables = {
        SCENARIOS: pa.Table.from_pylist([_scenario_row(s, len(p)) for s, p in sets], schema=SCENARIO_SCHEMA),
        PERIODS: pa.Table.from_pylist(
            [_period_row(s, period) for s, ps in sets for period in ps], schema=PERIOD_SCHEMA
        ),
    }
    lines = []
    for name, table in tables.items():
        target = out / name
        partial = target.with_name(f"{name}.partial-{os.getpid()}")
        try:
            pq.write_table(table, partial, compression=COMPRESSION, row_group_size=64)
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)
        lines.append(
            {"file": name, "rows": table.num_rows, "bytes": target.stat().st_size, "sha256": sha256_file(target)}
        )
    manifest = {
        "dataset": "TimeSage-EV",
        "family": "timesage",
        **manifest,
        "files": {line["file"]: {k: line[k] for k in ("rows", "bytes", "sha256")} for line in lines},
        "versions": versions(("numpy", "pandas", "pyarrow", "statsmodels")),
        "git_commit": git_commit(),
    }
    write_json(out / MANIFEST, manifest)
    return out / MANIFEST, lines


@functools.lru_cache(maxsize=8)
def _read_periods(path: str, mtime_ns: int) -> pd.DataFrame:
    check_parquet(path, path, Budget().scaled())  # a set handed to eval may be anyone's: judged before it is read
    frame = pq.read_table(path).to_pandas()
    return frame.set_index("id", drop=False)


def read_periods(path: str | Path) -> pd.DataFrame:
    """Every column of periods.parquet (cached per file version; files come back as a dict)."""
    path = Path(path)
    return _read_periods(str(path), path.stat().st_mtime_ns)


def read_index(path: str | Path) -> pd.DataFrame:
    check_parquet(path, str(path), Budget().scaled(), columns=list(INDEX_FIELDS))
    return pq.read_table(path, columns=INDEX_FIELDS).to_pandas()


def read_scenarios(path: str | Path) -> list[Scenario]:
    check_parquet(path, str(path), Budget().scaled(), columns=["contract"])
    frame = pq.read_table(path, columns=["contract"]).to_pandas()
    return [Scenario.from_dict(json_input.loads(text, f"a scenario contract in {path}")) for text in frame["contract"]]


def files_of(cell: Any) -> dict[str, bytes]:
    """A parquet map cell (a list of (name, bytes) pairs) as a dict."""
    return dict(cell) if cell is not None else {}
