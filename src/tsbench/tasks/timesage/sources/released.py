"""The released source: a local folder in the paper's per-instance layout.

Accepted layout (one folder per scenario, one sub-folder per period instance)::

    <root>/
      <scenario id>/
        scenario.json                # the contract, see below
        <period label>/              # e.g. 2024-11 or 2024-11-29: how the issuer names the period
          timeseries.csv             # cumulative table: a `date` column, rows ascending, last row = the label
          answer_schema.json         # JSON Schema of the answer (any x-* keys are stripped before the jail)
          gt_source/<label>.<ext>    # releases of PRIOR periods only, each named by its period label
          ground_truth.json          # {field: truth}; never copied into the jail
          keypoints.json             # optional: {keypoint id: truth} for keypoints without a field
          context.json               # optional: ["reference excerpt", ...] (faithfulness level 2)
          prior_truth.json           # optional: {field: what the last visible release stated}
          target/<label>.<ext>       # optional: the withheld release of this period

scenario.json holds id, domain, cadence, tier, role, publisher, release_name, background and
`fields`: [{name, tag, rule, question, abs_tol?, rel_tol?, parts?, item_key?, value_rule?, derive?,
note?}] (each field's JSON schema comes from answer_schema.json; `derive`, the host-side rule that
recomputes a truth from the table, may instead be given there as `x-rule`, and `note` as
`x-scoring`: both stay on the host, the agent's copy of answer_schema.json has every x-* key
removed); optionally `columns` (name ->
meaning; default: the CSV header), `keypoints` ([{id, description, verify, field?}]; default one
per scored field) and `quality` ({genre, required, forbidden, exemplar}, signals as {text}; default
the tier's rubric). `export_released` writes any set in this layout, so a set round-trips.
Every file is read through the --path folder's checks (user_files): a symlink that leads out of it,
a FIFO or a file past the input budget is refused in one line, never put in a row.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import io
import json
from pathlib import Path

import pandas as pd

from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder, user_folder
from tsbench.tasks.timesage.contract import (
    SCHEMA_FILE,
    SOURCE_DIR,
    TABLE_FILE,
    FieldSpec,
    KeypointSpec,
    Period,
    Rubric,
    Scenario,
    Signal,
    agent_view,
)
from tsbench.tasks.timesage.sources.catalog import keypoints_for
from tsbench.tasks.timesage.sources.render import context_lines, rubric

TRUTH_FILE = "ground_truth.json"
KEYPOINTS_FILE = "keypoints.json"
CONTEXT_FILE = "context.json"
PRIOR_TRUTH_FILE = "prior_truth.json"
TARGET_DIR = "target"
SCENARIO_FILE = "scenario.json"


def instance_folders(folder: UserFolder, scenario: Path) -> list[Path]:
    """A scenario's period folders (those holding ground_truth.json), sorted by label."""
    return [p for p in folder.listdir(scenario) if folder.is_dir(p) and folder.is_file(p / TRUTH_FILE)]


def _fields(spec: dict, schema: dict) -> list[FieldSpec]:
    fields = []
    for entry in spec.get("fields", []):
        prop = dict(schema.get("properties", {}).get(entry["name"], {}))
        rule = entry.get("derive", prop.get("x-rule"))
        note = entry.get("note", prop.get("x-scoring", ""))
        prop = agent_view(prop)
        prop.pop("description", None)
        given = {k: entry[k] for k in ("abs_tol", "rel_tol", "parts", "item_key", "value_rule") if k in entry}
        derive = rule if rule and rule.get("kind") != "issuer" else None
        required = {k: entry[k] for k in ("name", "tag", "rule", "question")}
        fields.append(FieldSpec(**required, schema=prop, **given, derive=derive, note=note))
    return fields


def _scenario(inputs: UserFolder, folder: Path, first_instance: Path) -> Scenario:
    spec = inputs.read_json(folder / SCENARIO_FILE)
    schema = inputs.read_json(first_instance / SCHEMA_FILE)
    fields = _fields(spec, schema)
    if not fields:
        raise UserError(f"{folder / SCENARIO_FILE} lists no fields")
    header = (inputs.read_text(first_instance / TABLE_FILE).splitlines() or [""])[0].split(",")
    columns = spec.get("columns") or {c: c for c in header}
    keypoints = (
        [KeypointSpec(**k) for k in spec["keypoints"]]
        if spec.get("keypoints")
        else keypoints_for(fields, "state", spec["tier"])
    )
    if "quality" in spec:
        q = spec["quality"]
        quality = Rubric(
            q["genre"],
            [Signal(**s) for s in q["required"]],
            [Signal(**s) for s in q["forbidden"]],
            q.get("exemplar", ""),
        )
    else:
        quality = rubric(
            spec["tier"], status_name="state", labels=[], units=[], drivers=[], components=[], has_status=False
        )
    return Scenario(
        id=spec.get("id", folder.name),
        source="released",
        domain=spec["domain"],
        cadence=spec["cadence"],
        tier=spec["tier"],
        role=spec.get("role", "analyst"),
        publisher=spec.get("publisher", ""),
        release_name=spec.get("release_name", "release"),
        background=spec.get("background", ""),
        columns=columns,
        fields=fields,
        keypoints=keypoints,
        quality=quality,
    )


