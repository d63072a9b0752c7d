"""A report in one notation before judge/rules reads it (reading.py), so honest writing in any common
style states what it states:
- JSON, CSV / TSV and key-value blocks as lines (formats.py); numbers in any common notation as plain
  decimals in the headline series' unit (numerals.py);
- dates as ISO ("9 March 2026", "March 9, 2026" and "2026/03/09" are 2026-03-09; "March 2026" is 2026-03);
- (counts_in_words, for the reader's numbers) a count or a rank written in words ("three consecutive
  releases", "ranks second");
- a cell of a markdown table read with its row's subject and the time its column names
  ("| status | ample | tight |" under "| | previous release | this release |" is "status ample in the
  previous release", "status tight in this release").
"""

from __future__ import annotations

import re

from tsbench.tasks.timesage.formats import structured
from tsbench.tasks.timesage.numerals import numerals

_MONTHS = "january february march april may june july august september october november december".split()
_MONTH_OF = {**{m: i + 1 for i, m in enumerate(_MONTHS)}, **{m[:3]: i + 1 for i, m in enumerate(_MONTHS)}, "sept": 9}
_MONTH = r"(" + "|".join(sorted(_MONTH_OF, key=len, reverse=True)) + r")\.?"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?: of)? {_MONTH},? (\d{{4}})\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH} (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}})\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},? (\d{{4}})\b", re.IGNORECASE)
_SLASHED = re.compile(r"\b(\d{4})/(\d{1,2})(?:/(\d{1,2}))?\b")

_CARDINALS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty"
).split()
_ORDINALS = "first second third fourth fifth sixth seventh eighth ninth tenth".split()
_COUNTED = re.compile(
    r"\b(" + "|".join(_CARDINALS) + r")(?=(?:\s+(?:consecutive|straight|successive))?\s+"
    r"(?:releases?|months?|weeks?|periods?|days?|quarters?|years?|reports?|bulletins?|times?)\b|\s+in a row\b)",
    re.IGNORECASE,
)
_ORDINAL = "|".join(_ORDINALS)
_RANKED = (  # "ranks second", "ranked third"; "the second highest", "in third place", "fourth of the last seven"
    re.compile(rf"(?<=\brank )({_ORDINAL})\b|(?<=\branks )({_ORDINAL})\b|(?<=\branked )({_ORDINAL})\b", re.IGNORECASE),
    re.compile(
        rf"\b({_ORDINAL})(?=[ -](?:highest|largest|lowest|smallest|place|of the last|out of|among)\b)", re.IGNORECASE
    ),
)
_TIME_HEADER = re.compile(
    r"\d{4}-\d{2}|\b(?:previous|prior|last|this|current|latest|now|earlier|ago|year-ago|next|before)\b", re.IGNORECASE
)
_RULE_ROW = re.compile(r"^\|?[\s:|-]+\|?$")
_HEADER_PUNCTUATION = re.compile(r"[()\[\]:,;]")
_CELL_CUT = re.compile(r"([()\[\]:,;])")  # where the reader cuts a clause into segments
_BARE_FIGURE = re.compile(r"\(\s*([-+]?\d[\d.,]*\s*%?)\s*\)")
_ISO = re.compile(r"\d{4}-\d{2}(?:-\d{2})?")


def _iso(year: str, month: int, day: str | None = None) -> str:
    if not 1 <= month <= 12:
        return ""
    return f"{year}-{month:02d}" + (f"-{int(day):02d}" if day else "")


def iso_dates(text: str) -> str:
    """Dates written with a month's name or with slashes, as ISO (YYYY-MM-DD, YYYY-MM)."""

    def day_first(m: re.Match) -> str:
        return _iso(m.group(3), _MONTH_OF[m.group(2).lower()], m.group(1)) or m.group()

    def month_first(m: re.Match) -> str:
        return _iso(m.group(3), _MONTH_OF[m.group(1).lower()], m.group(2)) or m.group()

    text = _DAY_MONTH_YEAR.sub(day_first, text)
    text = _MONTH_DAY_YEAR.sub(month_first, text)
    text = _MONTH_YEAR.sub(lambda m: _iso(m.group(2), _MONTH_OF[m.group(1).lower()]) or m.group(), text)
    return _SLASHED.sub(lambda m: _iso(m.group(1), int(m.group(2)), m.group(3)) or m.group(), text)


