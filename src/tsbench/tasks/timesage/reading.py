"""How judge/rules reads a report: every value it writes (a number, a date, a label, a yes or no)
attached to the one subject its clause names for it, and placed in this period, an earlier or a later one.

- A report is cut (clauses.cut), split into clauses (sentences and lines) and each clause into
  segments (at commas, semicolons, colons, brackets, "while", "but").
- A subject is named by its terms (subjects.py); a term shared by k keypoints weighs 1/k and a
  subject's own name weighs fully, so "the change" names the change and "stocks_mlb" alone names no
  one of the fields about that series. A value is attached to the compatible subject best named in its
  segment, then in its clause (nearest on a tie, a keypoint before a table cell); a label only one
  keypoint can take names it unnamed ("supply is tight"); a clause that starts "It ..." and names
  nothing carries the previous clause's subject. A tie names no subject, and a value attached to
  nothing states nothing.
- Compatible: a number with the subject's kind of number (a level, a change ("by 3", "+3"), a count
  ("3 months"), a rank, a percentage); a label with a subject whose options hold it ("fell" is
  "down" for a direction); a date with a date. A series named as the subject of its figure is not
  also a list item.
- Placed: earlier in a text whose dateline is an earlier period (a copied release), near a phrase
  that puts it before this period ("in the previous month", "a year ago", an earlier date), or as the
  base of a comparison ("from 1093.5", "than", "against"); later near a forecast ("expected", "next
  month"). Comparisons and windows (E7, D1), outlooks and guidance, and the prior-release keypoint are
  about other periods by nature and are not moved.
- One subject, several values for this period: a hedge, which states none of them (the same holds for
  a set naming more items than its question could take, and for a clause of many numbers).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from tsbench.tasks.timesage.clauses import LISTING_NUMBERS, cut
from tsbench.tasks.timesage.hedges import mark_hedges
from tsbench.tasks.timesage.normalise import counts_in_words, normalise
from tsbench.tasks.timesage.subjects import DIRECTIONS, norm

SYNONYMS = {
    "up": "up upward upwards rose risen rise rises rising increased increase increases higher climbed climbs gained "
    "gains grew grows growing advanced strengthened firmer",
    "down": "down downward downwards fell fallen fall falls falling decreased decrease decreases lower declined "
    "declines declining dropped drops dropping slipped eased weakened softer",
    "flat": "flat unchanged stable steady steadied little changed broadly flat held steady sideways no change",
}
_SYNONYM = re.compile(r"little changed|broadly flat|held steady|no change|\S+")  # the phrases, then single words
SYNONYM_OF = {word: label for label, words in SYNONYMS.items() for word in _SYNONYM.findall(words)}
_FALL_BEFORE = re.compile(
    r"\b(?:fell|fall|falls|falling|down|declined?|decreased?|dropped|drop|lower|slipped|eased)(?:\s+by)?\s*$"
)
_DATE = re.compile(r"(?<![\w/.-])\d{4}-(?:\d{2}(?:-\d{2})?|q[1-4])(?![\w-])")
_FILE = re.compile(r"gt source/\S+|timeseries\.csv\S*|answer schema\.json")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?(?![\w.]*\d)")
_SEGMENT = re.compile(r"[,;:()\[\]|]| while | whereas | but | although ")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_COUNT = re.compile(
    r"^\s*(?:consecutive\s+|straight\s+|more\s+)?(?:months?|weeks?|releases?|periods?|days?|quarters?|years?)\b"
)
_WINDOW_BEFORE = re.compile(r"\b(?:last|past|previous|preceding|prior)\s*$")  # "the last seven releases": a window
_PERCENT = re.compile(r"^\s*(?:%|percent|per cent|pct)")
_RANK_BEFORE = re.compile(r"(?:\brank(?:s|ed|ing)?|\bno\.|#)\s*(?:of\s+|at\s+|is\s+|was\s+)?$")
_RANK_AFTER = re.compile(r"^(?:st|nd|rd|th)\b|^\s*(?:of the last|out of|of \d)")
_DELTA_BEFORE = re.compile(r"\bby\s*$|\b(?:change|changed|rise|fall|increase|decrease|gain|drop|decline) of\s*$")
_BELOW_AFTER = re.compile(r"^\s*(?:[a-z%/]+\s+){0,2}(?:below|lower than|less than|under)\b")
_LEVEL_BEFORE = re.compile(
    r"\b(?:at|(?:rose|fell|climbed|dropped|increased|decreased|declined|eased|jumped|slipped|came|moved) to)\s*$"
)
_BASE_BEFORE = re.compile(r"\b(?:from|than|versus|vs\.?|after|against|compared with|compared to)\s*$")
_PLACE_EARLIER = re.compile(
    r"\b(?:in|during|for|at|of|on) the (?:previous|prior|last|preceding) (?:month|week|release|period|quarter|year|"
    r"report|bulletin|day|note|issue)\b|\b(?:a|one|two|three|\d+) (?:year|month|week|day|period|quarter|release)s? "
    r"(?:earlier|ago|before)\b|\byear-ago\b|\b(?:previous|prior|last) (?:release|report|bulletin|note|issue)(?:'s)?\b"
    r"[^;]{0,50}?\b(?:said|stated|reported|named|gave|showed|put|had|listed|called|classed)\b|"
    r"(?<!since )(?<!from )(?<!than )(?<!against )(?<!versus )(?<!over )(?<!on )\blast (?:month|week|quarter|year)\b"
)
_PLACE_LATER = re.compile(
    r"\b(?:expected|expects|expect|will|soon|ahead|forecasts?|coming|next (?:month|week|period|release|day|quarter|"
    r"year|time))\b"
)
_PLACE_NOW = re.compile(r"\b(?:this (?:month|week|period|release|day|quarter|year|time)|now|currently|today|latest)\b")
_DATELINE = re.compile(r"(?:^#|\bfor the period\b|^period\b|\bit is now\b|\bissued\b|^week\b|^month\b|^day\b)")
_NEGATION = re.compile(r"\b(?:not|no|none|nothing|neither|nor|never|without|isn't|wasn't|false|empty)\b|n't\b")
_RISK = re.compile(r"\b(upside|downside)\b")
_NEGATED = re.compile(  # a label under a negation or a contrast states nothing about its subject ("tight, not ample")
    r"\b(?:not|never|nor|neither|rather than|instead of|as opposed to|no longer|n't)\s+(?:(?:a|an|the|be|been|as|"
    r"seen|at|in|to|yet)\s+){0,2}$"
)
_ANAPHOR = re.compile(r"\W*(?:it|its|this|that|these|those|they|which)\b")  # a clause that refers back
_SIDE = re.compile(r"\b(?:above|below)\b")
GENERIC_LABELS = (*DIRECTIONS, "none", "other", "unchanged", "normal", "high", "low")  # name no subject alone
CELL_REACH = 4  # words between a series' name and a figure of it written in the next segment ("x at 1.7 (+0.9)")
AFTER = 3  # a subject named after its value is this many words farther ("X at 5 (+1)": the +1 is X's)


@dataclass(frozen=True)
class Value:
    kind: str  # number | label | date | bool
    value: Any
    start: int  # character offset in the clause
    role: str = ""  # numbers: level | delta | count | rank | percent | "" (plain)
    base: bool = False  # the base of a comparison ("from 1093.5"): not a value for now


@dataclass(frozen=True)
class Claim:
    subject: str
    value: Any
    earlier: bool
    clause: int
    text: str  # the clause it was read from
    start: int = -1  # where in the clause (normalised) the value is written
    later: bool = False  # placed after this period ("expected next month"): a forecast, not this period's value

    def render(self, names: dict[str, str]) -> str:
        when = " (earlier)" if self.earlier else " (later)" if self.later else ""
        return f"{names.get(self.subject, self.subject)}{when} = {self.value} :: {self.text}"


@dataclass
class Reading:
    claims: list[Claim] = field(default_factory=list)
    hedged: set[str] = field(default_factory=set)  # subjects stated with several values (for now)
    empty: set[str] = field(default_factory=set)  # set subjects said to hold nothing this period
    texts: dict[str, list[str]] = field(default_factory=dict)  # text subjects -> clauses about them (now)
    listing: list[int] = field(default_factory=list)  # clauses that spray values

    def current(self, subject: str) -> list[Any]:
        """The values stated for now about a subject (none when it is hedged)."""
        if subject in self.hedged:
            return []
        return [c.value for c in self.claims if c.subject == subject and not c.earlier and not c.later]


class Vocabulary:
    """A lexicon compiled for reading: one regex of every term, term -> the subjects it names."""

    def _weight(self, subject: dict, term: str, called: dict[str, set[str]]) -> float:
        if term in (subject.get("names") or []):
            return 1.0 / len(called[term])
        shared = subject["part"] is not None and term not in (subject.get("own") or [])
        return self.weight[term] * (0.5 if shared else 1.0)

    def __init__(self, lex: dict):
        self.lex = {"subjects": lex["subjects"]}  # a scenario's periods share it: no period's truths here
        self.subjects = {s["key"]: s for s in lex["subjects"]}
        named: dict[str, set[str]] = {}
        called: dict[str, set[str]] = {}  # term -> the subjects whose name it is
        for s in lex["subjects"]:
            owner = s["keypoint"] or s["key"]
            for term in s["terms"]:
                named.setdefault(term, set()).add(owner)
            for term in s.get("names") or []:
                called.setdefault(term, set()).add(s["key"])
        self.weight = {term: 1.0 / len(owners) for term, owners in named.items()}
        # a subject's own name weighs 1 / (the subjects it names); a shared word 1 / (the keypoints sharing it)
        # a part of a composite keypoint shares its parent's words with its sibling parts: they weigh half
        self.weights = {s["key"]: {t: self._weight(s, t, called) for t in s["terms"]} for s in lex["subjects"]}
        self.keypoint_terms = {t for s in lex["subjects"] if s["keypoint"] for t in s["terms"]}
        self.by_term: dict[str, list[str]] = {}
        for s in lex["subjects"]:
            for term in s["terms"]:
                self.by_term.setdefault(term, []).append(s["key"])
        terms = sorted(self.by_term, key=len, reverse=True)
        self.terms = re.compile(r"(?<![a-z0-9])(?:" + "|".join(re.escape(t) for t in terms) + r")(?![a-z0-9])")
        options = {o for s in lex["subjects"] for o in s["options"]}
        self.option_owners = {
            o: [s["key"] for s in lex["subjects"] if o in s["options"] and s["keypoint"]] for o in options
        }
        words = sorted(options | set(SYNONYM_OF), key=len, reverse=True)
        self.labels = re.compile(r"(?<![a-z0-9])(?:" + "|".join(re.escape(w) for w in words) + r")(?![a-z0-9])")
        self.directional = {k for k, s in self.subjects.items() if set(s["options"]) & set(DIRECTIONS)}
        self.risks = {k for k, s in self.subjects.items() if s["kind"] == "items" and s.get("item") == "risk"}


_VOCABULARIES: dict[str, Vocabulary] = {}


def vocabulary(lex: dict) -> Vocabulary:
    """The compiled vocabulary of a lexicon, one per set of subjects (a scenario's periods share it)."""
    key = lex.get("vocabulary") or str(id(lex))
    if key not in _VOCABULARIES:
        if len(_VOCABULARIES) > 512:
            _VOCABULARIES.clear()
        _VOCABULARIES[key] = Vocabulary(lex)
    return _VOCABULARIES[key]


def _segments(low: str) -> list[tuple[int, int]]:
    cuts = [0] + [m.end() for m in _SEGMENT.finditer(low)] + [len(low) + 1]
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if a < b]


