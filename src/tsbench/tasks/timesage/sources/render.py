"""Text every source renders the same way: the issuer's release for one period, the quality
rubric of a tier, and the cutoff-valid context excerpts the faithfulness judge checks against."""

from __future__ import annotations

from typing import Any

from tsbench.tasks.timesage.contract import Rubric, Signal

GENRES = {
    "easy": "status bulletin: a short note that states the current state and the reading behind it",
    "medium": "monitoring brief: the state, what changed and how much, composition or events, with evidence",
    "hard": "analytical outlook note: drivers, outlook with confidence, risks, each tied to evidence",
}


def rubric(
    tier: str,
    *,
    status_name: str,
    labels: list[str],
    units: list[str],
    drivers: list[str],
    components: list[str],
    has_status: bool,
) -> Rubric:
    """The tier's rubric; each signal carries the check the offline rules judge applies."""
    required = [Signal("issue period stated", {"kind": "period"})]
    if has_status:
        required.append(Signal(f"{status_name} stated", {"kind": "any", "words": labels}))
    if tier == "easy":
        required.append(Signal("latest value with unit", {"kind": "number_unit", "units": units}))
    elif tier == "medium":
        required += [
            Signal("a change with its magnitude", {"kind": "number"}),
            Signal(
                "direction of change stated",
                {"kind": "any", "words": ["up", "down", "flat", "rose", "fell", "increased", "decreased", "unchanged"]},
            ),
        ]
        if components:
            required.append(
                Signal(
                    "leading component or flagged event named",
                    {"kind": "any", "words": components + ["unusual", "flagged", "no events"]},
                )
            )
    else:
        required += [
            Signal("primary driver named", {"kind": "any", "words": drivers}),
            Signal("outlook with its confidence", {"kind": "percent"}),
            Signal(
                ">= 1 risk or uncertainty with evidence",
                {"kind": "any", "words": ["risk", "risks", "uncertain", "uncertainty", "upside", "downside"]},
            ),
        ]
    required.append(Signal("cites CSV cells or prior-period files", {"kind": "cites"}))
    forbidden = [
        Signal("citing the current period's release", {"kind": "current_doc"}),
        Signal("invented institutional quotes", {"kind": "quotes"}),
    ]
    exemplar = {
        "easy": "Period 2026-05: the status is <label>; the latest reading is <value> <unit> (timeseries.csv, last row), "
        "consistent with the prior release.",
        "medium": "Four to six sentences: state, change and its size, direction, the leading component or flagged "
        "events, each with the CSV cell or prior file it comes from.",
        "hard": "A short note in the issuer's register: primary and secondary drivers with their readings, the outlook "
        "with probability and horizon, the risks with evidence, and the guidance, citing CSV cells and "
        "prior releases.",
    }[tier]
    return Rubric(GENRES[tier], required, forbidden, exemplar)


