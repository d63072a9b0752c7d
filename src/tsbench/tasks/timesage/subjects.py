"""What a period's keypoints are about, by meaning: one vocabulary per subject, built from the scenario
contract (spec "The offline judge": a subject is recognised by any name the scenario gives it).

A *subject* is a thing a report can state a value about: a keypoint (or one part of a composite
keypoint) or a series of the table (context). Its terms are the field's name, the keypoint's own
subject words, the nouns of the field's question, the series' column name, meaning and unit, and the
words analysts use for the question's kind (TAG_WORDS: "the headline reading" names the latest value,
"fell by" names a change). `lexicon(gold)` returns plain data (it travels in judge calls' context
and their cache key); reading.py binds a report's values to these subjects.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from tsbench.tasks.timesage.taxonomy import EVIDENCE_TAG, SUMMARY_TAG

# Words analysts write for a question kind, beside the scenario's own names for it.
TAG_WORDS = {
    "A1": "status state position condition category classification band rating regime reading of conditions",
    "A2": "latest level reading value headline figure print stood stands came in came to total currently",
    "A3": "direction moved move movement since the previous month on month week on week",
    "B1": "change changed rose by fell by rise of fall of increase decrease gain drop decline moved by adjusted figure",
    "B2": "direction adjusted figure moved move against the previous",
    "B3": "three releases three-release three periods three-month three-week trend over the last three",
    "B4": "consecutive in a row straight streak running run same direction",
    "B5": "deviation reference level reference baseline above the reference below the reference from the reference",
    "B6": "record highest high peak top",
    "B7": "rank ranks ranked ranking place",
    "C1": "top two largest leading biggest components",
    "C2": "dominant single largest leading biggest main component",
    "C3": "share shares breakdown composition percent of the total",
    "C4": "major bucket at least 25",
    "D1": "flagged flag unusual unusually anomalous anomaly anomalies outlier outliers",
    "D2": "event classification classified classify",
    "E1": "cause because driven by due to caused reflects owing to",
    "E2": "primary driver main driver key driver chief driver",
    "E3": "secondary drivers secondary driver other drivers",
    "E4": "drivers driver named for the change supported by",
    "E5": "stakeholders stakeholder affected affects hit exposed",
    "E6": "guidance stance horizon",
    "E7": "year earlier a year ago year ago year on year same period last year compared with",
    "F1": "risk risks upside downside",
    "F2": "outlook expects expected expect next forecast ahead",
    "F3": "outlook expects expected expect probability confidence chance likely",
    "F4": "conditional if then would",
}
# Phrases TAG_WORDS splits into: multi-word names first, then single words.
_PHRASES = re.compile(
    r"in a row|month on month|week on week|year on year|same period last year|a year ago|year ago|year earlier|"
    r"since the previous|reference level|main driver|primary driver|key driver|chief driver|secondary drivers?|"
    r"other drivers|single largest|two largest|at least 25|of the total|driven by|due to|owing to|came in|came to|"
    r"rose by|fell by|rise of|fall of|moved by|adjusted figure|three releases|three periods|over the last three|"
    r"same direction|above the reference|below the reference|from the reference|compared with|against the previous|"
    r"supported by|named for the change|reading of conditions|over the next|\S+"
)
PART_WORDS = {  # the parts of composite keypoints
    "probability": "probability confidence chance likelihood odds",
    "horizon": "horizon ahead over the next months weeks days releases periods within",
    "regime": "regime expects expected expect",
    "stance": "stance guidance",
    "reference": "reference compared with against",
    "direction": "direction",
    "if_driver": "if",
    "if_direction": "if stays should remains keeps normal",
    "then_direction": "then would will could",
}
# Words that name no subject: the question's grammar, time placement and generic report words.
_STOP = set(
    "what which will does this that from with than into over under their there these those given each is are was "
    "the a an of in on at to for by and or as its it be been has have had how many much since last next during "
    "about state stated report release releases period periods month week weeks months year years day days name "
    "named show shows give gives value previous current single same earlier below above less more possibly "
    "include includes issuer publishes published one short phrase count only available you ending this any "
    "as whose latest highest".split()
)
_WORD = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")
ROLES = {"A2": "level", "B1": "delta", "B3": "delta", "B5": "delta", "B4": "count", "B7": "rank"}
DIRECTIONS = ("up", "down", "flat")


def norm(text: Any) -> str:
    """How the reader compares words: lower case, underscores as spaces, one kind of minus."""
    return str(text).lower().replace("_", " ").replace("\u2212", "-").strip()


_GRAMMAR = set("the a an of in on at to by for and or is are was over with from".split())


def _phrases(text: str) -> list[str]:
    return [norm(p) for p in _PHRASES.findall(text.lower()) if p not in _GRAMMAR]


def _nouns(question: str, exclude: set[str]) -> list[str]:
    """Content words of a question (before its '?'), its grammar and the values it offers left out."""
    head = question.split("?")[0]
    words = [w for w in _WORD.findall(head.lower()) if len(w) > 2 and w not in _STOP]
    return [norm(w) for w in words if norm(w) not in exclude]


def table_columns(gold: dict) -> dict[str, str]:
    """column -> meaning (with unit), from the scenario's "Table columns:" context line."""
    for line in gold.get("context") or []:
        if line.startswith("Table columns: "):
            pairs = [part.split(" = ", 1) for part in line[len("Table columns: ") :].split("; ")]
            return {p[0].strip(): p[1].strip() for p in pairs if len(p) == 2 and p[0].strip() != "date"}
    return {}


