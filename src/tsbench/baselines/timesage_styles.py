"""Honest report writers in the notations analysts use besides running prose (the adversarial suite's
style writers, timesage_writers.py): the same values, so the truth must score as well in each.

- `bullets`: a markdown list, one keypoint per bullet ("- **Latest value**: 849.9 million lb");
- `table`: a markdown table of the previous release's values beside this release's;
- `qa`: each question restated, its answer after it;
- `styled`: prose with counts and ranks in words, dates with month names, a probability as a fraction,
  hedging words ("about") before figures, and each label stated with what it is not.
"""

from __future__ import annotations

import re
from typing import Any

from tsbench.baselines.timesage_calibration import _unit
from tsbench.tasks.timesage.contract import TABLE_FILE

STYLES = ("bullets", "table", "qa", "styled")
_WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()
_ORDINALS = "zeroth first second third fourth fifth sixth seventh eighth ninth tenth".split()
_MONTHS = "January February March April May June July August September October November December".split()


def _said(value: Any, unit: str = "") -> str:
    """A value as a writer puts it in a cell or after a label."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {_said(v)}" for k, v in value.items())
    if isinstance(value, list):
        if value and isinstance(value[0], dict):
            return ", ".join(f"{v.get('driver') or v.get('risk')} ({v.get('evidence', '')})" for v in value)
        return ", ".join(map(str, value)) if value else "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return f"{value:g} {unit}".strip()
    return str(value)


def _stated(gold: dict, values: dict) -> list[tuple[dict, Any, str]]:
    """(field, value, its text) for each answered field a report states."""
    unit = _unit(gold)
    out = []
    for f in gold["fields"]:
        value = values.get(f["name"])
        if value is None or f["tag"] in ("summary", "evidence"):
            continue
        out.append((f, value, _said(value, unit if f["tag"] == "A2" else "")))
    return out


def _tail(gold: dict, reads: dict) -> list[str]:
    """The prior release's driver, the sources and, on the hard tier, the outlook's confidence and a risk."""
    docs = gold.get("prior_docs") or []
    lines = []
    if reads.get("prior_driver") and docs:
        lines.append(f"The previous release ({docs[-1]}) named {reads['prior_driver']} as a driver.")
    lines.append(f"Evidence: {TABLE_FILE}" + (f" and {docs[-1]}" if docs else "") + ".")
    return lines + hard_note(gold, reads)


def hard_note(gold: dict, reads: dict) -> list[str]:
    """What a hard-tier note adds: a risk, and the outlook's confidence as the release the policy read states it."""
    if gold["tier"] != "hard":
        return []
    facts = reads.get("release") or {}
    lines = ["The main risk is that the drivers reverse, so uncertainty remains (timeseries.csv)."]
    if facts.get("confidence"):
        lines.append(f"The outlook ({facts.get('direction', 'as stated')}) carries {facts['confidence']} % confidence.")
    return lines


def _title(field: dict) -> str:
    return field["name"].replace("_", " ")


def bullets(gold: dict, values: dict, reads: dict) -> str:
    lines = [f"**{gold['period_label']}: release analysis**", ""]
    lines += [f"- **{_title(f).capitalize()}**: {text}" for f, _, text in _stated(gold, values)]
    return "\n".join(lines + ["- " + line for line in _tail(gold, reads)])


def table(gold: dict, values: dict, reads: dict) -> str:
    """This release's values in a column beside the previous release's (what the last release stated)."""
    before = gold.get("prior_truth") or {}
    docs = gold.get("prior_docs") or []
    last = docs[-1].split("/")[-1].rsplit(".", 1)[0] if docs else "previous"
    lines = [
        f"Analysis for {gold['period_label']}.",
        "",
        f"| item | previous release ({last}) | this release ({gold['period_label']}) |",
        "|---|---|---|",
    ]
    for f, _, text in _stated(gold, values):
        earlier = before.get(f["name"])
        lines.append(f"| {_title(f)} | {'-' if earlier is None else _said(earlier)} | {text} |")
    return "\n".join([*lines, "", *_tail(gold, reads)])


def qa(gold: dict, values: dict, reads: dict) -> str:
    lines = [f"Answers for {gold['period_label']}."]
    lines += [f"{f['question'].split('?')[0].strip()}? {text}." for f, _, text in _stated(gold, values)]
    return " ".join(lines + _tail(gold, reads))


def _in_words(text: str) -> str:
    """Counts and ranks in words, ISO dates with month names (not in file names)."""
    text = re.sub(
        r"\b(\d{1,2})(?= (?:consecutive |straight )?(?:releases?|months?|weeks?|days?|periods?)\b)",
        lambda m: _WORDS[int(m.group(1))] if int(m.group(1)) < len(_WORDS) else m.group(1),
        text,
    )
    text = re.sub(r"\b(ranks|ranked|places) (\d)\b", lambda m: f"{m.group(1)} {_ORDINALS[int(m.group(2))]}", text)

    def month(m: re.Match) -> str:
        name = f"{_MONTHS[int(m.group(2)) - 1]} {m.group(1)}"
        return f"{int(m.group(3)[1:])} {name}" if m.group(3) else name

    return re.sub(r"(?<![\w/])(\d{4})-(\d{2})(-\d{2})?(?![\w.-])", month, text)


def styled(gold: dict, values: dict, reads: dict, prose: str) -> str:
    """`prose` (an analyst's note of the values) rewritten in the module docstring's notations."""
    text = re.sub(
        r"(\d+(?:\.\d+)?) % (probability|chance|likely)", lambda m: f"{float(m.group(1)) / 100:g} {m.group(2)}", prose
    )
    text = re.sub(r"\b(at|by|of|is) ([-+]?\d[\d.]*)(?![\d-])", r"\1 about \2", text)
    contrasts = []
    for f, value, _ in _stated(gold, values):
        options = [str(o) for o in (f.get("schema") or {}).get("enum") or []]
        other = next((o for o in options if o != value), None)
        if isinstance(value, str) and other:
            contrasts.append(f"To be clear, the {_title(f)} is {value}, not {other}.")
    return _in_words(text + " " + " ".join(contrasts))
