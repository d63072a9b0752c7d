"""The period question (paper A.5.1, "Period question prompt"), preceded by the scenario card.

Only what the agent may know goes here: the contract and the period's label. The sandbox
instructions and tools are the harness's; the task rules that name required keys come with the
task's meta, which the harness states in its system prompt.
"""

from __future__ import annotations

from tsbench.tasks.timesage.contract import SCHEMA_FILE, SOURCE_DIR, TABLE_FILE, Period, Scenario


def period_question(scenario: Scenario, period: Period) -> str:
    questions = "\n".join(f"{i}. [{spec.name}] {spec.question}" for i, spec in enumerate(scenario.fields, 1))
    columns = "; ".join(f"{name}: {meaning}" for name, meaning in scenario.columns.items())
    return (
        f"Role: {scenario.role}.\n"
        f"Scenario: {scenario.release_name} by {scenario.publisher} ({scenario.domain}, {scenario.cadence} releases, "
        f"{scenario.tier} tier).\n"
        f"Background: {scenario.background}\n"
        f"Input: {TABLE_FILE}, the cumulative table up to this period ({columns}); {SOURCE_DIR}/<period>.*, the "
        f"releases of prior periods; {SCHEMA_FILE}, the answer schema (types, allowed values, questions).\n\n"
        f"It is now {period.label}. I need an evidence-based analysis for this period's {scenario.release_name}. "
        f"Use {TABLE_FILE} and any prior-period files in {SOURCE_DIR}/. The current-period source document is not "
        "available.\n"
        f"Please answer the following questions:\n{questions}\n"
        f"Return a JSON object conforming to {SCHEMA_FILE} and a concise natural-language report grounded in "
        "cutoff-valid evidence."
    )


def period_meta(scenario: Scenario, period: Period) -> dict:
    """Facts the harness's system prompt states (never truth)."""
    return {
        "family": "timesage",
        "scenario": scenario.id,
        "period": period.label,
        "period_index": period.index,
        **{name: getattr(scenario, name) for name in ("role", "tier", "domain", "cadence", "release_name")},
        "required_keys": scenario.required_keys,
    }