def _numbers(low: str, blocked: list[tuple[int, int]]) -> list[Value]:
    found = []
    for m in _NUMBER.finditer(low):
        if any(a <= m.start() < b for a, b in blocked):
            continue
        try:
            x = float(m.group().replace(",", ""))
        except ValueError:
            continue
        before, after = low[max(0, m.start() - 24) : m.start()], low[m.end() : m.end() + 24]
        signed = m.group()[0] in "+-"  # "+3" is a change; "-3" may be a level below zero
        role = ""
        if _PERCENT.match(after):
            role = "percent"
        elif _COUNT.match(after):
            if _WINDOW_BEFORE.search(before):
                continue  # the window a figure is compared over, not a count of this period
            role = "count"
        elif _RANK_BEFORE.search(before) or _RANK_AFTER.match(after):
            role = "rank"
        elif m.group()[0] == "+" or _DELTA_BEFORE.search(before):
            role = "delta"
        elif _LEVEL_BEFORE.search(before):
            role = "level"
        fell = _FALL_BEFORE.search(before) or _BELOW_AFTER.match(after)  # "fell 3", "3 below"
        if not signed and role in ("delta", "percent", "") and fell:
            x = -x
        found.append(Value("number", x, m.start(), role, bool(_BASE_BEFORE.search(before))))
    return found


