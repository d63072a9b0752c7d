"""Convert a snapshot in the authors' per-instance layout into the `released` layout.

The paper (A.3.4, A.5.1) describes what each instance holds: the cumulative `timeseries.csv`, the
`answer_schema.json`, `gt_source/` with the source documents (text or PDF), the ground truth
`ground_truth.json` and its evidence `gt_evidence.md`, plus a scenario specification. The frozen
May-2026 snapshot it announces was not public when this was written (searched: no repository or
dataset card named TimeSage-EV holds it), so the accepted input is the layout the paper describes::

    <root>/<scenario>/
      scenario_spec.json | contract.json | scenario.json   # id, domain, cadence, tier, role, publisher,
                                                            # release_name, background; `fields` as in
                                                            # released.py, or `tags` {field: tag}
      <period label>/                                       # one folder per instance
        timeseries.csv  answer_schema.json  ground_truth.json  gt_evidence.md (optional)
        gt_source/<label>.<ext>                             # may include this period's own release

What changes on the way: documents dated at or after the instance's label leave gt_source/ (the
one of the label becomes target/, the withheld truth source; later ones are dropped), every x-*
key leaves the agent's answer_schema.json (kept on the host in scenario.json as derive/note),
gt_evidence.md becomes context.json (its non-empty lines), and a field without a rule takes the
first rule Table 7 allows for its tag. `tsbench generate --family timesage --source snapshot
--path <root>` converts into a temporary folder and reads it as `released`. Every file is read
through the --path folder's checks (user_files): a symlink that leads out of it, or a FIFO, is
refused, never copied into the set.
"""

from __future__ import annotations

import json
from pathlib import Path

from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder, user_folder
from tsbench.tasks.timesage.contract import SCHEMA_FILE, SOURCE_DIR, TABLE_FILE, agent_view
from tsbench.tasks.timesage.sources.released import (
    CONTEXT_FILE,
    SCENARIO_FILE,
    TARGET_DIR,
    TRUTH_FILE,
    instance_folders,
)
from tsbench.tasks.timesage.taxonomy import RULES, rule_allowed

SPEC_FILES = ("scenario_spec.json", "contract.json", "scenario.json")
EVIDENCE_FILE = "gt_evidence.md"


def _rule_for(tag: str) -> str:
    return next((rule for rule in RULES if rule != "text" and rule_allowed(tag, rule)), "text")


def _fields(spec: dict, schema: dict) -> list[dict]:
    """The contract's fields: as given, or one per schema property with its tag's first rule."""
    properties = schema.get("properties", {})
    if spec.get("fields"):
        fields = [dict(f) for f in spec["fields"]]
    else:
        tags = spec.get("tags") or {}
        missing = [name for name in properties if name not in tags]
        if missing:
            raise UserError(f"the scenario spec gives no `fields` and no tag for {', '.join(missing)}")
        fields = [{"name": n, "tag": tags[n], "question": p.get("description", n)} for n, p in properties.items()]
    for entry in fields:
        prop = properties.get(entry["name"], {})
        entry.setdefault("rule", _rule_for(entry["tag"]))
        entry.setdefault("question", prop.get("description", entry["name"]))
        if "derive" not in entry and isinstance(prop.get("x-rule"), dict) and prop["x-rule"].get("kind") != "issuer":
            entry["derive"] = prop["x-rule"]
        entry.setdefault("note", prop.get("x-scoring", ""))
    return fields


def _instance(folder: UserFolder, source: Path, target: Path) -> None:
    label = source.name
    target.mkdir(parents=True, exist_ok=True)
    for name in (TABLE_FILE, TRUTH_FILE):
        (target / name).write_bytes(folder.read_bytes(source / name))
    schema = agent_view(folder.read_json(source / SCHEMA_FILE))
    (target / SCHEMA_FILE).write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
    for doc in folder.listdir(source / SOURCE_DIR):
        if folder.is_dir(doc):
            continue
        stem = doc.name.rsplit(".", 1)[0]
        if stem < label:
            where = target / SOURCE_DIR
        elif stem == label:
            where = target / TARGET_DIR
        else:
            continue  # released after the cutoff: never part of this instance
        where.mkdir(exist_ok=True)
        (where / doc.name).write_bytes(folder.read_bytes(doc))
    if folder.is_file(source / EVIDENCE_FILE):
        text = folder.read_text(source / EVIDENCE_FILE, errors="replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        (target / CONTEXT_FILE).write_text(json.dumps(lines, indent=2))


def convert_snapshot(path: Path | UserFolder, out: Path) -> list[str]:
    """Write every scenario under --path (the layout above) under `out` in the released layout."""
    folder = user_folder(path, "timesage")
    root = folder.given
    if not root.is_dir():
        raise UserError(f"--path {root} is not a folder")
    converted = []
    for scenario in (p for p in folder.listdir(root) if folder.is_dir(p)):
        spec_path = next((scenario / name for name in SPEC_FILES if folder.is_file(scenario / name)), None)
        instances = instance_folders(folder, scenario)
        if spec_path is None or not instances:
            continue
        spec = folder.read_json(spec_path)
        contract = {k: v for k, v in spec.items() if k not in ("fields", "tags")}
        contract.setdefault("id", scenario.name)
        contract["fields"] = _fields(spec, folder.read_json(instances[0] / SCHEMA_FILE))
        missing = [k for k in ("domain", "cadence", "tier") if k not in contract]
        if missing:
            raise UserError(f"{spec_path} lacks {', '.join(missing)}")
        (out / scenario.name).mkdir(parents=True, exist_ok=True)
        (out / scenario.name / SCENARIO_FILE).write_text(json.dumps(contract, indent=2))
        for instance in instances:
            _instance(folder, instance, out / scenario.name / instance.name)
        converted.append(contract["id"])
    if not converted:
        raise UserError(f"no <scenario>/{{{','.join(SPEC_FILES)}}} with instance folders under {root}")
    return converted
