"""Honest report writers in the notations the adversarial suite's other writers do not use (issue 45):
the same values, so the truth must score as well in each as in prose.

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
from tsbench.baselines.timesage_styles import _said, _stated, _tail, hard_note
from tsbench.tasks.timesage.contract import TABLE_FILE

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


def _grouped(value: float, decimals: int = 3) -> str:
    text = f"{value:,.{decimals}f}".rstrip("0").rstrip(".")
    return text


def _with_units(prose: str, gold: dict, values: dict) -> str:
    unit = _unit(gold) or _headline_unit(gold)
    for f in gold["fields"]:
        value = values.get(f["name"])
        if f["tag"] not in _SCALED_TAGS or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        moved = _rescaled(float(value), unit)
        if moved is None:
            continue
        said = f"{value:g} {unit}".strip()
        figure, other = moved
        if said in prose:
            prose = prose.replace(said, f"{_grouped(figure)} {other}".strip(), 1)
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
    unit = _unit(gold) or _headline_unit(gold)
    words = unit.split()
    for f in gold["fields"]:
        value = values.get(f["name"])
        if f["tag"] not in _SCALED_TAGS or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
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