def _labels(voc: Vocabulary, low: str, blocked: list[tuple[int, int]]) -> list[Value]:
    found = []
    segments = _segments(low)
    for m in voc.labels.finditer(low):
        if any(a <= m.start() < b for a, b in blocked):
            continue
        start = next((a for a, b in segments if a <= m.start() < b), 0)
        if _NEGATED.search(low[start : m.start()]):
            continue
        word = m.group()
        if word in voc.option_owners:
            found.append(Value("label", word, m.start()))
        if word in SYNONYM_OF and word != SYNONYM_OF[word]:
            found.append(Value("label", SYNONYM_OF[word], m.start(), role="synonym"))
    for m in _SIDE.finditer(low):  # "stays above its normal": a condition's direction (F4), nothing else's
        found.append(Value("label", "up" if m.group() == "above" else "down", m.start(), role="side"))
    if voc.risks:
        drivers = {s["column"] for s in voc.lex["subjects"] if s.get("column")}
        for a, b in _segments(low):
            side = _RISK.search(low[a:b])
            if not side:
                continue
            for d in drivers:
                hit = re.search(rf"(?<![a-z0-9]){re.escape(norm(d))}(?![a-z0-9])", low[a:b])
                if hit:
                    found.append(Value("label", norm(f"{d}_{side.group(1)}"), a + hit.start(), role="risk"))
    return found


