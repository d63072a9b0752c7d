"""How TimeClaw's own code (github.com/iDEA-iSAIL-Lab-UIUC/TimeClaw, timeclaw/evaluation/) samples,
splits and reads its benchmarks, for the families it evaluates (TSRBench, TSAIA).

`subsample` keeps ceil(ratio x n) records of each group (at least one), `split_train_test` gives
ceil(train_ratio x n) of each group to train (at least one) and the rest to test; both shuffle each
group's positions with one `random.Random(seed)` drawn over the groups in sorted order, so the result
depends on the group sizes and the seed only (the paper's Table 11: subsample seed 42, split seed 2026,
train ratio 0.5; TSRBench at ratio 0.2 gives its 825 items). `mc_letter` is its multiple-choice
parser: a tagged <answer>X</answer>, else "answer (is|:) X", else the last standalone capital letter.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

SUBSAMPLE_SEED = 42
SPLIT_SEED = 2026
TRAIN_RATIO = 0.5


def _groups(records: Sequence[T], key: Callable[[T], str]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        groups.setdefault(key(record), []).append(index)
    return groups


def subsample(records: Sequence[T], key: Callable[[T], str], ratio: float, seed: int = SUBSAMPLE_SEED) -> list[T]:
    """The records TimeClaw's `subsample_groups` keeps, in their original order."""
    if ratio >= 1.0:
        return list(records)
    if ratio <= 0.0:
        return []
    rng, keep = random.Random(seed), set()
    for _, positions in sorted(_groups(records, key).items()):
        rng.shuffle(positions)
        keep.update(positions[: min(len(positions), max(1, math.ceil(ratio * len(positions))))])
    return [records[i] for i in sorted(keep)]


def split_train_test(
    records: Sequence[T], key: Callable[[T], str], train_ratio: float = TRAIN_RATIO, seed: int = SPLIT_SEED
) -> tuple[list[T], list[T]]:
    """(train, test) as TimeClaw's `split_train_test` draws them, each in the original order."""
    if not 0.0 <= train_ratio <= 1.0:
        raise ValueError(f"train_ratio must be in [0, 1], got {train_ratio}")
    rng, train = random.Random(seed), set()
    for _, positions in sorted(_groups(records, key).items()):
        rng.shuffle(positions)
        train.update(positions[: min(len(positions), max(1, math.ceil(train_ratio * len(positions))))])
    return [r for i, r in enumerate(records) if i in train], [r for i, r in enumerate(records) if i not in train]


# TimeClaw's patterns with possessive white space (`\s*+`): each run of it is followed by a token that
# is not white space, so giving some back never makes a match, and "answer" + a megabyte of spaces
# no longer splits them among three \s* in every way (cubic: over 5 s for 40 KB).
_TAGGED = re.compile(r"<\s*+answer\s*+>\s*+([A-Z])\s*+<\s*+/\s*+answer\s*+>", re.IGNORECASE)
_STATED = re.compile(r"(?:final\s++answer|answer)\s*+(?:is|:)?\s*+\(?\s*+([A-Z])\b", re.IGNORECASE)
_STANDALONE = re.compile(r"\b([A-Z])\b")


def mc_letter(text: str, n_options: int) -> str | None:
    """The letter TimeClaw's `parse_mc_letter` reads, over its valid letters (the first min(n, 5))."""
    if not text:
        return None
    valid = "ABCDE"[: max(0, min(n_options, 5))]
    for pattern in (_TAGGED, _STATED):
        found = pattern.search(text)
        if found and found.group(1).upper() in valid:
            return found.group(1).upper()
    letters = [letter for letter in _STANDALONE.findall(text) if letter in valid]
    return letters[-1] if letters else None
