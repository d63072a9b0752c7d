"""The scenario contract (fixed across periods) and one period instance, as plain data.

Every source (synthetic, replay, released) produces these; the store writes them to
scenarios.parquet / periods.parquet and the scorer reads the gold a period carries.
Field names differ from the worked example (spec/timesage-example.md); the content does not.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from tsbench.tasks.timesage.taxonomy import EVIDENCE_TAG, SUMMARY_TAG, family_of

TABLE_FILE = "timeseries.csv"
SCHEMA_FILE = "answer_schema.json"
SOURCE_DIR = "gt_source"


@dataclass
class FieldSpec:
    """One numbered question of the template and how its answer is scored.

    `derive` is the machine-readable rule that recomputes the truth from the cumulative table (host
    side only: never in the agent's answer_schema.json); None means the truth is the issuer's
    statement in the withheld release. `parts` holds the sub-field rules of a joint field;
    `item_key` / `value_rule` say how an item-wise field's items are keyed and compared.
    """

    name: str
    tag: str
    rule: str
    question: str
    schema: dict[str, Any]
    abs_tol: float | None = None
    rel_tol: float | None = None
    parts: dict[str, dict[str, Any]] = field(default_factory=dict)
    item_key: str | None = None
    value_rule: dict[str, Any] | None = None
    derive: dict[str, Any] | None = None
    note: str = ""

    @property
    def family(self) -> str | None:
        return family_of(self.tag)

    @property
    def in_accuracy(self) -> bool:
        """Summary and evidence fields are judged through coverage and quality, not accuracy."""
        return self.tag not in (SUMMARY_TAG, EVIDENCE_TAG)


@dataclass
class KeypointSpec:
    """A content unit the report must convey. `field` anchors it to an answer field (its truth
    fills the description each period); without one, the period supplies the truth text."""

    id: str
    description: str
    verify: str
    field: str | None = None
    # words naming what it is about (the rules judge binds a stated value to them); `field` above
    # shadows dataclasses.field inside this class body, hence the qualified name
    subject: list[str] = dataclasses.field(default_factory=list)


@dataclass
class Signal:
    """A required or forbidden quality signal; `check` lets the offline rules judge test it."""

    text: str
    check: dict[str, Any] = field(default_factory=dict)


@dataclass
class Rubric:
    genre: str
    required: list[Signal]
    forbidden: list[Signal]
    exemplar: str


@dataclass
class Scenario:
    id: str
    source: str  # synthetic | replay | released
    domain: str
    cadence: str
    tier: str
    role: str
    publisher: str
    release_name: str
    background: str
    columns: dict[str, str]  # table column -> meaning and unit
    fields: list[FieldSpec]
    keypoints: list[KeypointSpec]
    quality: Rubric

    @property
    def tags(self) -> list[str]:
        return [f.tag for f in self.fields]

    @property
    def required_keys(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> FieldSpec:
        return next(f for f in self.fields if f.name == name)

    def answer_schema(self) -> dict[str, Any]:
        """The JSON Schema the agent's answer must satisfy, as the agent sees it: types, enums and
        each field's question as its description. No scoring or derivation rule: those stay on the
        host, so an agent cannot execute the rule instead of reading the evidence."""
        properties = {}
        for spec in self.fields:
            prop = agent_view(dict(spec.schema))
            prop["description"] = spec.question
            properties[spec.name] = prop
        return {
            "type": "object",
            "additionalProperties": False,
            "required": self.required_keys,
            "properties": properties,
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scenario:
        data = dict(data)
        data["fields"] = [FieldSpec(**f) for f in data["fields"]]
        data["keypoints"] = [KeypointSpec(**k) for k in data["keypoints"]]
        quality = dict(data["quality"])
        quality["required"] = [Signal(**s) for s in quality["required"]]
        quality["forbidden"] = [Signal(**s) for s in quality["forbidden"]]
        data["quality"] = Rubric(**quality)
        return cls(**data)


@dataclass
class Period:
    """One (scenario, t_k) instance: what the jail gets (`files`), and what only the scorer and
    the audit read (truth, keypoint texts, the withheld target release)."""

    scenario: str
    index: int  # 1-based position among the scenario's evaluated periods
    label: str  # the period as the issuer names it (YYYY-MM, YYYY-MM-DD)
    cutoff: str  # ISO date of the last visible row
    files: dict[str, bytes]  # visible: timeseries.csv, answer_schema.json, gt_source/<prior>.<ext>
    truth: dict[str, Any]
    keypoint_truths: dict[str, Any]  # keypoint id -> the value the report must convey (None: nothing)
    context: list[str]  # cutoff-valid reference excerpts (faithfulness level 2)
    target_name: str  # gt_source/<label>.<ext>: withheld
    target_doc: bytes
    prior_truth: dict[str, Any] | None = None  # what the last visible release stated for these fields

    @property
    def id(self) -> str:
        return period_id(self.scenario, self.index)

    @property
    def prior_docs(self) -> list[str]:
        return sorted(name for name in self.files if name.startswith(SOURCE_DIR + "/"))


def period_id(scenario: str, index: int) -> str:
    return f"{scenario}/p{index:02d}"


def truth_text(value: Any) -> str | None:
    """How a truth reads in a keypoint: scalars as written, lists joined, objects as key value pairs."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return "; ".join(f"{k} {v}" for k, v in value.items())
    if isinstance(value, list):
        if not value:
            return "none"
        return ", ".join(str(item.get("risk", item)) if isinstance(item, dict) else str(item) for item in value)
    return str(value)


def dumps(value: Any) -> str:
    """Canonical JSON (sorted keys, no NaN): the bytes a seed must reproduce."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def agent_view(schema: Any) -> Any:
    """A JSON Schema with every annotation key starting "x-" (x-rule, x-scoring, ...) removed, at
    every depth: what may be shown to an agent."""
    if isinstance(schema, dict):
        return {k: agent_view(v) for k, v in schema.items() if not (isinstance(k, str) and k.startswith("x-"))}
    if isinstance(schema, list):
        return [agent_view(v) for v in schema]
    return schema


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """Problems of `value` against the JSON Schema subset scenarios use (type, enum, required,
    properties, additionalProperties, items, minimum, maximum); empty when it conforms."""
    problems: list[str] = []
    kind = schema.get("type")
    checks = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "boolean": lambda v: isinstance(v, bool),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "null": lambda v: v is None,
    }
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    if kinds and not any(checks[k](value) for k in kinds):
        return [f"{path}: expected {'/'.join(kinds)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{path}: {value} < minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{path}: {value} > maximum {schema['maximum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                problems.append(f"{path}: missing required key {key!r}")
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is False:
            problems += [f"{path}: unexpected key {k!r}" for k in value if k not in properties]
        for key, sub in properties.items():
            if key in value:
                problems += validate(value[key], sub, f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += validate(item, schema["items"], f"{path}[{i}]")
    return problems
