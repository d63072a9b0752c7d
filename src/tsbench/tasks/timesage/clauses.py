"""How a report's text is read by the offline judge: cut to a length bound, split into clauses, and
asked whether a value is stated ABOUT a subject (paper A.4: a keypoint is conveyed only when the
report says the value of the thing it is about; a bare list of labels or numbers conveys nothing).

A clause is a sentence or a `;`-separated part of one. A clause is a *listing* when it holds more
than LISTING_NUMBERS numbers or more than LISTING_LABELS distinct options of one field's enum: such
a clause states no single value, so it binds nothing and counts as evidence for nothing. A value is
*bound* to a subject when one non-listing clause names the subject and states the value.
"""

from __future__ import annotations

import re
from typing import Any

REPORT_CHAR_LIMIT = 4000  # a report is cut here before any judging (about 600 words)
LISTING_NUMBERS = 8
LISTING_LABELS = 2
MAX_LABELS_PER_SUBJECT = 2  # "moved from neutral to cool_watch" names two; more is hedging
MAX_NUMBERS_PER_SUBJECT = 12  # the subject named beside a run of numbers: a spray

_DATE = re.compile(r"\b\d{4}-\d{2}(?:-\d{2})?\b")
_NUM = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?")
_CLAUSE = re.compile(r"(?<=[.!?;])\s+|\n+")
_WORD = re.compile(r"[a-z][a-z0-9_]+")
_NEGATION = re.compile(r"\b(none|no|not|nothing|neither|nor|without|zero)\b", re.IGNORECASE)
_STOP = set(
    "what which will does this that from with than into over under their there these those given each "
    "since last next during about state stated report release releases period periods month week weeks "
    "months year years name named show shows give gives value latest current previous change single "
    "many much same earlier below above less more possibly include includes issuer".split()
)


def cut(report: str, limit: int = REPORT_CHAR_LIMIT) -> str:
    """The report as the judge reads it: at most `limit` characters, cut at a word boundary."""
    if len(report) <= limit:
        return report
    head = report[:limit]
    space = head.rfind(" ")
    return head[:space] if space > limit // 2 else head


def clauses(text: str) -> list[str]:
    return [part.strip() for part in _CLAUSE.split(text) if part.strip()]


def dates_in(text: str) -> set[str]:
    return set(_DATE.findall(text))


def numbers_in(text: str) -> list[float]:
    """Numbers written in the text, dates left out ("2024-11" is a date, not 2024 and -11)."""
    cleaned = _DATE.sub(" ", text.replace("\u2212", "-"))
    found = []
    for token in _NUM.findall(cleaned):
        try:
            found.append(float(token.replace(",", "")))
        except ValueError:
            continue
    return found


def _decimals(value: float) -> int:
    """How many decimals a number is written with (1457.0 -> 0, 41.64 -> 2)."""
    text = repr(float(value))
    if "e" in text or "n" in text:
        return 6
    return len(text.partition(".")[2].rstrip("0"))


def number_matches(x: float, y: float) -> bool:
    """The written number `x` states `y` to rounding: `x` is `y` rounded to the decimals `x` is
    written with (1457 or 1457.3 for 1457.3), and close to it (a "3" does not state 2.6). A
    neighbouring value (1450 for 1457.3; last period's 891.8 for 890.5) or a different figure at more
    decimals (-0.31 for -0.30) does not."""
    if abs(x - y) <= 1e-9:
        return True
    return abs(x - y) <= max(0.05, 0.005 * abs(y)) and abs(round(y, _decimals(x)) - x) <= 1e-9


def phrase(value: Any) -> str:
    return str(value).strip().lower().replace("_", " ")


