"""TimeSage test helpers for what no source writes itself: the tag each question kind asks, and an answer
schema annotated the way a released or snapshot folder may carry it."""

from __future__ import annotations

from typing import Any

from tsbench.tasks.timesage.contract import Scenario
from tsbench.tasks.timesage.sources.catalog import catalogue


def kind_tags() -> dict[str, str]:
    """The taxonomy tag each question kind asks, as catalog.toml states it (build() must give the same)."""
    return {kind: entry["tag"] for view in ("issuer", "table") for kind, entry in catalogue()[view].items()}


def host_schema(scenario: Scenario) -> dict[str, Any]:
    """The agent's answer schema plus each field's scoring rule in words (x-scoring) and the rule that
    derives it from the table (x-rule; {"kind": "issuer"} for the issuer's fields), as a folder in the
    paper's layout may give them."""
    schema = scenario.answer_schema()
    for spec in scenario.fields:
        prop = schema["properties"][spec.name]
        if spec.note:
            prop["x-scoring"] = spec.note
        prop["x-rule"] = spec.derive if spec.derive is not None else {"kind": "issuer"}
    return schema
