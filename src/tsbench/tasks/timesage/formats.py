"""A report's structured blocks as the lines a reader reads (judge/rules, before normalise.py): an
honest report in JSON, CSV, TSV or key-value lines states what the same values in prose state.

- JSON (the whole report, a fenced block, or an object/array spanning lines, a list split one item per
  line included): each key path with its value on one line, "key path: value"; a list of names on one
  line ("flagged series: a, b"), a list of objects as its items with their other members in
  parentheses ("risks: x_upside (x at 4.95)"), an object as its members ("outlook: horizon 3,
  probability 85"); keys in camelCase, kebab-case or snake_case read as words. A key that places its
  values in another period ("previous_release", "prior") puts "a period earlier" beside them, so a
  previous release's driver is never read as this period's.
- CSV / TSV (two or more lines with the same count, at least one, of commas, semicolons or tabs
  outside quotes): a long table (a subject per row) becomes a markdown table, read by normalise.py
  with its header's times; a wide table (subjects in the header, one row of values) becomes
  "subject: value" lines.
- key-value lines ("latest_value = 844.9", "status -> tight", "status => tight") become "key: value".
Anything else passes through unchanged.
"""

from __future__ import annotations

import csv
import json
import re
from typing import Any

from tsbench.core.text import balanced_end

_TIME_KEY = re.compile(
    r"\b(?:(?:the )?(?:previous|prior|last|preceding) (?:release|report|bulletin|issue|period|month|week|day)|previous|prior|"
    r"preceding|earlier|before|(?:a )?year ago)\b"
)
_UNIT_KEY = re.compile(r"\s(?:pct|percent|per cent|share pct)$", re.IGNORECASE)
_NEXT_KEY = re.compile(r"\b(?:next|forecast|expected)\b")
_KV = re.compile(r"^(\s*[-*]?\s*)([A-Za-z][\w .()/%-]{0,60}?)\s*(?:=>|->|:=|=|\u2192)\s*(\S.*)$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_FENCED = re.compile(r"```[a-zA-Z]*\n(.*?)\n?```", re.DOTALL)
_SUPPORT = ("evidence", "detail", "note", "reading", "support", "reason", "why")
_DELIMITERS = ("\t", ";", ",", "|")
_JSON_START = re.compile(r"(?m)^[ \t]*[{\[]|\{(?=\s*\")")


def words(key: str) -> str:
    """A key as words: camelCase, kebab-case and snake_case split ("latestValue" -> "latest Value")."""
    return re.sub(r"[_-]+", " ", _CAMEL.sub(" ", str(key))).strip()


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    return str(value)


def _inline(value: Any) -> str:
    """A value written on one line: a list of names comma-separated, an object as its members."""
    if isinstance(value, dict):
        low = {str(k).lower(): v for k, v in value.items()}
        if set(low) == {"value", "unit"} or set(low) == {"value", "units"}:  # a figure with its unit
            return f"{_scalar(low['value'])} {low.get('unit') or low.get('units')}"
        return ", ".join(f"{words(k)} {_inline(v)}" for k, v in value.items())
    if isinstance(value, list):
        if not value:
            return "none"
        if all(isinstance(v, dict) for v in value):
            return ", ".join(_item(v) for v in value)
        return ", ".join(_inline(v) for v in value)
    return _scalar(value)


def _item(item: dict) -> str:
    """An object in a list: its first text member names it, the others follow in parentheses."""
    name = next((k for k, v in item.items() if isinstance(v, str) and k not in _SUPPORT), None)
    name = name or next((k for k, v in item.items() if isinstance(v, str)), None)
    if name is None:
        return _inline(item)
    rest = "; ".join(_scalar(v) if k in _SUPPORT else f"{words(k)} {_inline(v)}"
                     for k, v in item.items() if k != name)  # fmt: skip
    return f"{item[name]} ({rest})" if rest else str(item[name])


def _lines(value: Any, path: list[str], when: str) -> list[str]:
    """One line per leaf path; objects of scalars (an outlook's parts) and lists stay on one line."""
    if isinstance(value, dict):
        leafy = all(not isinstance(v, (dict, list)) for v in value.values())
        timed = _TIME_KEY.search(" ".join(path).lower()) or any(_TIME_KEY.search(words(k).lower()) for k in value)
        if leafy and path and len(value) <= 4 and not timed:
            return [_line(path, _inline(value), when)]
        out: list[str] = []
        for key, sub in value.items():
            name = words(key)
            low = name.lower()
            inner = "a period earlier" if _TIME_KEY.search(low) else "next period" if _NEXT_KEY.search(low) else when
            out += _lines(sub, [*path, name], inner)
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value) and not path:
        return [line for v in value for line in _lines(v, path, when)]
    if isinstance(value, list) and value and all(isinstance(v, str) and len(v.split()) > 3 for v in value):
        return [v if v.rstrip().endswith((".", "!", "?")) else f"{v}." for v in value]  # notes: sentences
    return [_line(path, _inline(value), when)]


def _line(path: list[str], said: str, when: str = "") -> str:
    return keyed(" ".join(path) if path else "value", said, when)


