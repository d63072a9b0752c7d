"""The fixed vocabularies: the 27 question tags in six families (paper Table 6), the scoring rule
each tag takes (Table 7), the domains, cadences and tiers, and the tier coverage rule (A.3.2 Step 5)."""

from __future__ import annotations

from collections.abc import Iterable

DOMAINS = ("agriculture", "climate", "energy", "finance", "healthcare", "transportation")
CADENCES = ("monthly", "weekly", "daily", "irregular")
TIERS = ("easy", "medium", "hard")

FAMILY_NAMES = {  # letter: (name, short name)
    "A": ("State identification", "State ID"),
    "B": ("Change detection", "Change Det."),
    "C": ("Composition identification", "Comp. ID"),
    "D": ("Event detection", "Event Det."),
    "E": ("Attribution", "Attribution"),
    "F": ("Outlook", "Forecast"),
}
FAMILIES = {letter: name for letter, (name, _) in FAMILY_NAMES.items()}
FAMILY_SHORT = {letter: short for letter, (_, short) in FAMILY_NAMES.items()}

TAGS = {
    "A1": "The current categorical state of the target.",
    "A2": "The latest reported value.",
    "A3": "The direction of the latest reading (up / down / flat).",
    "B1": "The change from the previous period.",
    "B2": "The direction of the period-over-period change.",
    "B3": "The magnitude of the recent multi-period trend.",
    "B4": "How many consecutive periods the trend has lasted.",
    "B5": "The deviation from a declared baseline (e.g., five-year average).",
    "B6": "Whether this period is a record extremum within a time window.",
    "B7": "The ordinal rank of this period within its history.",
    "C1": "The set of leading contributors (top-N).",
    "C2": "The single dominant contributor.",
    "C3": "The breakdown of the whole into components with their values or shares.",
    "C4": "The assignment of entities into named buckets.",
    "D1": "The anomalies or unusual values flagged this period.",
    "D2": "The classification or enumeration of discrete events.",
    "E1": "The single cause attributed to the change.",
    "E2": "The primary driver among several.",
    "E3": "The secondary drivers.",
    "E4": "The set of drivers, each paired with traceable evidence.",
    "E5": "The stakeholders affected by the change.",
    "E6": "The issuer's forward guidance or committed response.",
    "E7": "A comparison with a named earlier period or season.",
    "F1": "The forward risks, paired with traceable evidence.",
    "F2": "The direction, regime, or tone of the outlook.",
    "F3": "The outlook with its confidence and horizon.",
    "F4": 'A conditional outlook ("if X, then Y").',
}
SUMMARY_TAG = "summary"
EVIDENCE_TAG = "evidence"

# The scoring rules a field may take (Table 11 primitives, Table 7 composites). "judge" fields are
# judged by the coverage judge when they have a textual truth, and left out of accuracy when not.
RULES = ("label", "boolean", "text", "numeric", "set", "judge", "joint", "itemwise")
RULES_BY_TAG = {
    "label": {"A1", "A3", "B2", "C2", "D2", "E1", "E2", "E5", "F2"},
    "boolean": {"B6"},
    "numeric": {"A2", "B1", "B3", "B4", "B5", "B7"},
    "set": {"C1", "C4", "D1", "D2", "E3", "E5"},
    "judge": {"E1", SUMMARY_TAG, EVIDENCE_TAG},
    "joint": {"E6", "E7", "F3", "F4"},
    "itemwise": {"C3", "E4", "F1"},
}


def family_of(tag: str) -> str | None:
    """ "A".."F" for a taxonomy tag; None for summary and evidence fields."""
    return tag[0] if tag in TAGS else None


def rule_allowed(tag: str, rule: str) -> bool:
    """Whether Table 7 lets a field of this tag take this rule (text matching is allowed for any
    text-valued tag; boolean for B6, the only yes/no intent)."""
    if rule == "text":
        return tag in TAGS or tag in (SUMMARY_TAG, EVIDENCE_TAG)
    return tag in RULES_BY_TAG.get(rule, set())


# The tier coverage rule (A.3.2 Step 5): tier -> (families, how many of their fields at least, in words,
# the summary / evidence fields it needs)
COVERAGE = {
    "easy": (("A",), 1, "at least one family-A field", ()),
    "medium": (("A", "B", "C", "D"), 3, "at least three fields across families A-D", (SUMMARY_TAG,)),
    "hard": (("D", "E", "F"), 3, "at least three fields across families E/F/D", (SUMMARY_TAG, EVIDENCE_TAG)),
}
NEEDED = {SUMMARY_TAG: "a summary field", EVIDENCE_TAG: "a cited-evidence field"}


def coverage_problems(tier: str, tags: Iterable[str]) -> list[str]:
    """Why a scenario's fields do not meet its tier's coverage rule (COVERAGE; empty when they do)."""
    if tier not in COVERAGE:
        return [f"unknown tier {tier!r}"]
    families, least, fields, needed = COVERAGE[tier]
    tags = list(tags)
    problems = [f"{tier} needs {fields}"] if sum(family_of(t) in families for t in tags) < least else []
    return problems + [f"{tier} needs {NEEDED[tag]}" for tag in needed if tag not in tags]