def context_lines(
    background: str, columns: dict[str, str], rows: list[dict[str, Any]], prior: tuple[str, str] | None
) -> list[str]:
    """Level-2 references: the scenario, the table layout, the last visible rows and the latest
    prior release, all from before the cutoff."""
    lines = [
        f"Scenario background: {background}",
        "Table columns: " + "; ".join(f"{name} = {meaning}" for name, meaning in columns.items()),
    ]
    for row in rows:
        lines.append("Row " + ", ".join(f"{k}={v}" for k, v in row.items()))
    if prior is not None:
        name, text = prior
        body = [line.strip("-*# ").strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
        lines += [f"{name}: {line}" for line in body[:14]]
    return lines


def release_text(state: dict[str, Any]) -> str:
    """The issuer's release for one period, rendered from its state (see issuer.issuer_states).
    Replay states may lack the issuer's own sections; each section is written when present."""
    s = state
    d = s["decimals"]
    lines = [
        f"# {s['release']} — {s['label']}",
        f"Issued by {s['publisher']} for the period {s['label']}. {s['provenance']}",
        "",
        "## Current state",
        f"{s['status_name'].capitalize()}: **{s['status']}**.",
        f"The latest {s['value_desc']} ({s['value']}) is {s['latest']:.{d}f} {s['unit']}, {s['direction']} from "
        f"{s['previous']:.{d}f} {s['unit']} (change {s['change']:+.{d}f}).",
        f"Against the same period a year earlier ({s['yoy_reference']}) the reading is {s['yoy_direction']}.",
    ]
    if "adjusted" in s:
        lines += [
            "",
            "## Adjusted figures",
            f"Adjusted {s['value']}: {s['adjusted']:.{d}f} {s['unit']} (adjustment {s['adjustment']:+.{d}f}), "
            f"{s['adj_direction']} by {s['adj_change']:+.{d}f} from the previous release's adjusted figure; "
            f"three-release change {s['adj_trend_3']:+.{d}f}; the same direction for {s['adj_run']} release(s).",
            f"Against the reference level {s['reference']:.{d}f} the deviation is {s['deviation']:+.{d}f}. "
            f"Rank {s['rank']} of the last seven adjusted figures"
            + {"high": " (the highest).", "low": " (the lowest)."}.get(s["record_kind"], "."),
            f"Adjustment announced for the next period: {s['next_adjustment']:+.{d}f}. Reference level for the "
            f"next period: {s['next_reference']:.{d}f}.",
        ]
    if s.get("shares"):
        lines += [
            "",
            "## Composition",
            f"{s['whole'].capitalize()} (contribution shares): "
            + ", ".join(f"{k} {v:.1f} %" for k, v in s["shares"].items())
            + ".",
            f"The largest contributor is {s['dominant']}.",
        ]
    if s.get("drivers"):
        secondary = ", ".join(s["secondary"]) if s["secondary"] else "none"
        lines += ["", "## Drivers", f"Primary driver: {s['primary']}. Secondary drivers: {secondary}."]
        if s.get("cause"):
            lines.append(f"Main cause: {s['cause']}.")
        lines += [f"- {name}: {value} ({delta:+.2f} since the previous release)" for name, value, delta in s["drivers"]]
        if s.get("stakeholders"):
            via = s.get("stakeholder_of", {})
            moves = {name: delta for name, _, delta in s["drivers"]}
            named = [f"{c} {'rising' if moves.get(c, 0) > 0 else 'falling'}" for c in [s["primary"], *s["secondary"]]]
            lines.append("Stakeholders affected: " + ", ".join(f"{via.get(c, '?')} (through {c})" for c in named) + ".")
    flagged = ", ".join(s["flagged"]) if s["flagged"] else "none"
    lines += ["", "## Events", f"Unusual changes flagged in the last {s['event_window']} periods: {flagged}."]
    if "unusual_series" in s:
        moved = ", ".join(s["unusual_series"]) or "none"
        lines.append(f"Series moving unusually this period: {moved}.")
    if "event_class" in s:
        happened = f"the announced {s['event']} took place" if s.get("event") else s["event_class"]
        lines.append(f"This period's event classification: {s['event_class']} ({happened}).")
        for kind, when in s.get("notices", []):
            lines.append(f"Notice: a {kind} event is expected in {when}.")
    if s.get("outlook_direction") is not None:
        lines += [
            "",
            "## Outlook",
            f"Outlook for the next period: {s['outlook_direction']}. Expected regime: {s['regime']} with "
            f"{s['probability']} % probability over the next {s['outlook_horizon']} periods.",
            f"Guidance on {s['guidance_about']}: {s['stance']} for the next {s['guidance_horizon']} periods.",
        ]
        if s.get("conditional"):
            c = s["conditional"]
            side = "above" if c["if_direction"] == "up" else "below"
            lines.append(
                f"Conditional outlook: if {c['if_driver']} stays {side} its normal ({c['if_direction']}), "
                f"{s['value']} is expected to go {c['then_direction']}."
            )
        lines += ["", "## Risks"]
        lines += [f"- {r['risk']}: {r['evidence']}" for r in s["risks"]] or ["- none flagged"]
    return "\n".join(lines) + "\n"
