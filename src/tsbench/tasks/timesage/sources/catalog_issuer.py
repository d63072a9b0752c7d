"""Questions whose truth is what the issuer's withheld release will say (no `derive` rule).

Medium kinds ask for change, composition and event analysis as the issuer reports them: on the
adjusted figure the releases publish, against the reference the previous release declared, by
contribution with the brief's weights, with events as the releases announced them. Hard kinds
ask for the issuer's attribution and outlook. The questions name the quantity; how the issuer
computes it is in the brief and the prior releases, as in a real analyst's desk.
"""

from __future__ import annotations

from tsbench.tasks.timesage.contract import FieldSpec
from tsbench.tasks.timesage.sources.catalog import DIRECTIONS, Vocabulary

ISSUER = "; truth from the withheld release"


def _tol(v: Vocabulary) -> float:
    return round(10**-v.decimals, v.decimals)


def _medium(kind: str, v: Vocabulary) -> FieldSpec | None:
    tol, col, w = _tol(v), v.value, v.record_releases
    number = {"type": "number"}
    adjusted = f"the adjusted {col} (as the release publishes it)"
    names = ", ".join(v.component_names)
    table = {
        "change": (
            "B1",
            "numeric",
            f"What is the change in {adjusted} from the adjusted figure published in the previous release?",
            number,
        ),
        "change_direction": (
            "B2",
            "label",
            f"Is {adjusted} up, down or flat against the adjusted figure published in the previous release?",
            {"type": "string", "enum": DIRECTIONS},
        ),
        "trend_3": (
            "B3",
            "numeric",
            f"What is the change in {adjusted} over the last three releases (this {v.period_word}'s adjusted "
            "figure minus the one published three releases ago)?",
            number,
        ),
        "run_length": (
            "B4",
            "numeric",
            f"For how many consecutive releases, ending with this one, has {adjusted} moved in the same "
            "direction (up, down or flat) as this period? Count only the releases available to you and this one.",
            {"type": "integer", "minimum": 1},
        ),
        "vs_baseline": (
            "B5",
            "numeric",
            f"What is the deviation of {adjusted} from the reference level the previous release declared for "
            f"this {v.period_word}?",
            number,
        ),
        "is_record": (
            "B6",
            "boolean",
            f"Is {adjusted} the highest of the last {w} published adjusted figures (this one and the "
            f"{w - 1} releases before it; ties count)?",
            {"type": "boolean"},
        ),
        "rank": (
            "B7",
            "numeric",
            f"What is the rank of {adjusted} among the last {w} published adjusted figures (1 = highest)?",
            {"type": "integer", "minimum": 1, "maximum": w},
        ),
        "top_components": (
            "C1",
            "set",
            f"Which two components ({names}) contribute most to the total this {v.period_word}?",
            {"type": "array", "items": {"type": "string", "enum": v.component_names}},
        ),
        "dominant_component": (
            "C2",
            "label",
            f"Which single component ({names}) contributes most to the total this {v.period_word}?",
            {"type": "string", "enum": v.component_names},
        ),
        "component_shares": (
            "C3",
            "itemwise",
            f"What share (%) of the total does each component contribute this {v.period_word}? One decimal.",
            {"type": "object", "properties": {n: number for n in v.component_names}, "required": v.component_names},
        ),
        "major_components": (
            "C4",
            "set",
            "Which components fall in the 'major' bucket (a contribution share of at least 25 %)?",
            {"type": "array", "items": {"type": "string", "enum": v.component_names}},
        ),
        "flagged_periods": (
            "D1",
            "set",
            f"Which series of the table ({', '.join(v.series)}) will the release flag as moving unusually this "
            f"{v.period_word}?",
            {"type": "array", "items": {"type": "string", "enum": v.series}},
        ),
        "event_type": (
            "D2",
            "label",
            f"How will the release classify this {v.period_word}'s event: an announced event type, "
            "'unannounced' (an unusual change no release announced) or 'none'?",
            {"type": "string", "enum": [*v.event_types, "unannounced", "none"]},
        ),
    }
    if kind not in table:
        return None
    tag, rule, question, schema = table[kind]
    name = "flagged_series" if kind == "flagged_periods" else kind
    spec = FieldSpec(name, tag, rule, question, schema, note=f"{rule}{ISSUER}")
    if rule == "numeric" and schema.get("type") == "number":
        spec.abs_tol = tol
    if kind == "component_shares":
        spec.value_rule = {"rule": "numeric", "abs_tol": 0.15}
    return spec


def _hard(kind: str, v: Vocabulary) -> FieldSpec | None:
    drivers = ", ".join(v.drivers)
    label = {"type": "string"}
    if kind == "cause":
        return FieldSpec(
            "cause",
            "E1",
            "judge",
            f"In one short phrase, what single cause will the release give for this {v.period_word}'s change in "
            f"{v.value} (a driver and how it moved)?",
            label,
            note=f"LLM judgment{ISSUER}",
        )
    if kind == "drivers_evidence":
        return FieldSpec(
            "drivers_evidence",
            "E4",
            "itemwise",
            f"Which drivers ({drivers}) will the release name for this {v.period_word}'s change, each with the "
            'reading that supports it? Items as {"driver": ..., "evidence": ...}.',
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"driver": {"type": "string", "enum": v.drivers}, "evidence": label},
                    "required": ["driver"],
                },
            },
            item_key="driver",
            note=f"item-wise on the drivers named{ISSUER}",
        )
    if kind == "stakeholders":
        return FieldSpec(
            "stakeholders",
            "E5",
            "set",
            f"Which stakeholder groups ({', '.join(v.stakeholders)}) will the release name as affected by this "
            f"{v.period_word}'s change?",
            {"type": "array", "items": {"type": "string", "enum": v.stakeholders}},
            note=f"set overlap (Dice){ISSUER}",
        )
    if kind == "conditional_outlook":
        return FieldSpec(
            "conditional_outlook",
            "F4",
            "joint",
            f"What conditional outlook will the release give: if which driver ({drivers}) stays above (up) or "
            f"below (down) its normal, will {v.value} go up or down?",
            {
                "type": "object",
                "properties": {
                    "if_driver": {"type": "string", "enum": v.drivers},
                    "if_direction": {"type": "string", "enum": ["up", "down"]},
                    "then_direction": {"type": "string", "enum": ["up", "down"]},
                },
                "required": ["if_driver", "if_direction", "then_direction"],
            },
            parts={
                "if_driver": {"rule": "label"},
                "if_direction": {"rule": "label"},
                "then_direction": {"rule": "label"},
            },
            note=f"joint: driver and both directions{ISSUER}",
        )
    if kind == "yoy_comparison":  # the issuer's comparison: the raw reading a year earlier
        return FieldSpec(
            "yoy_comparison",
            "E7",
            "joint",
            f"Which earlier {v.period_word} will the release compare {v.value} with (the same {v.period_word} a "
            "year earlier, by date label), and in which direction does it differ?",
            {
                "type": "object",
                "properties": {"reference": label, "direction": {"type": "string", "enum": DIRECTIONS}},
                "required": ["reference", "direction"],
            },
            parts={"reference": {"rule": "label"}, "direction": {"rule": "label"}},
            note=f"joint: reference label and direction{ISSUER}",
        )
    return None


def build_issuer(kind: str, v: Vocabulary) -> FieldSpec | None:
    """The issuer-view FieldSpec of a kind, or None when the kind keeps its table-rule form."""
    return _medium(kind, v) or _hard(kind, v)