def keyed(key: str, said: str, when: str = "") -> str:
    """One key and its value as a line a reader reads: a key that names a unit ("share_pct") puts it after
    the value; a key, or an enclosing one (`when`), that places the value in the previous release says so
    as prose does ("the previous release named x as its primary driver"), so it is never this period's."""
    words_ = words(key)
    unit = _UNIT_KEY.search(words_)
    if unit and re.fullmatch(r"[-+]?\d[\d.,]*", said.strip()):
        words_, said = words_[: unit.start()].strip() or words_, f"{said} %"
    earlier = _TIME_KEY.search(words_.lower())
    if earlier or when == "a period earlier":
        subject = _TIME_KEY.sub("", words_.lower()).strip() or "value"
        if re.search(r"year", earlier.group() if earlier else ""):
            return f"{subject} was {said} a year earlier."
        return f"the previous release named {said} as its {subject}."
    if when == "next period":
        return f"{words_}: {said} next period."
    return f"{words_}: {said}."


def _json_spans(text: str) -> list[tuple[int, int, Any]]:
    """(start, end, value) of each JSON object or array in the text that spans a whole line block.
    Linear and total: a candidate's only possible value is its balanced span (found once for the whole
    text), parsed alone; spans that are not JSON are charged against a budget of the text's length."""
    spans, i, closes = [], 0, {}
    budget = 4 * len(text) + 65536
    while i < len(text) and budget > 0:
        m = _JSON_START.search(text, i)
        if m is None:
            break
        start = m.end() - 1
        end = balanced_end(text, start, closes)
        value = None
        if end is not None:
            try:
                value = json.loads(text[start : end + 1])
            except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
                budget -= end + 1 - start
        if value is None:
            i = m.end()
            continue
        if isinstance(value, dict) or any(isinstance(v, (dict, list, str)) for v in value):
            spans.append((m.start(), end + 1, value))
        i = end + 1
    return spans


def _from_json(text: str) -> str:
    out, last = [], 0
    for start, end, value in _json_spans(text):
        out += [text[last:start], "\n" + "\n".join(_lines(value, [], "")) + "\n"]
        last = end
    return "".join(out + [text[last:]]) if out else text


def _delimiter(line: str) -> str | None:
    counts = {d: _count(line, d) for d in _DELIMITERS}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else None


def _count(line: str, delimiter: str) -> int:
    try:
        return len(next(csv.reader([line], delimiter=delimiter))) - 1
    except (csv.Error, StopIteration):
        return 0


def _blocks(lines: list[str]) -> list[tuple[int, int, str]]:
    """(first, end, delimiter) of runs of >= 2 lines splitting into the same number (>= 2) of fields."""
    found, i = [], 0
    while i < len(lines):
        d = _delimiter(lines[i]) if not lines[i].lstrip().startswith(("|", "#", "-", "*")) else None
        if d is None or (d != "\t" and not _looks_tabular(lines[i], d)):
            i += 1
            continue
        width = _count(lines[i], d)
        j = i + 1
        while j < len(lines) and lines[j].strip() and _count(lines[j], d) == width:
            j += 1
        if j - i >= 2:
            found.append((i, j, d))
            i = j
        else:
            i += 1
    return found


def _looks_tabular(line: str, delimiter: str) -> bool:
    """A delimited line that is a row, not a sentence: its fields are short and it is not a sentence."""
    cells = next(csv.reader([line], delimiter=delimiter))
    return all(len(c.split()) <= 6 for c in cells) and not line.rstrip().endswith(".")


def _table(rows: list[list[str]]) -> list[str]:
    header, body = rows[0], rows[1:]
    if len(body) == 1 and len(header) > 2:  # wide: the subjects in the header, one row of values
        return [keyed(h, v) for h, v in zip(header, body[0]) if v.strip()]
    if len(header) == 2:  # long: a subject and its value per row
        return [keyed(k, v) for k, v in rows if v.strip()]
    lines = ["| " + " | ".join(words(h) if k == 0 else h for k, h in enumerate(header)) + " |"]
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join([words(r[0]), *r[1:]]) + " |" for r in body]
    return lines


def _from_delimited(text: str) -> str:
    lines = text.split("\n")
    blocks = _blocks(lines)
    if not blocks:
        return text
    out, last = [], 0
    for first, end, d in blocks:
        rows = [[c.strip() for c in r] for r in csv.reader(lines[first:end], delimiter=d)]
        out += [*lines[last:first], "", *_table(rows), ""]
        last = end
    return "\n".join(out + lines[last:])


def _from_key_values(text: str) -> str:
    out = []
    for line in text.split("\n"):
        m = _KV.match(line)
        out.append(f"{m.group(1)}{keyed(m.group(2), m.group(3).rstrip('.'))}" if m and "://" not in line else line)
    return "\n".join(out)


def structured(report: str) -> str:
    """The report with its JSON, CSV / TSV and key-value blocks written as lines (module docstring)."""
    text = _FENCED.sub(lambda m: "\n" + m.group(1) + "\n", report)
    return _from_key_values(_from_delimited(_from_json(text)))
