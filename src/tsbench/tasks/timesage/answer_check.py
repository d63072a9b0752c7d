"""The structured answer checked against the field schemas before any field is scored: a field that
is missing, or whose value does not have the schema's type, scores 0 and is reported, so neither
`{}` nor a missing list (against an empty truth) earns the points of a right answer.

Leniencies stated once: an integral float is an integer ("3.0" from JSON is 3); an enum label
differing only in case is the label; a null is "not applicable" for a scalar field (the field rule
then scores it), but never stands in for a list unless the truth is null too.
"""

from __future__ import annotations

from typing import Any

from tsbench.tasks.timesage.contract import FieldSpec, validate


def _normal(value: Any, schema: dict[str, Any]) -> Any:
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "integer" in kinds and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and "enum" in schema:
        for option in schema["enum"]:
            if isinstance(option, str) and option.strip().lower() == value.strip().lower():
                return option
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_normal(item, schema["items"]) for item in value]
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        props = schema["properties"]
        return {k: _normal(v, props[k]) if k in props else v for k, v in value.items()}
    return value


def _is_array(schema: dict[str, Any]) -> bool:
    kinds = schema.get("type")
    return kinds == "array" or (isinstance(kinds, list) and "array" in kinds and "null" not in kinds)


def field_problem(spec: FieldSpec, answer: dict, truth: Any) -> str | None:
    """Why the answer's value for this field cannot be scored ("missing", "mistyped: ..."), or None."""
    if spec.name not in answer:
        return "missing"
    value = answer[spec.name]
    if value is None:
        return "mistyped: null for a list" if _is_array(spec.schema) and truth is not None else None
    problems = validate(_normal(value, spec.schema), spec.schema, spec.name)
    return f"mistyped: {problems[0]}" if problems else None


def check_answer(fields: list[FieldSpec], answer: dict, truth: dict) -> dict[str, str]:
    """{field name: problem} over the fields that count in accuracy; empty when all conform."""
    problems = {}
    for spec in fields:
        if spec.in_accuracy:
            problem = field_problem(spec, answer, truth.get(spec.name))
            if problem is not None:
                problems[spec.name] = problem
    return problems


def normalised(fields: list[FieldSpec], answer: dict) -> dict:
    """The answer with the leniencies applied (what the field rules then compare)."""
    specs = {f.name: f for f in fields}
    return {k: _normal(v, specs[k].schema) if k in specs and v is not None else v for k, v in answer.items()}


def unexpected_keys(fields: list[FieldSpec], answer: dict) -> list[str]:
    names = {f.name for f in fields}
    return sorted(str(k) for k in answer if k not in names)
