"""The nearest known name to a misspelt one, for "did you mean" (one rule for every suggestion).

difflib's ratio favours a shorter name that shares a long prefix (`modle` -> `mode`); a typo is better
measured by the edits a hand makes: the optimal-string-alignment (Damerau-Levenshtein) distance, where a
swap of two neighbours is one edit. Ties go to the name with the same letters (`modle` and `model` are
anagrams), then to a name of the same section, then to the shorter, then alphabetically.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


def edit_distance(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and swaps of adjacent letters that turn `a` into `b`."""
    rows = [list(range(len(b) + 1))]
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            row[j] = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], rows[-2][j - 2] + 1)
        rows = [rows[-1], row]
    return rows[-1][len(b)]


def _letters_apart(a: str, b: str) -> int:
    ca, cb = Counter(a), Counter(b)
    return sum(((ca - cb) + (cb - ca)).values())


def nearest(word: str, known: Iterable[str], prefer: Iterable[str] = (), max_share: float = 0.4) -> str | None:
    """The known name fewest edits from `word`, within `max_share` of the longer name's length
    (at least one edit), or a name `word` is a prefix of / extends; None when nothing is near."""
    word_l = word.lower()
    prefer = set(prefer)
    ranked = []
    for name in dict.fromkeys(known):
        name_l = name.lower()
        distance = edit_distance(word_l, name_l)
        if distance <= max(1, int(max_share * max(len(word_l), len(name_l)))):
            ranked.append((distance, _letters_apart(word_l, name_l), name not in prefer, len(name), name))
    if ranked:
        return min(ranked)[-1]
    prefixed = [name for name in known if word_l.startswith(name.lower()) or name.lower().startswith(word_l)]
    return min(prefixed, key=lambda name: (name not in prefer, abs(len(name) - len(word)), name), default=None)
