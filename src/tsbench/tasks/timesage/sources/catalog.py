"""The field catalogue: one builder per question kind, turning a scenario's vocabulary into a
FieldSpec (tag, rule, question text, JSON schema, tolerance, derivation rule).

Questions state their rule in words so a reader of the prompt (model or person) knows exactly what
is asked; the same rule is in answer_schema.json as `x-rule`. Issuer fields (`derive` None) are
what the withheld release will say: prior releases show how the issuer decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tsbench.tasks.timesage.contract import FieldSpec, KeypointSpec
from tsbench.tasks.timesage.taxonomy import EVIDENCE_TAG, SUMMARY_TAG

DIRECTIONS = ["up", "down", "flat"]
EVENT_CLASSES = ["spike", "dip", "none"]

# Question kinds by tier (the generator draws from these pools).
EASY_POOL = ("latest_value", "latest_direction")
MEDIUM_POOL = (
    "latest_value",
    "change",
    "yoy_direction",
    "trend_3",
    "run_length",
    "vs_baseline",
    "is_record",
    "rank",
    "top_components",
    "dominant_component",
    "component_shares",
    "major_components",
    "flagged_periods",
    "event_type",
)
HARD_POOL = (
    "status",
    "primary_driver",
    "secondary_drivers",
    "guidance",
    "yoy_comparison",
    "risks",
    "outlook_direction",
    "outlook",
    "flagged_periods",
)


# Kinds only the synthetic issuer can answer (they need its releases).
ISSUER_ONLY = ("change_direction", "cause", "drivers_evidence", "stakeholders", "conditional_outlook")

# The taxonomy tag each question kind asks (build() gives the same tag).
KIND_TAGS = {
    "status": "A1",
    "latest_value": "A2",
    "latest_direction": "A3",
    "change": "B1",
    "yoy_direction": "B2",
    "trend_3": "B3",
    "run_length": "B4",
    "vs_baseline": "B5",
    "is_record": "B6",
    "rank": "B7",
    "top_components": "C1",
    "dominant_component": "C2",
    "component_shares": "C3",
    "major_components": "C4",
    "change_direction": "B2",
    "flagged_periods": "D1",
    "event_type": "D2",
    "cause": "E1",
    "primary_driver": "E2",
    "drivers_evidence": "E4",
    "stakeholders": "E5",
    "secondary_drivers": "E3",
    "guidance": "E6",
    "yoy_comparison": "E7",
    "risks": "F1",
    "outlook_direction": "F2",
    "outlook": "F3",
    "conditional_outlook": "F4",
    "summary": SUMMARY_TAG,
    "evidence": EVIDENCE_TAG,
}


@dataclass
class Vocabulary:
    """What the questions of one scenario are about."""

    value: str
    value_desc: str
    unit: str
    decimals: int
    status_name: str
    labels: list[str]
    edges: list[float]
    persistence: int
    issuer_status: bool  # the issuer's own status call (persistence and its outlook): truth from the release
    flat: float  # |change| below this is "flat"
    periods_per_year: int
    baseline_window: int
    record_window: int
    event_baseline: int
    event_window: int
    event_z: float
    drivers: list[str] = field(default_factory=list)
    components: list[str] = field(default_factory=list)  # columns
    component_names: list[str] = field(default_factory=list)
    stances: list[str] = field(default_factory=list)
    guidance_about: str = ""
    period_word: str = "period"
    issuer_view: bool = False  # medium/hard synthetic: B/C/D fields as the issuer reports them
    stakeholders: list[str] = field(default_factory=list)
    event_types: list[str] = field(default_factory=list)
    record_releases: int = 7
    series: list[str] = field(default_factory=list)  # the table's series (issuer view: unusual moves)

    def number(self, x: float) -> str:
        return f"{x:.{self.decimals}f}"

    def flat_text(self) -> str:
        return f"{self.flat:.{self.decimals + 1}f}"


def _bands_text(v: Vocabulary) -> str:
    parts = [f"{v.labels[0]} below {v.number(v.edges[0])}"]
    parts += [f"{label} from {v.number(edge)}" for label, edge in zip(v.labels[1:], v.edges)]
    return ", ".join(parts)


def _tol(v: Vocabulary) -> float:
    return round(10**-v.decimals, v.decimals)


def _status(v: Vocabulary) -> FieldSpec:
    rule = {"kind": "bands", "column": v.value, "edges": v.edges, "labels": v.labels, "persistence": v.persistence}
    persistence = (
        f" A new status is issued only after {v.persistence} consecutive {v.period_word}s in its band; "
        "until then the previous status stands."
        if v.persistence > 1
        else ""
    )
    early = (
        " The issuer applies this rule with its own outlook: it may issue a move early, or hold the status, "
        "when its outlook anticipates the band."
        if v.issuer_status
        else ""
    )
    return FieldSpec(
        "status",
        "A1",
        "label",
        f"What is this {v.period_word}'s {v.status_name}? Bands of the latest {v.value}: {_bands_text(v)}.{persistence}{early}",
        {"type": "string", "enum": list(v.labels)},
        derive=None if v.issuer_status else rule,
        note="label match" + ("; truth from the withheld release" if v.issuer_status else ""),
    )


def build(kind: str, v: Vocabulary) -> FieldSpec:
    """The FieldSpec of one question kind for a scenario's vocabulary."""
    tol = _tol(v)
    number = {"type": "number"}
    col = v.value
    comps = {"columns": v.components, "names": v.component_names}
    if kind == "status":
        return _status(v)
    if v.issuer_view or kind in ISSUER_ONLY:
        from tsbench.tasks.timesage.sources.catalog_issuer import build_issuer

        built = build_issuer(kind, v)
        if built is not None:
            return built
    if kind == "latest_value":
        return FieldSpec(
            "latest_value",
            "A2",
            "numeric",
            f"What is the latest {v.value_desc} ({v.unit})?",
            number,
            abs_tol=tol,
            derive={"kind": "latest", "column": col, "decimals": v.decimals},
            note=f"numeric, abs tolerance {tol}",
        )
    if kind == "latest_direction":
        return FieldSpec(
            "latest_direction",
            "A3",
            "label",
            f"Did {col} rise, fall or stay flat since the previous {v.period_word}? "
            f"Flat when the absolute change is below {v.flat_text()}.",
            {"type": "string", "enum": DIRECTIONS},
            derive={"kind": "direction", "column": col, "lag": 1, "flat": v.flat},
            note="label match",
        )
    if kind == "change":
        return FieldSpec(
            "change",
            "B1",
            "numeric",
            f"What is the change in {col} from the previous {v.period_word}?",
            number,
            abs_tol=tol,
            derive={"kind": "change", "column": col, "lag": 1, "decimals": v.decimals},
            note=f"numeric, abs tolerance {tol}",
        )
    if kind == "yoy_direction":
        return FieldSpec(
            "yoy_direction",
            "B2",
            "label",
            f"Is {col} up, down or flat against the same {v.period_word} one year earlier "
            f"({v.periods_per_year} {v.period_word}s back)? Flat when the absolute change is below {v.flat_text()}.",
            {"type": "string", "enum": DIRECTIONS},
            derive={"kind": "direction", "column": col, "lag": v.periods_per_year, "flat": v.flat},
            note="label match",
        )
    if kind == "trend_3":
        return FieldSpec(
            "trend_3",
            "B3",
            "numeric",
            f"What is the change in {col} over the last three {v.period_word}s "
            f"(latest minus the value three {v.period_word}s earlier)?",
            number,
            abs_tol=tol,
            derive={"kind": "change", "column": col, "lag": 3, "decimals": v.decimals},
            note=f"numeric, abs tolerance {tol}",
        )
    if kind == "run_length":
        threshold = v.edges[len(v.edges) // 2]
        return FieldSpec(
            "run_length",
            "B4",
            "numeric",
            f"For how many consecutive {v.period_word}s, ending with this one, has {col} stayed on the "
            f"current side of {v.number(threshold)} (at or above, or below)?",
            {"type": "integer", "minimum": 1},
            derive={"kind": "run_length", "column": col, "threshold": threshold},
            note="numeric, exact",
        )
    if kind == "vs_baseline":
        return FieldSpec(
            "vs_baseline",
            "B5",
            "numeric",
            f"What is the deviation of the latest {col} from the mean of the previous "
            f"{v.baseline_window} {v.period_word}s?",
            number,
            abs_tol=tol,
            derive={"kind": "baseline_dev", "column": col, "window": v.baseline_window, "decimals": v.decimals},
            note=f"numeric, abs tolerance {tol}",
        )
    if kind == "is_record":
        return FieldSpec(
            "is_record",
            "B6",
            "boolean",
            f"Is the latest {col} the highest of the last {v.record_window} {v.period_word}s (ties count)?",
            {"type": "boolean"},
            derive={"kind": "record", "column": col, "window": v.record_window},
            note="boolean match",
        )
    if kind == "rank":
        return FieldSpec(
            "rank",
            "B7",
            "numeric",
            f"What is the rank of the latest {col} among the last {v.record_window} {v.period_word}s "
            "(1 = highest; rank = 1 + the number of strictly higher values)?",
            {"type": "integer", "minimum": 1},
            derive={"kind": "rank", "column": col, "window": v.record_window},
            note="numeric, exact",
        )
    if kind == "top_components":
        return FieldSpec(
            "top_components",
            "C1",
            "set",
            f"Which two components ({', '.join(v.component_names)}) have the largest latest values?",
            {"type": "array", "items": {"type": "string", "enum": v.component_names}},
            derive={"kind": "top_components", **comps, "n": 2},
            note="set overlap (Dice)",
        )
    if kind == "dominant_component":
        return FieldSpec(
            "dominant_component",
            "C2",
            "label",
            f"Which single component ({', '.join(v.component_names)}) is largest this {v.period_word}?",
            {"type": "string", "enum": v.component_names},
            derive={"kind": "dominant", **comps},
            note="label match",
        )
    if kind == "component_shares":
        return FieldSpec(
            "component_shares",
            "C3",
            "itemwise",
            f"What share (%) of the four-component total does each component hold this {v.period_word}? One decimal.",
            {
                "type": "object",
                "properties": {n: number for n in v.component_names},
                "required": list(v.component_names),
            },
            value_rule={"rule": "numeric", "abs_tol": 0.15},
            derive={"kind": "shares", **comps, "decimals": 1},
            note="item-wise: each share numeric, abs tolerance 0.15",
        )
    if kind == "major_components":
        return FieldSpec(
            "major_components",
            "C4",
            "set",
            "Which components fall in the 'major' bucket (a share of at least 25 % of the total)?",
            {"type": "array", "items": {"type": "string", "enum": v.component_names}},
            derive={"kind": "buckets", **comps, "threshold": 25.0},
            note="set overlap (Dice)",
        )
    if kind == "flagged_periods":
        rule = {
            "kind": "flag_events",
            "column": col,
            "window": v.event_window,
            "baseline": v.event_baseline,
            "z": v.event_z,
        }
        return FieldSpec(
            "flagged_periods",
            "D1",
            "set",
            f"Which of the last {v.event_window} {v.period_word}s (by date label) show an unusual change "
            f"in {col}? A change is unusual when its robust z-score against the {v.event_baseline} "
            f"changes before it (median, 1.4826 x MAD) exceeds {v.event_z} in absolute value.",
            {"type": "array", "items": {"type": "string"}},
            derive=rule,
            note="set overlap (Dice)",
        )
    if kind == "event_type":
        return FieldSpec(
            "event_type",
            "D2",
            "label",
            f"Is this {v.period_word}'s change in {col} a spike, a dip or neither? Robust z-score of the "
            f"change against the {v.event_baseline} changes before it, threshold {v.event_z}.",
            {"type": "string", "enum": EVENT_CLASSES},
            derive={"kind": "event_class", "column": col, "baseline": v.event_baseline, "z": v.event_z},
            note="label match",
        )
    if kind == "primary_driver":
        return FieldSpec(
            "primary_driver",
            "E2",
            "label",
            f"Which driver ({', '.join(v.drivers)}) will the release name as the primary driver of this "
            f"{v.period_word}'s change in {col}?",
            {"type": "string", "enum": v.drivers},
            note="label match; truth from the withheld release",
        )
    if kind == "secondary_drivers":
        return FieldSpec(
            "secondary_drivers",
            "E3",
            "set",
            "Which drivers will the release name as secondary drivers (possibly none)?",
            {"type": "array", "items": {"type": "string", "enum": v.drivers}},
            note="set overlap (Dice); truth from the withheld release",
        )
    if kind == "guidance":
        return FieldSpec(
            "guidance",
            "E6",
            "joint",
            f"What guidance on {v.guidance_about} will the issuer give ({', '.join(v.stances)}), and for "
            f"how many {v.period_word}s ahead?",
            {
                "type": "object",
                "properties": {
                    "stance": {"type": "string", "enum": v.stances},
                    "horizon": {"type": "integer", "minimum": 1},
                },
                "required": ["stance", "horizon"],
            },
            parts={"stance": {"rule": "label"}, "horizon": {"rule": "numeric"}},
            note="joint: stance label and horizon exact; truth from the withheld release",
        )
    if kind == "yoy_comparison":
        return FieldSpec(
            "yoy_comparison",
            "E7",
            "joint",
            f"Compare {col} with the same {v.period_word} a year earlier: give that {v.period_word}'s "
            f"date label ({v.periods_per_year} rows back) and the direction (flat below {v.flat_text()}).",
            {
                "type": "object",
                "properties": {"reference": {"type": "string"}, "direction": {"type": "string", "enum": DIRECTIONS}},
                "required": ["reference", "direction"],
            },
            parts={"reference": {"rule": "label"}, "direction": {"rule": "label"}},
            derive={"kind": "yoy", "column": col, "lag": v.periods_per_year, "flat": v.flat},
            note="joint: reference label and direction",
        )
    if kind == "risks":
        return FieldSpec(
            "risks",
            "F1",
            "itemwise",
            'Which forward risks will the release list? Each as {"risk": "<driver>_upside|downside", '
            '"evidence": "<the reading that supports it>"}.',
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"risk": {"type": "string"}, "evidence": {"type": "string"}},
                    "required": ["risk"],
                },
            },
            item_key="risk",
            note="item-wise on the risk names; truth from the withheld release",
        )
    if kind == "outlook_direction":
        return FieldSpec(
            "outlook_direction",
            "F2",
            "label",
            f"What direction will the release give as its outlook for {col} next {v.period_word}?",
            {"type": "string", "enum": DIRECTIONS},
            note="label match; truth from the withheld release",
        )
    if kind == "outlook":
        return FieldSpec(
            "outlook",
            "F3",
            "joint",
            f"What regime ({', '.join(v.labels)}) will the release expect, with what probability (%) "
            f"and over how many {v.period_word}s?",
            {
                "type": "object",
                "properties": {
                    "regime": {"type": "string", "enum": v.labels},
                    "probability": {"type": "number", "minimum": 0, "maximum": 100},
                    "horizon": {"type": "integer", "minimum": 1},
                },
                "required": ["regime", "probability", "horizon"],
            },
            parts={
                "regime": {"rule": "label"},
                "probability": {"rule": "numeric", "abs_tol": 10.0},
                "horizon": {"rule": "numeric"},
            },
            note="joint: regime label, probability within 10 points, horizon exact; truth from the withheld release",
        )
    if kind == "summary":
        return FieldSpec(
            "summary",
            SUMMARY_TAG,
            "judge",
            f"Summarise this {v.period_word}'s state and its evidence in two sentences.",
            {"type": "string"},
            note="judged through keypoint coverage",
        )
    if kind == "evidence":
        return FieldSpec(
            "evidence",
            EVIDENCE_TAG,
            "judge",
            "List the evidence you relied on: CSV cells (e.g. 'timeseries.csv:<date>:<column>') and prior "
            "release files.",
            {"type": "array", "items": {"type": "string"}},
            note="judged through faithfulness and quality",
        )
    raise ValueError(f"unknown question kind {kind!r}")


PRIOR_KEYPOINT = "kp_prior_driver"
PRIOR_SUBJECT = ["previous release", "prior release", "last release", "gt_source"]


def keypoints_for(fields: list[FieldSpec], status_name: str, tier: str) -> list[KeypointSpec]:
    """One keypoint per scored field (the paper's keypoints are the answer schema's facts, A.4.1), plus,
    in the medium and hard tiers, the worked example's prior-document keypoint (spec example
    `kp_driver`): a driver the previous release named. Bound to its subject like every keypoint: the
    report must attribute the driver to the prior release. Easy (state identification from the
    current data) has none."""
    out = [
        KeypointSpec(
            f"kp_{f.name}",
            f.question.split("?")[0].strip(),
            f"Does the report state {f.name.replace('_', ' ')}?",
            field=f.name,
            subject=[f.name.replace("_", " "), *([status_name, "status"] if f.tag == "A1" else [])],
        )
        for f in fields
        if f.in_accuracy
    ]
    if tier != "easy":
        out.append(
            KeypointSpec(
                PRIOR_KEYPOINT,
                "one driver named in the prior release",
                "Does the report cite a driver from a prior document, attributed to that document?",
                subject=list(PRIOR_SUBJECT),
            )
        )
    return out
