"""Hedges (judge/rules, reading.py): a report that gives a subject several answers for this period gives
none. Several values of one scalar; a set naming more items than its question could take; a set stated
whole twice, differently (neither statement holds the other), or said to be empty and not ("also", "as
well" add to a list instead); a judged text (a stated cause) given with different series or opposite
moves in two clauses. So the truth followed by its opposite states nothing.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tsbench.tasks.timesage.clauses import number_matches
from tsbench.tasks.timesage.subjects import norm

if TYPE_CHECKING:
    from tsbench.tasks.timesage.reading import Reading, Vocabulary

ITEM_SLACK = 1  # a set may name one item more than its truth holds before it is a listing
_ADDS = re.compile(r"\b(?:also|too|as well|another|additionally|in addition|plus|further|moreover)\b")


def mark_hedges(voc: Vocabulary, reading: Reading, lex: dict, synonyms: dict[str, str]) -> None:
    """Several values for now about one subject state none of them; a set listing more items than
    its question could take is a listing."""
    truths = lex.get("truths", {})
    for key, s in voc.subjects.items():
        if s["keypoint"] is None:
            continue
        now = [c for c in reading.claims if c.subject == key and not c.earlier and not c.later]
        said = [c.value for c in now]
        if s["kind"] == "text":
            if _texts_disagree(voc, reading.texts.get(key, []), synonyms):
                reading.hedged.add(key)
            continue
        if s["kind"] in ("set", "items", "dates"):
            if len({str(v) for v in said}) > max(2, len(truths.get(key) or []) + ITEM_SLACK):
                reading.hedged.add(key)
            # the set stated whole twice, differently (neither statement holds the other), or both empty
            # and not: the report gives two answers, which is none ("also", "as well" add to a list)
            whole = [
                frozenset(str(c.value) for c in now if c.clause == i)
                for i in sorted({c.clause for c in now if not _ADDS.search(norm(c.text))})
            ]
            if any(not (a <= b or b <= a) for a in whole for b in whole) or (said and key in reading.empty):
                reading.hedged.add(key)
            continue
        distinct: list[Any] = []
        for value in said:
            if not any(_same(value, other) for other in distinct):
                distinct.append(value)
        if len(distinct) > 1:
            reading.hedged.add(key)


def _texts_disagree(voc: Vocabulary, texts: list[str], synonyms: dict[str, str]) -> bool:
    """Clauses about one judged text (a stated cause) that name different series or opposite moves."""
    columns = [norm(s["column"]) for s in voc.lex["subjects"] if s.get("column")]
    named, moves = set(), set()
    for text in texts:
        low = norm(text)
        found = frozenset(c for c in columns if re.search(rf"(?<![a-z0-9]){re.escape(c)}(?![a-z0-9])", low))
        moved = frozenset(synonyms[w] for w in re.findall(r"[a-z]+", low) if w in synonyms)
        named |= {found} if found else set()
        moves |= {moved} if moved else set()
    return len(named) > 1 or len(moves) > 1


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return number_matches(a, b) or number_matches(b, a)
    return a == b
