"""Honest report writers in the notations analysts use besides running prose (the adversarial suite's
style and notation writers, timesage_writers.py, issue 45): the same values, so the truth must score as
well in each as in prose.

Styles (STYLES):
- `bullets`: a markdown list, one keypoint per bullet ("- **Latest value**: 849.9 million lb");
- `table`: a markdown table of the previous release's values beside this release's;
- `qa`: each question restated, its answer after it;
- `styled`: prose with counts and ranks in words, dates with month names, a probability as a fraction,
  hedging words ("about") before figures, and each label stated with what it is not.
Notations (NOTATIONS):
- `json`: one JSON object (field -> value, the previous release's driver under "previous_release");
- `json_lines`: the same object indented, every list split one item per line;
- `csv`: a long table, "field,value" (a list in one quoted cell, an object one row per part);
- `tsv`: a wide table, the fields as the header and one row of values, tab-separated;
- `kv`: "field = value" lines;
- `units`: prose with the headline figures in another scale of the unit (849,900 thousand lb for
  849.9 million lb; 48,100 MW for 48.1 GW; 4.21 million for 4,210 thousand);
- `decimal_comma`: prose with decimal commas and dots grouping thousands (1.234,5);
- `scale`: prose with the figures' scale written as a suffix (849.9m lb, 4.21m, 1.2k);
- `natural`: each question turned into a statement in the scenario's own words ("The latest total
  frozen meat stocks (million lb) is 844.9 million lb"), no field names.
"""

from __future__ import annotations

import csv
import io
import json
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


NOTATIONS = ("json", "json_lines", "csv", "tsv", "kv", "units", "decimal_comma", "scale", "natural")
_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9}
_SCALED_TAGS = ("A2", "B1", "B3", "B5")  # figures written in the headline's unit


def _record(gold: dict, values: dict, reads: dict) -> dict[str, Any]:
    out: dict[str, Any] = {"period": gold["period_label"]}
    unit = _unit(gold)
    for f, value, _ in _stated(gold, values):
        out[f["name"]] = {"value": value, "unit": unit} if f["tag"] == "A2" and unit else value
    docs = gold.get("prior_docs") or []
    if reads.get("prior_driver") and docs:
        out["previous_release"] = {"file": docs[-1], "primary_driver": reads["prior_driver"]}
    out["sources"] = [TABLE_FILE, *docs[-1:]]
    if hard_note(gold, reads):
        out["notes"] = hard_note(gold, reads)
    return out


def _rows(gold: dict, values: dict, reads: dict) -> list[tuple[str, str]]:
    """(field, value as a cell) pairs: a list in one cell ("a; b"), an object one row per part."""
    rows = [("period", gold["period_label"])]
    for f, value, text in _stated(gold, values):
        if isinstance(value, dict):
            rows += [(f"{f['name']} {k}", _said(v)) for k, v in value.items()]
        elif isinstance(value, list):
            rows.append(
                (
                    f["name"],
                    text.replace(", ", "; ")
                    if value and isinstance(value[0], dict)
                    else "; ".join(map(str, value)) or "none",
                )
            )
        else:
            rows.append((f["name"], text))
    docs = gold.get("prior_docs") or []
    if reads.get("prior_driver") and docs:
        rows.append(("previous release primary driver", str(reads["prior_driver"])))
    rows.append(("sources", f"{TABLE_FILE}; {docs[-1]}" if docs else TABLE_FILE))
    rows += [("note", line) for line in hard_note(gold, reads)]
    return rows


def _table_text(rows: list[list[str]], delimiter: str) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=delimiter, lineterminator="\n").writerows(rows)
    return buffer.getvalue().strip()


def _rescaled(value: float, unit: str) -> tuple[float, str] | None:
    """The value in another scale of its unit, and that unit (None: the unit has no other scale)."""
    words = unit.split()
    if words and words[0] in _SCALES:
        lower = {"million": "thousand", "billion": "million", "thousand": ""}[words[0]]
        if not lower:
            return value / 1e3, " ".join(["million", *words[1:]])
        return value * 1e3, " ".join([lower, *words[1:]])
    if re.fullmatch(r"[kMG](W|Wh|t)", unit):
        lower = {"k": "", "M": "k", "G": "M"}[unit[0]]
        return value * 1e3, lower + unit[1:]
    return None