def _compatible(subject: dict, value: Value, voc: Vocabulary) -> bool:
    kind = subject["kind"]
    if value.kind == "number":
        if kind != "number":
            return False
        role = subject.get("role") or "level"
        if value.role == "" or role == "any":
            return True
        if role in ("level", "delta"):  # "-0.21 %": a change of a percentage is a percentage
            return value.role in (role, "percent")
        return value.role == role or (role == "percent" and value.role == "level")
    if value.kind == "date":
        return kind in ("date", "dates")
    if value.kind == "label":
        if value.role == "synonym" and subject["key"] not in voc.directional:
            return False
        if value.role == "side" and not subject["key"].endswith("if_direction"):
            return False
        return value.value in subject["options"]
    return False


class _Clause:
    """One clause's terms and values, with the positions the binding compares."""

    def __init__(self, voc: Vocabulary, text: str):
        self.low = norm(text)
        self.words = [m.start() for m in re.finditer(r"\S+", self.low)]
        self.mentions = [(m.start(), m.group()) for m in voc.terms.finditer(self.low)]
        blocked = [(m.start(), m.end()) for m in _FILE.finditer(self.low)]
        self.dates = [
            (m.start(), m.group()) for m in _DATE.finditer(self.low) if not any(a <= m.start() < b for a, b in blocked)
        ]
        blocked += [(m.start(), m.end()) for m in _DATE.finditer(self.low)]
        spans = [(s, s + len(t)) for s, t in self.mentions if re.search(r"\d", t)]  # "at least 25", "ages 5-24"
        spans += [(m.start(), m.end()) for m in voc.labels.finditer(self.low) if re.search(r"\d", m.group())]
        self.values = _numbers(self.low, blocked + spans) + _labels(voc, self.low, blocked)
        # counts and ranks in words, unless part of a longer name ("over the last three" names a window)
        names = [(s, s + len(t)) for s, t in self.mentions if " " in t or "-" in t]
        self.values += [
            Value("number", float(n), a, role)
            for a, b, n, role in counts_in_words(self.low)
            if not any(x <= a < y for x, y in names + blocked)
            and not (role == "count" and _WINDOW_BEFORE.search(self.low[max(0, a - 24) : a]))
        ]
        self.values += [Value("date", d, s) for s, d in self.dates]
        self.segments = _segments(self.low)

    def word(self, offset: int) -> int:
        return bisect_right(self.words, offset)

    def segment(self, offset: int) -> tuple[int, int]:
        return next(((a, b) for a, b in self.segments if a <= offset < b), (0, len(self.low)))