def table_rows(gold: dict) -> list[dict[str, float]]:
    """The visible rows the context carries (the last few, the current one last), as numbers."""
    rows = []
    for line in gold.get("context") or []:
        if line.startswith("Row "):
            row: dict[str, Any] = {}
            for pair in line[4:].split(", "):
                key, _, value = pair.partition("=")
                try:
                    row[key] = value if key == "date" else float(value)
                except ValueError:
                    continue
            rows.append(row)
    return rows


def headline(columns: dict[str, str], fields: list[dict]) -> str | None:
    """The series most questions are about (the first column on a tie)."""
    if not columns:
        return None
    said = {c: sum(c in f["question"] for f in fields) for c in columns}
    return max(columns, key=lambda c: (said[c], -list(columns).index(c)))


def _kind(schema: dict, tag: str) -> str:
    if tag == "E1" or schema.get("type") == "string" and "enum" not in schema:
        return "text"
    if schema.get("type") == "boolean":
        return "bool"
    if schema.get("type") in ("number", "integer"):
        return "number"
    if schema.get("type") == "array":
        items = schema.get("items") or {}
        return "items" if items.get("type") == "object" else "set" if items.get("enum") else "dates"
    if schema.get("type") == "object":
        return "object"
    return "label"


def _options(schema: dict) -> list[str]:
    items = schema.get("items") or {}
    if schema.get("enum"):
        return [str(x) for x in schema["enum"]]
    if items.get("enum"):
        return [str(x) for x in items["enum"]]
    for sub in (items.get("properties") or {}).values():
        if sub.get("enum"):
            return [str(x) for x in sub["enum"]]
    return []


def enum_options(schema: dict) -> list[str]:
    """Every enum label a field's schema allows, its items' and sub-fields' included."""
    found = [str(x) for x in schema.get("enum") or []]
    found += enum_options(schema["items"]) if isinstance(schema.get("items"), dict) else []
    for sub in (schema.get("properties") or {}).values():
        found += enum_options(sub)
    return found


def enum_groups(schema: dict) -> list[list[str]]:
    """Each enum of a field's schema on its own (the field's, its items', each sub-field's): one
    clause naming several options of ONE enum lists them; options of different enums do not."""
    groups = [[str(x) for x in schema["enum"]]] if schema.get("enum") else []
    if isinstance(schema.get("items"), dict):
        groups += enum_groups(schema["items"])
    for sub in (schema.get("properties") or {}).values():
        groups += enum_groups(sub)
    return groups