def mentions(text: str, value: Any) -> bool:
    """Whether the text states `value`: a number (to rounding), else the label or phrase, case-
    and underscore-insensitive, on word boundaries."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, float)):
        return any(number_matches(n, float(value)) for n in numbers_in(text))
    wanted = phrase(value)
    if not wanted:
        return False
    if _DATE.fullmatch(wanted):
        return wanted in dates_in(text)
    haystack = text.lower().replace("_", " ")
    return re.search(rf"(?<![\w]){re.escape(wanted)}(?![\w])", haystack) is not None


def is_listing(clause: str, enums: list[list[str]], labels: int = LISTING_LABELS) -> bool:
    """A clause that sprays values: many numbers, or more than `labels` options of one enum (a set
    answer of n items may name n + 1: `allowed_labels`)."""
    if len(numbers_in(clause)) > LISTING_NUMBERS or len(dates_in(clause)) > LISTING_NUMBERS:
        return True
    return any(sum(mentions(clause, option) for option in options) > labels for options in enums)


def allowed_labels(truths: list[Any]) -> int:
    """How many options of one enum a clause may name before it is a listing: 2 (a move from one
    state to another), or one more than the longest list among the truths."""
    longest = max((len(t) for t in truths if isinstance(t, list)), default=0)
    return max(LISTING_LABELS, longest + 1)


def prose(text: str, enums: list[list[str]], labels: int = LISTING_LABELS) -> str:
    """The text with its listing clauses removed: what can state anything."""
    return "\n".join(c for c in clauses(text) if not is_listing(c, enums, labels))


def subject_terms(keypoint: dict) -> list[str]:
    """Words that name what a keypoint is about: its `subject` when the data gives one, else the
    field name (as a phrase and its words) and the description's content words, less the labels
    (`keypoint["labels"]`: every enum option) a value could take."""
    if keypoint.get("terms"):  # already worked out (axes.keypoint_binding)
        return list(keypoint["terms"])
    if keypoint.get("subject"):
        return [phrase(s) for s in keypoint["subject"] if str(s).strip()]
    values = {phrase(v) for v in keypoint.get("labels") or []}  # the values it could take name no subject
    terms = []
    if keypoint.get("field"):
        terms.append(phrase(keypoint["field"]))
        terms += [w for w in phrase(keypoint["field"]).split() if len(w) > 3 and w not in _STOP]
    for word in _WORD.findall(str(keypoint.get("description", "")).lower()):
        word = word.strip("_")
        if len(word) > 3 and word not in _STOP:
            terms.append(phrase(word))
    return [t for t in dict.fromkeys(terms) if t not in values]


def names_subject(clause: str, terms: list[str]) -> bool:
    return any(mentions(clause, term) for term in terms)


def bound_clauses(text: str, terms: list[str], enums: list[list[str]], labels: int = LISTING_LABELS) -> list[str]:
    """The non-listing clauses of `text` that name the subject."""
    return [c for c in clauses(text) if not is_listing(c, enums, labels) and names_subject(c, terms)]


def _scalar_stated(value: Any, bound: list[str], options: list[str], cap: int = MAX_LABELS_PER_SUBJECT) -> bool:
    if isinstance(value, bool):
        return any(bool(_NEGATION.search(c)) != value for c in bound)
    if isinstance(value, (int, float)):
        said = {n for c in bound for n in numbers_in(c)}
        return len(said) <= MAX_NUMBERS_PER_SUBJECT and any(mentions(c, value) for c in bound)
    if options:
        named = {o for o in options if any(mentions(c, o) for c in bound)}
        if len(named) > cap:
            return False
    return any(mentions(c, value) for c in bound)


def _item_credit(item: Any, bound: list[str], options: list[str], labels: int) -> float:
    """1 / 0.5 / 0 for one item of a list truth. An item with evidence ({"driver": d, "evidence":
    "d at 41.64 (+1.75)"}) is conveyed when its name is stated with the figures of its evidence; its
    name alone is half of it (the question pairs each item with its reading)."""
    if not isinstance(item, dict):
        return float(_scalar_stated(item, bound, options, labels))
    texts = [v for v in item.values() if isinstance(v, str)]
    named = [t for t in texts if _scalar_stated(t, bound, options, labels)]
    if not named:
        return 0.0
    figures = [n for t in texts if t not in named for n in numbers_in(t)]
    stated = [n for n in figures if any(number_matches(m, n) for c in bound for m in numbers_in(c))]
    return 1.0 if len(stated) == len(figures) else 0.5


def _names(item: Any) -> set[str]:
    values = item.values() if isinstance(item, dict) else [item]
    return {phrase(v) for v in values if isinstance(v, str)}


def _extras(truth: list, bound: list[str], options: list[str]) -> bool:
    """The clauses about the subject name an option the truth does not hold (a stale or wrong item
    beside the right ones: the set is not the one the keypoint states)."""
    held = set().union(*(_names(item) for item in truth)) if truth else set()
    return any(phrase(o) not in held and any(mentions(c, o) for c in bound) for o in options)


_CONNECTOR = re.compile(r"\W{0,3}(?:(?:of|at|is|was|were|to|=)\s+)?")


def _after(key: str, near: list[str]) -> list[str]:
    """What is written right after each mention of a part's name ("north 22.0", "probability of 70
    %", "if_direction up"), lower-cased with underscores as spaces."""
    name = re.compile(rf"(?<![\w]){re.escape(phrase(key))}(?![\w])")
    found = []
    for clause in near:
        low = clause.lower().replace("_", " ")
        for hit in name.finditer(low):
            rest = low[hit.end() :]
            found.append(rest[_CONNECTOR.match(rest).end() :])
    return found


