"""Numbers in the notations honest reports use, rewritten as plain decimals in the headline series' unit
before judge/rules reads them (normalise.py), so a value is compared, never its notation:
- thousands separators (1,234.5; 1.234,5; 1 234,5 with a thin or no-break space; 1'234.5) and decimal
  commas (844,9): a report that writes one decimal comma (a comma before 1, 2 or 4+ digits, or a dot
  grouping thousands before a comma) is read with decimal commas throughout; otherwise a comma before
  exactly three digits groups thousands;
- scale words and suffixes (4.2 thousand, 1.2k, 849.9 million, 849.9m, 0.85 bn, 1.1 trillion);
- units of another scale than the series' (849,900 thousand lb or 849,900,000 lb for "million lb";
  48,100 MW for "GW"): the figure in the series' unit, written with the unit;
- fractions (17/20, "3 in 4") as decimals (a probability written 0.85 is read as 85 % by reading.py).
A number whose notation is unclear is left as written: it is read as what it says or bound to nothing,
never guessed into another value.
"""

from __future__ import annotations

import re

SCALE_WORDS = {
    **dict.fromkeys(("thousand", "thousands", "k"), 1e3),
    **dict.fromkeys(("million", "millions", "mn", "mln", "mio", "m"), 1e6),
    **dict.fromkeys(("billion", "billions", "bn"), 1e9),
    **dict.fromkeys(("trillion", "tn"), 1e12),
}
_SI = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "": 1.0}
_SI_BASES = ("W", "Wh", "J", "t", "Hz")
_GROUP = "[,.\u202f\u00a0']"
_TOKEN = re.compile(
    rf"(?<![\w.,/-])([-+\u2212]?)(\d{{1,3}}(?:{_GROUP}\d{{3}})+(?:[.,]\d+)?|\d+(?:[.,]\d+)?)(?![\w/]*\d)(?![.,]\d)"
)
_SCALE = re.compile(r"\s?(thousands?|millions?|billions?|trillion|mn|mln|mio|bn|tn)\b|(k|m|bn)(?![\w/])", re.IGNORECASE)
_DECIMAL_COMMA = re.compile(r"(?<![\d,.])\d+,(?:\d{1,2}|\d{4,})(?![\d,.])|\d\.\d{3},\d")
_FRACTION = re.compile(r"(?<![\w/.-])(\d{1,2})(?:/| in | out of )(\d{1,3})(?![\w/.-])")
_FRACTION_NEXT = re.compile(r"^\s*(?:probability|chance|odds|likel|confidence|of the|share|of total)", re.IGNORECASE)


def _unit_parts(unit: str) -> tuple[float, str]:
    """(scale, base) of a unit: "million lb" -> (1e6, "lb"); "thousand" -> (1e3, ""); "GW" -> (1e9, "W")."""
    words = unit.split()
    if words and words[0].lower() in SCALE_WORDS and len(words[0]) > 2:
        return SCALE_WORDS[words[0].lower()], " ".join(words[1:])
    for prefix, factor in _SI.items():
        if prefix and unit.startswith(prefix) and unit[len(prefix) :] in _SI_BASES:
            return factor, unit[len(prefix) :]
    return 1.0, unit


_SPACES = re.compile("[\u202f\u00a0']")


def _decimal_mark(text: str, decimal_comma: bool) -> str | None:
    """The numeral's decimal mark ("" for none), or None when its notation is unclear."""
    if "," in text and "." in text:
        mark = "," if text.rfind(",") > text.rfind(".") else "."
    elif "," in text:
        groups = text.split(",")
        if decimal_comma or len(groups) == 2 and len(groups[1]) != 3:
            mark = ","
        else:
            return "" if all(len(g) == 3 for g in groups[1:]) else None
    elif "." in text:
        groups = text.split(".")
        if decimal_comma and all(len(g) == 3 for g in groups[1:]):
            return ""
        mark = "."
    else:
        return ""
    return mark if text.count(mark) == 1 else None  # 1.234.5 or 1,234,5: unclear


