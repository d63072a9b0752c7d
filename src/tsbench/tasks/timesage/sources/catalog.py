"""The field catalogue: every question kind's FieldSpec (tag, rule, question text, JSON schema,
tolerance, derivation rule) is an entry of catalog.toml, filled in from a scenario's vocabulary.

Questions state their rule in words so a reader of the prompt (model or person) knows exactly what
is asked; the same rule is in answer_schema.json as `x-rule`. Issuer fields (`derive` None) are
what the withheld release will say: prior releases show how the issuer decides.
"""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from tsbench.tasks.timesage.contract import FieldSpec, KeypointSpec


@cache
def catalogue() -> dict[str, Any]:
    with Path(__file__).with_name("catalog.toml").open("rb") as file:
        return tomllib.load(file)


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


def _context(v: Vocabulary) -> dict[str, Any]:
    """The names catalog.toml's entries use: the vocabulary's fields and the texts made from them."""
    ctx = {f: getattr(v, f) for f in v.__dataclass_fields__}
    threshold = v.edges[len(v.edges) // 2]
    bands = [f"{v.labels[0]} below {v.number(v.edges[0])}"]
    bands += [f"{label} from {v.number(edge)}" for label, edge in zip(v.labels[1:], v.edges)]
    ctx.update(
        col=v.value,
        tol=round(10**-v.decimals, v.decimals),
        flat_text=v.flat_text(),
        bands=", ".join(bands),
        threshold=threshold,
        threshold_text=v.number(threshold),
        adjusted=f"the adjusted {v.value} (as the release publishes it)",
        component_numbers={n: {"type": "number"} for n in v.component_names},
        event_choices=[*v.event_types, "unannounced", "none"],
        releases=v.record_releases,
        releases_before=v.record_releases - 1,
        persistence_rule="",
    )
    for name in ("component_names", "drivers", "stances", "labels", "stakeholders", "series"):
        ctx[f"{name}_text"] = ", ".join(getattr(v, name))
    if v.persistence > 1:
        ctx["persistence_rule"] = catalogue()["text"]["persistence"].format_map(ctx)
    return ctx


def _fill(value: Any, ctx: dict[str, Any]) -> Any:
    if isinstance(value, str) and value.startswith("$"):
        return copy.deepcopy(ctx[value[1:]])
    if isinstance(value, dict):
        return {k: _fill(x, ctx) for k, x in value.items()}
    if isinstance(value, list):
        return [_fill(x, ctx) for x in value]
    return value


def build(kind: str, v: Vocabulary) -> FieldSpec:
    """The FieldSpec of one question kind for a scenario's vocabulary: the issuer's entry where the
    issuer decides (its status call, its view) or where no table rule answers the kind (only the
    issuer's releases can), else the table rule."""
    views = catalogue()
    issuer = v.issuer_status if kind == "status" else v.issuer_view
    entry = (issuer and views["issuer"].get(kind)) or views["table"].get(kind) or views["issuer"].get(kind)
    if entry is None:
        raise ValueError(f"unknown question kind {kind!r}")
    ctx = _context(v)
    spec = {k: x.format_map(ctx) if k in ("question", "note") else _fill(x, ctx) for k, x in entry.items()}
    return FieldSpec(**{"name": kind, **spec})


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