def _score(voc: Vocabulary, clause: _Clause, key: str, value: Value) -> tuple[float, float, float]:
    """How well the value's segment names a subject, then its clause (the weights of the subject's
    distinct terms there), and how near its nearest term is (one before the value is nearer)."""
    terms = set(voc.subjects[key]["terms"])
    a, b = clause.segment(value.start)
    here, anywhere, near = set(), set(), 10.0**6
    at = clause.word(value.start)
    for start, term in clause.mentions:
        if term not in terms:
            continue
        anywhere.add(term)
        if a <= start < b:
            here.add(term)
        if start < 0:  # carried from the previous clause
            continue
        first, last = clause.word(start), clause.word(start + len(term) - 1)
        near = min(near, at - last if last <= at else first - at + AFTER)
    weight = voc.weights[key]
    if voc.subjects[key].get("prior") and not anywhere & set(voc.subjects[key]["names"]):
        return 0.0, 0.0, near  # the prior release's driver only in a clause that names that release
    if voc.subjects[key].get("column") and not here and not 0 <= near <= CELL_REACH:
        return 0.0, 0.0, near  # a table cell is named beside its figure: in its segment or just before it
    return round(sum(weight[t] for t in here), 9), round(sum(weight[t] for t in anywhere), 9), near


def _bind(voc: Vocabulary, clause: _Clause, value: Value, before: _Clause | None = None) -> str | None:
    """The subject a value is attached to (see the module docstring); `before`: the previous clause,
    whose subject a clause that refers back and names none carries on ("Stocks stood at 1092.6. It
    was 1093.5 a month earlier.")."""
    candidates = [k for k, s in voc.subjects.items() if _compatible(s, value, voc)]
    if not candidates:
        return None
    if before is not None and not clause.mentions and _ANAPHOR.match(clause.low):
        carried = _Clause.__new__(_Clause)
        carried.__dict__ = {**clause.__dict__, "mentions": [(-1, term) for _, term in before.mentions]}
        clause = carried  # the carried terms name the clause (at no place in it), never a segment
    scored = [
        ((here, anywhere, -near), key)
        for (here, anywhere, near), key in ((_score(voc, clause, k, value), k) for k in candidates)
    ]
    best = max(rank for rank, _ in scored)
    if value.kind == "label" and best[0] == 0 and _names_other(voc, clause, value, candidates):
        return None  # its segment is about a subject it cannot describe ("cause: x rose" says nothing of an outlook)
    if best[1] > 0:
        winners = [key for rank, key in scored if rank == best]
        keypoints = [key for key in winners if voc.subjects[key]["keypoint"]]
        winners = keypoints or winners  # on a tie, a keypoint before a table cell
        return winners[0] if len(winners) == 1 else None
    if value.kind == "label" and not value.role and value.value not in GENERIC_LABELS:
        # a label only one keypoint takes states it unnamed ("supply is tight"); not a word that names a
        # series or subject itself, nor the prior release's driver (the release must be named)
        owners = [k for k in voc.option_owners.get(value.value, []) if k in candidates]
        owners = [k for k in owners if not voc.subjects[k].get("prior") and value.value not in voc.by_term]
        if len(owners) == 1:
            return owners[0]
    return None


def _names_other(voc: Vocabulary, clause: _Clause, value: Value, candidates: list[str]) -> bool:
    """Whether the value's segment names, by its own name, a keypoint the value cannot be about."""
    a, b = clause.segment(value.start)
    here = {term for start, term in clause.mentions if a <= start < b}
    return any(
        here & set(s["names"] + (s.get("own") or []))
        for key, s in voc.subjects.items()
        if s["keypoint"] and key not in candidates and s["part"] is None
    )