def _subject(key, keypoint, kind, terms, options=(), role="", part=None, names=(), **extra) -> dict:
    """`names`: what the scenario calls the subject itself (its field, part or column name, its display
    name); they weigh as that subject's own name, other terms as shared words."""
    names = [n for n in dict.fromkeys(names) if n]
    return {
        "key": key,
        "keypoint": keypoint,
        "part": part,
        "kind": kind,
        "role": role,
        "options": list(dict.fromkeys(options)),
        "terms": [t for t in dict.fromkeys([*names, *terms]) if t],
        "names": names,
        **extra,
    }


def _part_role(name: str, sub: dict) -> str:
    if name == "probability":
        return "percent"
    if name == "horizon":
        return "count"
    return "percent" if sub.get("type") in ("number", "integer") else ""


def lexicon(gold: dict) -> dict:
    """Every subject of a period (keypoints, their parts, the table's other series) with its terms,
    plus what the reader checks claims against: the truths, what the last release said, the rows."""
    fields = {f["name"]: f for f in gold["fields"]}
    columns = table_columns(gold)
    head = headline(columns, gold["fields"])
    labels = {norm(o) for f in gold["fields"] for o in enum_options(f.get("schema") or {})}
    unit = re.search(r"\(([^()]*)\)\s*$", columns.get(head, "")) if head else None
    head_terms = [norm(head), *(_phrases(columns.get(head, "").split(" (")[0]))] if head else []
    head_terms += [norm(unit.group(1))] if unit else []
    subjects = []
    for kp in gold["keypoints"]:
        spec = fields.get(kp.get("field") or "")
        if spec is None:  # the prior-document keypoint: a series the previous release named
            names = [norm(s) for s in kp.get("subject") or []]  # "gt_source" names any prior file
            terms = _nouns(kp.get("description", ""), set()) + ["named", "cited", "listed"]
            terms += ["previous release", "prior release", "last release", "previous report", "prior report"]
            drivers = [norm(c) for c in columns if c != head]
            subjects.append(
                _subject(kp["id"], kp["id"], "label", terms, drivers, names=names, timeless=True, prior=True)
            )
            continue
        tag, schema = spec["tag"], spec.get("schema") or {}
        if tag in (SUMMARY_TAG, EVIDENCE_TAG):
            continue
        options = [norm(o) for o in _options(schema)]
        names = [norm(spec["name"]), *(norm(s) for s in kp.get("subject") or [])]
        terms = _phrases(TAG_WORDS.get(tag, "")) + _nouns(spec["question"], labels)
        if tag in ("A2", "B1", "B3", "B5", "A3", "B2", "B6", "B7", "B4"):
            terms += head_terms
        kind = _kind(schema, tag)
        timeless = tag == "E7"  # a comparison with an earlier period
        forward = tag in ("E6", "F1", "F2", "F3", "F4")  # guidance and outlooks speak of what comes next
        if kind == "items" and spec.get("item_key") == "risk":
            drivers = [c for c in columns if c != head]
            options = [norm(f"{d}_{side}") for d in drivers for side in ("upside", "downside")]
        if kind == "object":
            base = _subject(kp["id"], kp["id"], "object", terms, names=names, joint=spec.get("rule") == "joint")
            base["forward"] = forward
            subjects.append(base)
            for name, sub in (schema.get("properties") or {}).items():
                own = _phrases(PART_WORDS.get(name, ""))
                # a share (C3): its component's name is its subject, not the part's words
                part_terms = [*names, *terms] if tag == "C3" else [*names, *own, *terms]
                numeric = sub.get("type") in ("number", "integer")
                part_kind = "date" if name == "reference" else "number" if numeric else "label"
                part_options = [norm(o) for o in sub.get("enum") or []]
                subjects.append(
                    _subject(
                        f"{kp['id']}.{name}",
                        kp["id"],
                        part_kind,
                        part_terms,
                        part_options,
                        _part_role(name, sub),
                        part=name,
                        names=[norm(name)],
                        own=own,
                        timeless=timeless,
                        forward=forward,
                    )
                )
            continue
        subjects.append(
            _subject(
                kp["id"],
                kp["id"],
                kind,
                terms,
                options,
                ROLES.get(tag, ""),
                names=names,
                own=[*names, *_phrases(TAG_WORDS.get(tag, ""))],
                timeless=timeless,
                forward=forward,
                item=spec.get("item_key"),
            )
        )
    # a judgement (a state, direction, run, rank, record, component, flag, event) is read from this
    # period's readings: where the period asks for one, a judgement counts only beside a reading
    # stated right (statements.grounded), else it is a guess as far as a reader can tell
    readings = [s["key"] for s in subjects if _is_reading(s, subjects)]
    for s in subjects:
        if readings and s["keypoint"] and s["part"] is None and not s.get("prior") and s["key"] not in readings:
            s["rests_on"] = readings
    for col, meaning in columns.items():
        if col == head:  # its figures are the keypoints' first: a word it shares with them, not a name
            subjects.append(_subject(f"col:{col}", None, "number", [norm(col)], role="any", column=col))
            continue
        names = [norm(col), norm(meaning.split(" (")[0])]
        subjects.append(_subject(f"col:{col}", None, "number", [], role="any", names=names, column=col))
    lex = {
        "period": gold.get("period_label", ""),
        "subjects": subjects,
        "truths": _truths(gold),
        "prior": _prior(gold),
        "rows": table_rows(gold),
        "headline": head,
        "unit": unit.group(1).strip() if unit else "",  # numbers are read in it (numerals.py)
    }
    # the subjects alone key the compiled vocabulary (one per scenario); the whole lexicon keys readings
    lex["vocabulary"] = _digest(subjects)
    lex["digest"] = _digest(lex)
    return lex


