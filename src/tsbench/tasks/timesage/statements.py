"""What a read report states about each keypoint (judge/rules): coverage, a verdict per claim, and
the report's substance, from reading.Reading and the period's lexicon (subjects.py).

- coverage: 1 / 0.5 / 0 per keypoint: the value stated for now about its subject; a set with every
  item and no other (an item paired with evidence needs its figures), an object with every part (a
  joint unit with a part stated wrong is 0, paper Table 7).
- unread: a figure that is the truth in another scale of its unit, written without a unit that says so,
  is unread (no coverage, neutral), never a contradiction: only an unambiguous wrong value contradicts.
- verdicts: a claim about a keypoint for now is tier1_supported when it is the keypoint's value,
  contradicts_keypoint when not (a part of a joint unit, also when a sibling part is stated wrong). Restating the context (a table cell, what the last release said)
  counts neither way (tier3_general_knowledge: spec "The offline judge"); a stale cell stated as
  current, or a figure found nowhere, is speculation.
- grounding: a judgement read from this period's readings (a state, direction, run, rank, record,
  component, flag or event, where the period also asks for a level, change, deviation or share)
  counts only in a report that states one of those readings right; otherwise it is a guess, covered
  by nothing and neutral.
- substance: the share of keypoints stated correctly, corrected for guessing (a label stated wrong
  costs 1 / (options - 1) of a keypoint, so a guess earns nothing on average): what writing quality is
  credited in proportion to; coverage is corrected for guessing the same way (corrected_coverage).
"""

from __future__ import annotations

import re
from typing import Any

from tsbench.tasks.timesage.clauses import number_matches, numbers_in
from tsbench.tasks.timesage.judge import MAX_CLAIMS, VERDICTS
from tsbench.tasks.timesage.reading import SYNONYM_OF, Claim, Reading
from tsbench.tasks.timesage.subjects import norm, option_counts

SUPPORTED, _, NEUTRAL, CONTRADICTS, SPECULATION = VERDICTS  # judge/rules has no tier-2 context to check


def _equal(said: Any, truth: Any) -> bool:
    if isinstance(truth, bool) or isinstance(said, bool):
        return isinstance(said, bool) and isinstance(truth, bool) and said == truth
    if isinstance(truth, (int, float)):
        return isinstance(said, (int, float)) and number_matches(float(said), float(truth))
    return norm(said) == norm(truth)


SCALES = (1e-9, 1e-6, 1e-3, 1e-2, 1e2, 1e3, 1e6, 1e9)  # another unit's scale (a share as a fraction: 1e-2)


def unread(said: Any, truth: Any) -> bool:
    """A figure that is the truth written in another scale of its unit (844900 for 844.9 million lb with
    no unit beside it): the reader cannot tell its unit, so it is unread (earns nothing, contradicts
    nothing), never a wrong value."""
    if isinstance(said, bool) or isinstance(truth, bool) or not isinstance(said, (int, float)):
        return False
    if not isinstance(truth, (int, float)) or truth == 0 or _equal(said, truth):
        return False
    return any(number_matches(float(said), float(truth) * k) for k in SCALES)


def _names(truth: list, item_key: str | None) -> list[str]:
    return [norm(t.get(item_key) if isinstance(t, dict) and item_key else t) for t in truth]


def _figures_stated(reading: Reading, item: dict, name: str, lex: dict) -> bool:
    """The numbers of an item's evidence ("wage_idx at 103.71 (+2.89)") stated about its series."""
    figures = [n for key, v in item.items() if isinstance(v, str) and norm(v) != name for n in numbers_in(v)]
    column = next((s["key"] for s in lex["subjects"] if s.get("column") and name.startswith(norm(s["column"]))), None)
    said = [c.value for c in reading.claims if c.subject == column] if column else []
    return all(any(number_matches(x, f) for x in said) for f in figures)


def _list_coverage(reading: Reading, subject: dict, truth: list, lex: dict) -> tuple[float, bool]:
    said = {norm(v) for v in reading.current(subject["key"])}
    if not truth:
        if said:
            return 0.0, True
        return (1.0, False) if subject["key"] in reading.empty else (0.0, False)
    names = _names(truth, subject.get("item"))
    if not said:
        return 0.0, subject["key"] in reading.empty
    credit = []
    for item, name in zip(truth, names):
        if name not in said:
            credit.append(0.0)
        elif isinstance(item, dict):
            credit.append(1.0 if _figures_stated(reading, item, name, lex) else 0.5)
        else:
            credit.append(1.0)
    extra = said - set(names)
    if sum(credit) == len(truth) and not extra:
        return 1.0, False
    return (0.5 if any(credit) else 0.0), bool(extra)