def counts_in_words(low: str) -> list[tuple[int, int, int, str]]:
    """(start, end, value, role) of each count ("three consecutive releases", "two in a row") and rank
    ("ranks second", "the third highest") written in words in a lower-case text."""
    found = [(m.start(), m.end(), _CARDINALS.index(m.group(1)), "count") for m in _COUNTED.finditer(low)]
    for pattern in _RANKED:
        for m in pattern.finditer(low):
            word = next(g for g in m.groups() if g)
            found.append((m.start(), m.end(), _ORDINALS.index(word) + 1, "rank"))
    return found


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _cell(row: str, column: str, cell: str) -> str:
    """A data cell as a reader takes it: about its row's subject, in the time its column (or, in a table
    of periods, its row) names."""
    if not cell:
        return cell
    if _TIME_HEADER.search(column):
        return _timed(row, cell, column)
    if _TIME_HEADER.search(row):
        return _timed(column, cell, row)
    return f"{row} {cell}"


def _timed(subject: str, cell: str, header: str) -> str:
    """A cell as a list of items, each with its row's subject, and each of its segments with its column's
    time, so every item and every figure in its parentheses is placed in that time and keeps its own
    segment; the cue is a bare time phrase that names no subject ("a (x at 1 (+2)), b" in row "s" under
    "previous release" -> "s a a period earlier ( x at 1 +2 a period earlier ) , s b a period earlier ;
    in the previous release")."""
    cue = _cue(header)
    cell = _BARE_FIGURE.sub(r" \1", cell)  # "x at 1 (+2)": the change stays beside its series' name
    items = []
    for item in _top_level_items(cell):
        parts = [part.strip() for part in _CELL_CUT.split(item)]
        timed = [part if i % 2 or not part else f"{part} {cue}" for i, part in enumerate(parts)]
        items.append(f"{subject} " + " ".join(timed).strip())
    return " , ".join(items) + f" ; {_in_time(header)}"


def _top_level_items(cell: str) -> list[str]:
    """A cell's items: split at the commas and semicolons outside parentheses."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(cell):
        depth += (ch in "([") - (ch in ")]")
        if ch in ",;" and depth <= 0:
            items.append(cell[start:i])
            start = i + 1
    return [item.strip() for item in [*items, cell[start:]] if item.strip()]


def _cue(header: str) -> str:
    low = header.lower()
    if re.search(r"\byear[- ]ago\b|\ba year (?:earlier|before)\b", low):
        return "a year earlier"
    if re.search(r"\b(?:previous|prior|last|earlier|ago|before)\b", low):
        return "a period earlier"
    if re.search(r"\bnext\b", low):
        return "next period"
    if re.search(r"\b(?:this|current|latest|now)\b", low):
        return "now"
    dates = _ISO.findall(header)
    return f"in {dates[0]}" if dates else ""


def _in_time(header: str) -> str:
    words = " ".join(_HEADER_PUNCTUATION.sub(" ", header).split())
    return f"in {words}" if re.match(r"(?:this|that|the|a|an)\b", words, re.IGNORECASE) else f"in the {words}"


def table_cells(text: str) -> str:
    """Each data row of a markdown table (a header row, a rule row, then rows) with its cells as _cell reads them."""
    lines = text.split("\n")
    out = list(lines)
    header: list[str] | None = None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped.startswith("|"):
            header = None
            continue
        if header is None:
            following = lines[i + 1].strip() if i + 1 < len(lines) else ""
            header = _cells(stripped) if _RULE_ROW.match(following) and "-" in following else []
            continue
        if _RULE_ROW.match(stripped) or not header:
            continue
        cells = _cells(stripped)
        # the row's subject goes into each of its cells (a row of one cell keeps it)
        placed = [_cell(cells[0], header[k] if k < len(header) else "", cell) for k, cell in enumerate(cells) if k]
        placed = [cell for cell in placed if cell] or cells[:1]
        out[i] = "| " + " | ".join(placed) + " |"
    return "\n".join(out)


def normalise(report: str, unit: str = "") -> str:
    """The report in one notation (`unit`: the headline series' unit, numbers are read in it)."""
    return table_cells(iso_dates(numerals(structured(report), unit)))