def _when(clause: _Clause, value: Value, period: str) -> str:
    """ "earlier", "now" or "later": where the nearest time phrase of the value's segment places it."""
    if value.base:
        return "earlier"
    a, b = clause.segment(value.start)
    low = clause.low
    cues = [(m.end() - 1, "earlier") for m in _PLACE_EARLIER.finditer(low) if m.end() > a and m.start() < b]
    cues += [(m.start(), "later") for m in _PLACE_LATER.finditer(low) if a <= m.start() < b]
    names = [(s, s + len(t)) for s, t in clause.mentions if s >= 0]  # "latest" in "latest value" names, not places
    cues += [
        (m.start(), "now")
        for m in _PLACE_NOW.finditer(low)
        if a <= m.start() < b and not any(x <= m.start() < y for x, y in names)
    ]
    cues += [(s, "earlier" if d < norm(period) else "now") for s, d in clause.dates if a <= s < b and period]
    if not cues:
        return "now"
    return min(cues, key=lambda cue: abs(clause.word(cue[0]) - clause.word(value.start)))[1]


def _dateline(low: str, period: str) -> bool | None:
    """A clause that declares the period its text is about ("# report — 2025-11", "for the period
    2025-11", "Period 2025-12:"): True when that is an earlier period, False for this one."""
    if not _DATELINE.search(low):
        return None
    dates = {d for d in _DATE.findall(low)}
    if len(dates) != 1:
        return None
    (date,) = dates
    return date < norm(period) if date != norm(period) else False


_ANSWERED = re.compile(r"\b(?:true|yes|false|no|not|none|never)\b|n't\b")


def _polarity(segment: str) -> bool:
    if re.search(r"\b(?:true|yes)\b", segment):
        return True
    return not _NEGATION.search(segment)


_READINGS: dict[tuple[str, str], Reading] = {}


def sentences(report: str, unit: str = "") -> list[str]:
    """The clauses a report is read in (Claim.clause indexes them): its sentences and lines, after the cut
    (`unit`: the headline series' unit, lexicon["unit"], numbers are read in)."""
    return [part.strip() for part in _SENTENCE.split(normalise(cut(report), unit)) if part.strip()]


def read(report: str, lex: dict) -> Reading:
    """The claims of a report about this lexicon's subjects (see the module docstring); the last few
    hundred readings are kept, so every judge call about one report reads it once."""
    key = (report, lex.get("digest") or str(id(lex)))
    if key not in _READINGS:
        if len(_READINGS) > 512:
            _READINGS.clear()
        _READINGS[key] = _read(report, lex)
    return _READINGS[key]


def _read(report: str, lex: dict) -> Reading:
    voc = vocabulary(lex)
    period = lex.get("period", "")
    reading = Reading()
    frame_earlier = False
    previous = asked = None
    for index, text in enumerate(sentences(report, lex.get("unit", ""))):
        clause = _Clause(voc, text)
        declared = _dateline(clause.low, period)
        if declared is not None:
            frame_earlier = declared
        if text.rstrip().endswith("?"):  # a question states nothing; the answer after it is about its subject
            previous = asked = clause
            continue
        if asked is not None and not any(term in voc.keypoint_terms for _, term in clause.mentions):
            clause.mentions = [(-1, term) for _, term in asked.mentions] + clause.mentions
        asked = None
        if len([v for v in clause.values if v.kind == "number"]) > LISTING_NUMBERS:
            reading.listing.append(index)
            continue
        bound = [(value, _bind(voc, clause, value, previous)) for value in clause.values]
        previous = clause
        # a series named as the subject of its figure ("d4_kkm2 is 48.1") is not also a value of a list
        named = {
            start
            for value, key in bound
            if key and voc.subjects[key].get("column")
            for start, term in clause.mentions
            if term in voc.subjects[key]["terms"] and clause.segment(start) == clause.segment(value.start)
        }
        # ... nor is any name written as the subject of a figure in its segment ("good_excellent_pct is 32.8")
        figures = [clause.segment(v.start) for v in clause.values if v.kind == "number"]
        named |= {
            v.start
            for v in clause.values
            if v.kind == "label" and v.value in voc.by_term and clause.segment(v.start) in figures
        }
        # one word is one value: a word bound as an option ("stance steady") is not also its synonym ("flat")
        taken = {value.start for value, key in bound if key and value.kind == "label" and value.role != "synonym"}
        for value, key in bound:
            if key is None or (value.kind == "label" and value.start in named):
                continue
            if value.role == "synonym" and value.start in taken:
                continue
            if value.kind == "date" and value.value == norm(period):
                continue  # this period's own date is the report's dateline, not a value about a subject
            subject = voc.subjects[key]
            when = "now" if subject.get("timeless") or subject.get("prior") else _when(clause, value, period)
            if when == "later" and subject.get("forward"):
                when = "now"  # an outlook is about what comes next by nature
            earlier = frame_earlier or when == "earlier"
            said = _percent(clause.low, value) if subject.get("role") == "percent" else value.value
            reading.claims.append(Claim(key, said, earlier, index, text.strip(), value.start, when == "later"))
        _booleans(voc, clause, reading, index, text, frame_earlier, period)
        _sets_and_texts(voc, clause, reading, index, text, frame_earlier, period)
    mark_hedges(voc, reading, lex, SYNONYM_OF)
    return reading