def _is_reading(subject: dict, subjects: list[dict]) -> bool:
    """A figure read from this period's data: a level, a change or a deviation (a scalar keypoint),
    or an object of such figures (shares); not a count or a rank (guessable, read from figures),
    nor an outlook's figures (a forecast), nor the prior release's driver."""
    if subject["keypoint"] is None or subject["part"] is not None or subject.get("forward") or subject.get("prior"):
        return False
    if subject["kind"] == "number":
        return subject.get("role") in ("level", "delta")
    if subject["kind"] == "object":
        return any(p["keypoint"] == subject["key"] and p["part"] and p["kind"] == "number" for p in subjects)
    return False


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _truths(gold: dict) -> dict[str, Any]:
    """Subject key -> the value the period's keypoint states (a composite's parts under key.part)."""
    out: dict[str, Any] = {}
    for kp in gold["keypoints"]:
        truth = kp.get("truth")
        out[kp["id"]] = truth
        if isinstance(truth, dict):
            out.update({f"{kp['id']}.{k}": v for k, v in truth.items()})
    return out


def _prior(gold: dict) -> dict[str, Any]:
    """Subject key -> what the last visible release stated for it (a true statement about then)."""
    stated = gold.get("prior_truth") or {}
    out: dict[str, Any] = {}
    for kp in gold["keypoints"]:
        value = stated.get(kp.get("field") or "")
        if value is None:
            continue
        out[kp["id"]] = value
        if isinstance(value, dict):
            out.update({f"{kp['id']}.{k}": v for k, v in value.items()})
    return out


def option_counts(lex: dict) -> dict[str, int]:
    """Keypoint id -> how many values a guess could pick from (labels: the enum; yes/no: 2; a set: 2,
    empty or not; anything numeric or free: 0, never guessed right)."""
    out: dict[str, int] = {}
    for s in lex["subjects"]:
        if s["keypoint"] is None or s["part"] is not None:
            continue
        if s["kind"] == "label":
            out[s["key"]] = len(s["options"])
        elif s["kind"] in ("bool", "set", "items", "dates"):  # yes or no; empty or not
            out[s["key"]] = 2
        else:
            out[s["key"]] = 0
    return out