def _object_coverage(reading: Reading, lex: dict, key: str, truth: dict, joint: bool) -> tuple[float, bool]:
    parts = []
    for name, value in truth.items():
        said = reading.current(f"{key}.{name}")
        parts.append(0 if not said else 1 if any(_equal(s, value) for s in said) else -1)
    found, wrong = parts.count(1), parts.count(-1)
    if found == len(parts):
        return 1.0, False
    if wrong and joint:
        return 0.0, True
    return (0.5 if found else 0.0), bool(wrong)


def _words(text: str) -> list[str]:
    return [SYNONYM_OF.get(w, w) for w in re.findall(r"[a-z0-9%]+(?:[.-][a-z0-9]+)*", norm(text)) if len(w) > 2]


def _text_coverage(reading: Reading, lex: dict, key: str, truth: str) -> tuple[float, bool]:
    """A judged text (a stated cause, "wage_idx rose"): every content word in a clause about it."""
    wanted = set(_words(truth))
    columns = {norm(s["column"]) for s in lex["subjects"] if s.get("column")}
    best, wrong = 0.0, False
    for clause in (norm(text) for text in reading.texts.get(key, [])):
        have = set(_words(clause))
        share = len(wanted & have) / len(wanted) if wanted else 0.0
        best = max(best, 1.0 if share == 1.0 else 0.5 if share > 0 else 0.0)
        named = {c for c in columns if re.search(rf"(?<![a-z0-9]){re.escape(c)}(?![a-z0-9])", clause)}
        if named and not any(c in norm(truth) for c in named):
            wrong = True
    return best, wrong and best < 1.0


def keypoint_coverage(reading: Reading, lex: dict, key: str) -> tuple[float | None, bool]:
    """(1 / 0.5 / 0, stated wrong) for one keypoint; (None, False) when it has no truth to state.
    A judgement stated right in a report that states none of the period's readings right is a guess
    (0, not wrong)."""
    truth = lex["truths"].get(key)
    subject = next((s for s in lex["subjects"] if s["key"] == key), None)
    if truth is None or subject is None:
        return None, False
    covered, wrong = _stated(reading, lex, subject, truth)
    if covered and not grounded(reading, lex, subject):
        return 0.0, False
    return covered, wrong


def _stated(reading: Reading, lex: dict, subject: dict, truth: Any) -> tuple[float, bool]:
    key, kind = subject["key"], subject["kind"]
    if kind == "object":
        return _object_coverage(reading, lex, key, truth, bool(subject.get("joint")))
    if kind in ("set", "items", "dates"):
        return _list_coverage(reading, subject, truth if isinstance(truth, list) else [truth], lex)
    if kind == "text":
        return (0.0, False) if key in reading.hedged else _text_coverage(reading, lex, key, str(truth))
    said = [s for s in reading.current(key) if not unread(s, truth)]
    if not said:
        return 0.0, False
    return (1.0, False) if any(_equal(s, truth) for s in said) else (0.0, True)


def grounded(reading: Reading, lex: dict, subject: dict) -> bool:
    """Whether a judgement stands on evidence: the report states at least one of the readings it rests
    on (subjects.lexicon: the period's levels, changes, deviations, shares) right, or it rests on none."""
    readings = subject.get("rests_on") or []
    return not readings or any(keypoint_coverage(reading, lex, key)[0] for key in readings)


def guess_cost(covered: float, wrong: bool, options: int) -> float:
    """What a keypoint stated wrong costs, so that a guess among `options` values earns nothing on
    average: 1 / (options - 1) of the share it misses (a yes/no stated wrong takes back one right)."""
    return (1.0 - covered) / (options - 1) if wrong and options > 1 else 0.0


def substance(reading: Reading, lex: dict) -> float:
    """The share of keypoints stated correctly, corrected for guessing, in [0, 1]."""
    counts = option_counts(lex)
    total, keypoints = 0.0, 0
    for key in counts:
        covered, wrong = keypoint_coverage(reading, lex, key)
        if covered is None:
            continue
        keypoints += 1
        total += covered - guess_cost(covered, wrong, counts[key])
    return max(0.0, total / keypoints) if keypoints else 0.0


def corrected_coverage(reading: Reading, lex: dict, per_keypoint: dict[str, float]) -> float:
    """The mean of the judge's per-keypoint coverage less the guess cost of each keypoint stated wrong
    (guess_cost), clipped at 0, in [0, 1]: a report of guessed labels covers nothing on average."""
    counts = option_counts(lex)
    total = 0.0
    for key, covered in per_keypoint.items():
        _, wrong = keypoint_coverage(reading, lex, key)
        total += covered - guess_cost(covered, wrong, counts.get(key, 0))
    return max(0.0, total / len(per_keypoint)) if per_keypoint else 0.0