def _parts(digits: str, decimal_comma: bool) -> tuple[str, str] | None:
    """(whole digits, decimal digits) of a numeral written with separators; None when unclear.
    Both readers below share it, so the value and its written form never disagree on the mark."""
    text = _SPACES.sub("", digits)
    mark = _decimal_mark(text, decimal_comma)
    if mark is None:
        return None
    whole, _, decimals = text.rpartition(mark) if mark else (text, "", "")
    whole = re.sub("[,.]", "", whole) or "0"
    if not whole.isdigit() or decimals and not decimals.isdigit():
        return None
    return whole, decimals


def _plain(digits: str, decimal_comma: bool) -> float | None:
    """The value of a numeral written with separators, or None when its notation is unclear."""
    parts = _parts(digits, decimal_comma)
    return None if parts is None else float(f"{parts[0]}.{parts[1] or 0}")


def _canonical(digits: str, decimal_comma: bool) -> str:
    """A numeral with separators as plain digits and a decimal point, its written decimals kept."""
    parts = _parts(digits, decimal_comma)
    if parts is None:
        return digits
    whole, decimals = parts
    return f"{whole}.{decimals}" if decimals else _written(float(whole))


def _written(value: float) -> str:
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _unit_pattern(base: str) -> str:
    """What may follow a figure as its unit: the series' base unit, or an SI-prefixed base (MW for GW)."""
    names = [rf"[kMGT]?{re.escape(b)}" for b in _SI_BASES if b == base] + ([re.escape(base)] if base else [])
    return rf"(?:\s?(?P<unit>{'|'.join(names)})(?![\w]))?" if names else ""


def numerals(text: str, unit: str = "") -> str:
    """The text with its numbers as plain decimals in `unit` (the module docstring)."""
    decimal_comma = bool(_DECIMAL_COMMA.search(text))
    scale, base = _unit_parts(unit)
    figure = re.compile(_TOKEN.pattern + rf"(?:{_SCALE.pattern})?" + _unit_pattern(base), re.IGNORECASE)

    def rewrite(m: re.Match) -> str:
        sign, digits = m.group(1), m.group(2)
        value = _plain(digits, decimal_comma)
        if value is None:
            return m.group()
        word = (m.group(3) or m.group(4) or "").lower()
        if word == "m" and base.startswith("m") or not unit:  # "5 m/s": metres; no known unit: scale as written
            word = ""
        written_unit = m.groupdict().get("unit") or ""
        factor = SCALE_WORDS.get(word, 1.0)
        if written_unit and base in _SI_BASES and written_unit != base:
            factor *= _SI.get(written_unit[: -len(base)], 1.0)
        if not word and not written_unit:  # a bare figure: only its separators change, its decimals stay
            tail = m.group()[len(sign) + len(digits) :]
            return (
                m.group() if re.fullmatch(r"\d+(?:\.\d+)?", digits) else sign + _canonical(digits, decimal_comma) + tail
            )
        if abs(factor / scale - 1.0) < 1e-12:  # already in the series' scale: its digits as written
            said_digits = digits if re.fullmatch(r"\d+(?:\.\d+)?", digits) else _canonical(digits, decimal_comma)
            value = float(said_digits)
        else:
            said_digits = ""
            value = value * factor / scale
        negative = sign in ("-", "\u2212")
        said = ("-" if negative else "+" if sign == "+" else "") + (said_digits or _written(value))
        tail = m.group()[len(sign) + len(digits) :]
        if not word and written_unit == base and scale == 1.0:
            plain = m.group()[len(sign) : len(sign) + len(digits)]
            kept = plain if re.fullmatch(r"\d+(?:\.\d+)?", plain) else _canonical(plain, decimal_comma)
            return ("-" if sign in ("-", "\u2212") else sign) + kept + tail  # "48.1 GW" as written
        if written_unit or scale != 1.0:
            return f"{said} {unit}".rstrip()
        return said  # "1.2k" for a series without a scale: 1200

    return _FRACTION.sub(_fraction, figure.sub(rewrite, text))


def _fraction(m: re.Match) -> str:
    top, bottom = int(m.group(1)), int(m.group(2))
    after = m.string[m.end() : m.end() + 30]
    if not 0 < top <= bottom or bottom < 2 or not _FRACTION_NEXT.match(after):
        return m.group()
    return _written(top / bottom)