def _figures(gold: dict, values: dict) -> tuple[str, list[float]]:
    """The headline's unit and the answer's figures written in it (_SCALED_TAGS)."""
    figures = [values.get(f["name"]) for f in gold["fields"] if f["tag"] in _SCALED_TAGS]
    numbers = [x for x in figures if isinstance(x, (int, float)) and not isinstance(x, bool)]
    return _unit(gold) or _headline_unit(gold), numbers


def _with_units(prose: str, gold: dict, values: dict) -> str:
    unit, figures = _figures(gold, values)
    for value in figures:
        moved = _rescaled(float(value), unit)
        said = f"{value:g} {unit}".strip()
        if moved is not None and said in prose:
            figure, other = moved
            prose = prose.replace(said, f"{f'{figure:,.3f}'.rstrip('0').rstrip('.')} {other}".strip(), 1)
    return prose


def _headline_unit(gold: dict) -> str:
    from tsbench.tasks.timesage.subjects import headline, table_columns

    columns = table_columns(gold)
    head = headline(columns, gold["fields"])
    found = re.search(r"\(([^()]*)\)\s*$", columns.get(head, "")) if head else None
    return found.group(1) if found else ""


def _decimal_comma(prose: str) -> str:
    def swap(m: re.Match) -> str:
        whole, _, part = m.group(0).partition(".")
        return f"{int(whole.replace(',', '')):,}".replace(",", ".") + ("," + part if part else "")

    return re.sub(r"(?<![\w./])\d[\d,]*\.\d+(?![\w./-]*\d)|(?<![\w./-])\d{4,}(?![\w./-]*\d)", swap, prose)


def _suffixed(prose: str, gold: dict, values: dict) -> str:
    unit, figures = _figures(gold, values)
    words = unit.split()
    for value in figures:
        said = f"{value:g} {unit}".strip()
        if words and words[0] in _SCALES and said in prose:
            suffix = {"thousand": "k", "million": "m", "billion": "bn"}[words[0]]
            prose = prose.replace(said, f"{value:g}{suffix} {' '.join(words[1:])}".strip(), 1)
        elif not words and abs(value) >= 1000 and f"{value:g}" in prose:
            prose = prose.replace(f"{value:g}", f"{value / 1e3:g}k", 1)
    return prose


_ASKED = re.compile(
    r"^(?:what|which|how|is|does|did|will|for how many)\b\s*(?:is|was|are|will|does)?\s*(?:the\s+)?", re.IGNORECASE
)


def _statement(question: str, text: str) -> str:
    """A question turned into a statement of its answer, in the question's own words."""
    head = re.sub(r"\s*\([^()]*\)", "", question.split("?")[0]).strip()
    head = re.sub(r"^in one short phrase,\s*", "", head, flags=re.IGNORECASE)
    head = re.sub(r"\b(?:\w+, )+\w+,? or (?:stay )?\w+\b|\b\w+ or \w+\b", "", head)  # the options it offers
    phrase = _ASKED.sub("", head).strip()
    phrase = re.sub(r"^(?:this (?:release|month|week|day)'s)\s+", "", phrase)
    return f"As for the {phrase}: {text}."


def natural(gold: dict, values: dict, reads: dict) -> str:
    lines = [f"Here is my reading of the {gold['period_label']} release."]
    lines += [_statement(f["question"], text) for f, _, text in _stated(gold, values)]
    return " ".join(lines + _tail(gold, reads))


def write_notation(kind: str, gold: dict, values: dict, reads: dict, prose: str) -> str:
    """The report `kind` (NOTATIONS) writes; `prose` is the plain analyst's note the prose notations rewrite."""
    if kind in ("json", "json_lines"):
        return json.dumps(_record(gold, values, reads), indent=2 if kind == "json_lines" else None)
    if kind == "csv":
        return _table_text([["field", "value"], *map(list, _rows(gold, values, reads))], ",")
    if kind == "tsv":
        rows = _rows(gold, values, reads)
        return _table_text([[k for k, _ in rows], [v for _, v in rows]], "\t")
    if kind == "kv":
        return "\n".join(f"{k} = {v}" for k, v in _rows(gold, values, reads))
    if kind == "units":
        return _with_units(prose, gold, values)
    if kind == "decimal_comma":
        return _decimal_comma(prose)
    if kind == "scale":
        return _suffixed(prose, gold, values)
    if kind == "natural":
        return natural(gold, values, reads)
    raise ValueError(f"unknown notation {kind!r}")
