"""Model- and kernel-written text made safe for the three places people read it.

A model (or the code it ran) chooses every character of its answers and observations, so what we
print must not let it drive the reader's tools:
- a terminal obeys escape sequences (clear screen, window title, OSC-8 links, carriage-return
  overwrites can fake a "score: 1.000" line): `terminal_text` keeps printable text, newline and tab;
- a spreadsheet runs a cell that starts with = + - @ (or tab / CR) as a formula: `csv_cell` quotes
  it with a leading apostrophe unless it is a plain number;
- Markdown passes raw HTML through to the page: `markdown_text` escapes it.
"""

from __future__ import annotations

import hashlib
import re

# C0 (except \t and \n), DEL and C1: everything a terminal may act on. An ESC sequence's own
# printable tail ("[2J", "]0;title") is removed with it, so no half-sequence is left as noise.
_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: cursor moves, erase, colours
    r"|\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC: titles, OSC-8 hyperlinks
    r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]?"  # any other ESC + final byte
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    r"|\x9d[^\x07\x1b\x9c]*(?:\x07|\x9c)?"  # 8-bit OSC
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def terminal_text(text) -> str:
    """`text` with no control character but newline and tab: escape sequences go whole, CR and
    the rest go (a CR in `a\\rb` would let b overwrite a on screen); Unicode text is kept."""
    text = "" if text is None else str(text)
    text = text.replace("\r\n", "\n")
    return _CONTROL.sub("", _ESCAPE_SEQUENCE.sub("", text))


def _is_number(text: str) -> bool:
    if text != text.strip():
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def csv_cell(value):
    """A CSV cell a spreadsheet shows as text: a string starting with = + - @, tab or CR gets a
    leading apostrophe, unless it is a number (-0.25 stays a number); terminal controls go too
    (a CSV is also read with `cat`). Non-strings pass unchanged."""
    if not isinstance(value, str):
        return value
    value = terminal_text(value)
    return "'" + value if value.startswith(_FORMULA_START) and not _is_number(value) else value


def csv_frame(frame):
    """Every text cell (and header) of a frame through `csv_cell`; numeric columns are untouched."""
    out = frame.copy()
    for name in out.columns:
        if out[name].dtype.kind not in "biufcmM":  # text, whatever pandas calls its dtype (object, str)
            out[name] = out[name].map(csv_cell)
    out.columns = [csv_cell(str(c)) for c in out.columns]
    return out


def markdown_text(text) -> str:
    """Text for a Markdown table cell or list item: HTML escaped (no tag, no entity survives as
    markup), table pipes escaped, lines joined, and terminal controls dropped."""
    text = terminal_text(text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\n", " ")


NAME_CHARS = 120  # a model or run name longer than this is shown by its start and a hash of the whole
_NOT_XML = re.compile("[\ufffe\uffff]")  # not characters in XML (an SVG figure, an HTML page)


def _shortened(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{text[: max(1, limit - 10)]}…{digest}"


def display_name(text) -> str:
    """A model, run or harness name as every reader shows it (terminal, SVG figure, HTML, Markdown,
    CSV): one line, no control character or escape sequence, only characters XML allows, and at most
    NAME_CHARS characters (a longer one keeps its start and a hash of the whole, so two stay apart).
    Applied once, where a name comes in (a run dir read by the boards, the eval's title)."""
    from tsbench.core.unicode_text import valid_text

    text = valid_text(terminal_text(text))[0]
    text = " ".join(_NOT_XML.sub("", text).split())
    return _shortened(text, NAME_CHARS) or "?"


_FILE_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f/\\:*?\"<>|\s]+")


def file_name_part(text, limit: int = 80) -> str:
    """Text as part of a file or folder name on any system: path separators, controls, white space and
    the characters Windows refuses become "_", and the part is at most `limit` characters (longer: its
    start and a hash of the whole), so a 4,000-character model name still makes a valid run dir."""
    from tsbench.core.unicode_text import valid_text

    text = _FILE_UNSAFE.sub("_", valid_text(str(text))[0]).strip(".")
    return _shortened(text, limit) or "_"