def _names_of(lex: dict) -> dict[str, str]:
    out = {}
    for s in lex["subjects"]:
        base = s.get("column") or s["key"].removeprefix("kp_")
        out[s["key"]] = base.replace("col:", "")
    return out


def claim_list(reading: Reading, lex: dict) -> list[tuple[str, Claim | tuple[str, Any]]]:
    """At most MAX_CLAIMS (text, claim) pairs, one value about one subject each, claims about this
    period's keypoints first (so restated context cannot crowd them out), duplicates dropped."""
    subjects = {s["key"]: s for s in lex["subjects"]}
    names = _names_of(lex)
    seen, first, rest = set(), [], []
    for claim in reading.claims:
        if claim.subject in reading.hedged:
            continue
        ident = (claim.subject, str(claim.value), claim.earlier, claim.later)
        if ident in seen:
            continue
        seen.add(ident)
        about_now = subjects[claim.subject]["keypoint"] is not None and not claim.earlier and not claim.later
        (first if about_now else rest).append((claim.render(names), claim))
    for key in sorted(reading.empty - reading.hedged):
        if not any(c.subject == key and not c.earlier and not c.later for c in reading.claims):
            first.append((f"{names.get(key, key)} = none", (key, [])))
    for key, texts in reading.texts.items():
        covered, wrong = keypoint_coverage(reading, lex, key)
        if covered or wrong:
            first.append((f"{names.get(key, key)} :: {texts[0]}", (key, "text")))
    return (first + rest)[:MAX_CLAIMS]


def verdict(reading: Reading, lex: dict, claim: Claim | tuple[str, Any]) -> str:
    """The rules judge's verdict on one claim of `claim_list` (see the module docstring)."""
    if isinstance(claim, tuple):  # an empty-set statement or a judged text
        key, what = claim
        subject = next(s for s in lex["subjects"] if s["key"] == key)
        truth = lex["truths"].get(key)
        right = _stated(reading, lex, subject, truth)[0] == 1.0 if what == "text" else truth == []
        if not right:
            return CONTRADICTS
        return SUPPORTED if grounded(reading, lex, subject) else NEUTRAL
    subject = next(s for s in lex["subjects"] if s["key"] == claim.subject)
    if claim.later:
        return NEUTRAL  # a forecast of what is not an outlook: nothing of this period to check it against
    if subject["keypoint"] is None:
        return _cell_verdict(lex, subject["column"], claim)
    truth = lex["truths"].get(claim.subject)
    if claim.earlier:
        prior = lex.get("prior", {}).get(claim.subject)
        return NEUTRAL if prior is not None and _member_or_equal(claim.value, prior, subject) else SPECULATION
    if truth is None:
        return SPECULATION
    if unread(claim.value, truth):
        return NEUTRAL  # the truth in another unit's scale: unread, neither way
    if not _member_or_equal(claim.value, truth, subject) or _unit_broken(reading, lex, subject):
        return CONTRADICTS
    if not grounded(reading, lex, subject):
        return NEUTRAL  # right, but standing on no reading of this period: a guess as far as a reader can tell
    return SUPPORTED


def _unit_broken(reading: Reading, lex: dict, subject: dict) -> bool:
    """A part of a joint unit (an outlook's regime, probability and horizon; a guidance's stance and
    horizon: paper Table 7) is one claim with its sibling parts: one part stated wrong makes it wrong."""
    parent = next((s for s in lex["subjects"] if s["key"] == subject["keypoint"]), None)
    if subject["part"] is None or parent is None or not parent.get("joint"):
        return False
    truth = lex["truths"].get(parent["key"]) or {}
    return any(
        not _equal(said, value) for name, value in truth.items() for said in reading.current(f"{parent['key']}.{name}")
    )


def _member_or_equal(value: Any, truth: Any, subject: dict) -> bool:
    if isinstance(truth, list):
        return norm(value) in _names(truth, subject.get("item"))
    return _equal(value, truth)


def _cell_verdict(lex: dict, column: str, claim: Claim) -> str:
    """A figure about a series of the table: restated context (neutral) when it is the series'
    value or change where the claim places it; a stale value stated as current, or one found in no
    visible row, is speculation."""
    rows = [r for r in lex.get("rows") or [] if column in r]
    if not rows or not isinstance(claim.value, (int, float)):
        return SPECULATION
    values = [r[column] for r in rows]
    changes = [b - a for a, b in zip(values, values[1:])]
    now = [values[-1], *changes[-1:]]
    before = values[:-1] + changes[:-1]
    pool = before if claim.earlier else now
    return NEUTRAL if any(number_matches(float(claim.value), x) for x in pool) else SPECULATION