def _schema_bytes(schema: dict) -> bytes:
    return (json.dumps(schema, indent=2, sort_keys=True) + "\n").encode()


def _period(inputs: UserFolder, scenario: Scenario, folder: Path, index: int) -> Period:
    label = folder.name
    schema = agent_view(inputs.read_json(folder / SCHEMA_FILE))  # rules never reach the jail
    files = {TABLE_FILE: inputs.read_bytes(folder / TABLE_FILE), SCHEMA_FILE: _schema_bytes(schema)}
    prior = [p for p in inputs.listdir(folder / SOURCE_DIR) if inputs.is_file(p)]
    for path in prior:
        files[f"{SOURCE_DIR}/{path.name}"] = inputs.read_bytes(path)
    truth = inputs.read_json(folder / TRUTH_FILE)
    extra = inputs.read_json(folder / KEYPOINTS_FILE) if inputs.is_file(folder / KEYPOINTS_FILE) else {}
    keypoint_truths = {kp.id: truth.get(kp.field) if kp.field else extra.get(kp.id) for kp in scenario.keypoints}
    targets = [
        p for p in inputs.listdir(folder / TARGET_DIR) if fnmatch.fnmatch(p.name, f"{label}.*") and inputs.is_file(p)
    ]
    target_name = f"{SOURCE_DIR}/{targets[0].name}" if targets else f"{SOURCE_DIR}/{label}.withheld"
    if inputs.is_file(folder / CONTEXT_FILE):
        context = inputs.read_json(folder / CONTEXT_FILE)
    else:
        table = pd.read_csv(io.BytesIO(files[TABLE_FILE]), dtype=str)
        rows = table.tail(3).to_dict("records")
        latest = None
        if prior:
            name = f"{SOURCE_DIR}/{prior[-1].name}"
            latest = (name, files[name].decode(errors="replace"))
        context = context_lines(scenario.background, scenario.columns, rows, latest)
    return Period(
        scenario=scenario.id,
        index=index,
        label=label,
        cutoff=label,
        files=files,
        truth=truth,
        keypoint_truths=keypoint_truths,
        context=context,
        target_name=target_name,
        target_doc=inputs.read_bytes(targets[0]) if targets else b"",
        prior_truth=inputs.read_json(folder / PRIOR_TRUTH_FILE) if inputs.is_file(folder / PRIOR_TRUTH_FILE) else None,
    )


def read_released(
    path: Path | UserFolder, n_scenarios: int | None = None, n_periods: int | None = None
) -> list[tuple[Scenario, list[Period]]]:
    inputs = user_folder(path, "timesage")
    root = inputs.given
    if not root.is_dir():
        raise UserError(f"--path {root} is not a folder")
    folders = [p for p in inputs.listdir(root) if inputs.is_dir(p) and inputs.is_file(p / SCENARIO_FILE)]
    if not folders:
        raise UserError(
            f"no <scenario>/{SCENARIO_FILE} under {root} (see the layout in tsbench/tasks/timesage/sources/released.py)"
        )
    sets = []
    for folder in folders[: n_scenarios or None]:
        instances = instance_folders(inputs, folder)
        if n_periods:
            instances = instances[-n_periods:]
        if not instances:
            raise UserError(f"{folder} has no period folders with {TRUTH_FILE}")
        scenario = _scenario(inputs, folder, instances[0])
        sets.append((scenario, [_period(inputs, scenario, p, i) for i, p in enumerate(instances, 1)]))
    return sets


def export_released(sets: list[tuple[Scenario, list[Period]]], root: Path) -> None:
    """Write scenarios and periods in the layout above (the truth outside each instance's files)."""
    for scenario, periods in sets:
        folder = root / scenario.id
        folder.mkdir(parents=True, exist_ok=True)
        contract = scenario.to_dict()
        keep = [f.name for f in dataclasses.fields(FieldSpec) if f.name != "schema"]  # it is answer_schema.json
        contract["fields"] = [{k: f[k] for k in keep} for f in contract["fields"]]
        (folder / SCENARIO_FILE).write_text(json.dumps(contract, indent=2))
        for period in periods:
            instance = folder / period.label
            for name, body in period.files.items():
                (instance / name).parent.mkdir(parents=True, exist_ok=True)
                (instance / name).write_bytes(body)
            (instance / TRUTH_FILE).write_text(json.dumps(period.truth, indent=2))
            fielded = {kp.id for kp in scenario.keypoints if kp.field}
            extra = {k: v for k, v in period.keypoint_truths.items() if k not in fielded}
            (instance / KEYPOINTS_FILE).write_text(json.dumps(extra, indent=2, sort_keys=True))
            (instance / CONTEXT_FILE).write_text(json.dumps(period.context, indent=2))
            if period.prior_truth is not None:
                (instance / PRIOR_TRUTH_FILE).write_text(json.dumps(period.prior_truth, indent=2))
            (instance / TARGET_DIR).mkdir(exist_ok=True)
            (instance / TARGET_DIR / period.target_name.split("/")[-1]).write_bytes(period.target_doc)