def _says(rest: str, value: Any) -> bool | None:
    """Whether the text after a part's name gives `value` (None: it gives no value of that kind)."""
    if isinstance(value, (int, float)):
        number = _NUM.match(rest)
        return None if number is None else number_matches(float(number.group().replace(",", "")), float(value))
    date = _DATE.match(rest)
    if _DATE.fullmatch(str(value)):
        return None if date is None else date.group() == str(value)
    word = re.match(r"[a-z0-9][\w.-]*", rest)
    if word is None or date is not None:
        return None
    return re.match(rf"{re.escape(phrase(value))}(?![\w])", rest) is not None


def _part(key: str, value: Any, near: list[str], enums: list[list[str]]) -> int:
    """+1 a part of an object stated with its value, -1 stated with another value, 0 not stated.
    The value written right after the part's name decides ("regime slack" for a truth "tight" is
    -1); where the name is not written, the value anywhere in the clauses (+1) or another option of
    the part's enum there (-1)."""
    if isinstance(value, bool) or value is None:
        return int(_scalar_stated(value, near, []))
    given = [said for said in (_says(rest, value) for rest in _after(key, near)) if said is not None]
    if given:
        return 1 if any(given) else -1
    if isinstance(value, (int, float)) or any(mentions(c, value) for c in near):
        return int(_scalar_stated(value, near, []))
    group = next((g for g in enums if phrase(value) in {phrase(o) for o in g}), [])
    return -1 if any(phrase(o) != phrase(value) and any(mentions(c, o) for c in near) for o in group) else 0


def bound_coverage(keypoint: dict, text: str, options: list[str], enums: list[list[str]]) -> float | None:
    """1 / 0.5 / 0: is the keypoint's truth stated about its subject? None: no truth to state.
    - a list: every item stated (an item with evidence: with its figures) and no other option named
      about the subject 1, some of it 0.5; an empty list needs the subject said to be none;
    - an object: every part 1; some parts 0.5, but 0 when a part is stated with another value and the
      keypoint is one joint unit (`joint`: an outlook with a wrong regime is not this outlook)."""
    truth = keypoint.get("truth")
    if truth is None:
        return None
    stated = truth if isinstance(truth, list) else list(truth.values()) if isinstance(truth, dict) else [truth]
    values = {phrase(v) for v in stated if isinstance(v, (str, int, float))}
    terms = [t for t in subject_terms(keypoint) if t not in values]  # a value does not name its own subject
    if isinstance(truth, bool):  # a yes / no needs the thing itself named, not only the period
        terms = [t for t in terms if not _DATE.fullmatch(t)]
    labels = allowed_labels([truth])
    bound = bound_clauses(text, terms, enums, labels)
    if isinstance(truth, list):
        if not truth:
            return float(any(_NEGATION.search(c) for c in bound))
        # the clauses naming the subject itself, when there are any, else those naming the period
        bound = bound_clauses(text, [t for t in terms if not _DATE.fullmatch(t)], enums, labels) or bound
        credit = [_item_credit(item, bound, options, labels) for item in truth]
        if sum(credit) == len(truth) and not _extras(truth, bound, options):
            return 1.0
        return 0.5 if any(credit) else 0.0
    if isinstance(truth, dict):
        parts = [
            _part(key, value, bound + bound_clauses(text, [phrase(key)], enums), enums) for key, value in truth.items()
        ]
        found, wrong = parts.count(1), parts.count(-1)
        if found == len(truth):
            return 1.0
        if wrong and keypoint.get("joint"):
            return 0.0
        return 0.5 if found else 0.0
    return float(_scalar_stated(truth, bound, options))
