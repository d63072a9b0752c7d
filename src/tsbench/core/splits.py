"""TimeClaw's grouped splits (its `split_train_test` and `subsample_groups`), as pure functions of
the records' group keys in file order.

Both walk the groups in sorted key order with ONE `random.Random(seed)` shared by all groups, shuffle
each group's record positions (in file order) with it, and keep the first ceil(ratio * n) of them,
at least `min_per_group` and at most n. The positions returned are sorted, i.e. in file order, so the
same records in the same order always give the same split, and a change in one group's size moves
the draws of every group after it (as it does in TimeClaw). The vectors in tests/golden/timeclaw/
pin this against the authors' code.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Sequence


def _groups(keys: Sequence[Hashable]) -> list[list[int]]:
    positions: dict[Hashable, list[int]] = {}
    for position, key in enumerate(keys):
        positions.setdefault(key, []).append(position)
    return [positions[key] for key in sorted(positions)]


def _draws(keys: Sequence[Hashable], ratio: float, seed: int, least: int) -> list[tuple[list[int], int]]:
    """(a group's shuffled positions, how many of them are taken) per group, in draw order."""
    draw = random.Random(seed)
    out = []
    for group in _groups(keys):
        draw.shuffle(group)
        out.append((group, min(len(group), max(least, math.ceil(ratio * len(group))))))
    return out


def timeclaw_split(
    keys: Sequence[Hashable], train_ratio: float = 0.5, seed: int = 2026, min_train: int = 1
) -> tuple[list[int], list[int]]:
    """(train positions, test positions) of records whose group keys are `keys`, in file order.

    Per group of n records, ceil(train_ratio * n) go to train (at least `min_train`, at most n) and
    the rest to test: a group of one is train only; 0.5 of 5 is 3 train and 2 test."""
    if not 0.0 <= train_ratio <= 1.0:
        raise ValueError(f"train_ratio must be in [0, 1], got {train_ratio}")
    train: list[int] = []
    test: list[int] = []
    for group, taken in _draws(keys, train_ratio, seed, min_train):
        train += group[:taken]
        test += group[taken:]
    return sorted(train), sorted(test)


def timeclaw_subsample(keys: Sequence[Hashable], ratio: float, seed: int = 42, min_per_group: int = 1) -> list[int]:
    """Positions kept when each group is cut to ceil(ratio * n) records (at least `min_per_group`):
    everything at ratio >= 1, nothing at ratio <= 0 (TimeClaw's --ratio, seed 42)."""
    if ratio >= 1.0:
        return list(range(len(keys)))
    if ratio <= 0.0:
        return []
    kept = [p for group, taken in _draws(keys, ratio, seed, min_per_group) for p in group[:taken]]
    return sorted(kept)