def _percent(low: str, value: Value) -> Any:
    """A percentage written as a fraction ("a 0.7 probability", "a share of 0.192") in percent (70,
    19.2), to the precision it is written with; a number with a per cent sign, or one of 1 or more, as is."""
    written = _NUMBER.match(low, value.start)
    if value.kind != "number" or value.role == "percent" or written is None or not 0 < abs(value.value) < 1:
        return value.value
    decimals = len(written.group().partition(".")[2])
    return round(100 * value.value, max(0, decimals - 2))


def _booleans(voc, clause, reading, index, text, frame_earlier, period) -> None:
    for key, s in voc.subjects.items():
        if s["kind"] != "bool":
            continue
        for start, term in clause.mentions:
            if term in (s.get("own") or []) and voc.weight[term] == 1.0:
                a, b = clause.segment(start)
                others = [c for c in reading.claims if c.clause == index and c.subject != key and a <= c.start < b]
                if any(voc.subjects[c.subject]["keypoint"] for c in others):
                    continue  # "the release should record no event": the segment states another keypoint
                when = _when(clause, Value("bool", None, start), period)
                earlier = frame_earlier or when == "earlier"
                said = clause.low[a:b]
                if said.endswith(":") and not _ANSWERED.search(said):  # "Is record: no": the answer follows
                    said += clause.low[b : clause.segment(b)[1]]
                claim = Claim(key, _polarity(said), earlier, index, text.strip(), start, when == "later")
                reading.claims.append(claim)
                if not earlier:
                    break  # what an earlier release said does not end the clause ("was: yes | is: no")


def _sets_and_texts(voc, clause, reading, index, text, frame_earlier, period) -> None:
    for key, s in voc.subjects.items():
        if frame_earlier:
            continue
        if s["kind"] == "label" and "none" in s["options"]:  # "no event this month" states "none"
            named = [start for start, term in clause.mentions if term in s["terms"] and voc.weight[term] >= 0.5]
            bound = [c for c in reading.claims if c.clause == index and c.subject == key]
            if named and not bound and re.search(r"\b(?:no|none|nothing)\b", clause.low):
                reading.claims.append(Claim(key, "none", False, index, text.strip()))
            continue
        if s["kind"] not in ("set", "items", "dates", "text"):
            continue
        named = [start for start, term in clause.mentions if term in s["terms"] and voc.weight[term] >= 0.5]
        if not named:
            continue
        if s["kind"] == "text":
            reading.texts.setdefault(key, []).append(text.strip())
            continue
        bound = [c for c in reading.claims if c.clause == index and c.subject == key and not c.earlier and not c.later]
        if not bound and _negated_now(clause, period):
            reading.empty.add(key)


def _negated_now(clause: _Clause, period: str) -> bool:
    """A negation ("none", "no series") in a segment that speaks of this period, not an earlier one."""
    return any(
        _NEGATION.search(clause.low[a:b]) and _when(clause, Value("bool", None, a), period) != "earlier"
        for a, b in clause.segments
    )
