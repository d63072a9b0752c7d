"""Window sampling of the generalization sets (paper §4.3 and Appendix F), pure and seeded.

A recording is reduced to its annotated events (half-open sample spans) and the regions a
window may lie in (LTAF: normal-sinus-rhythm bouts; Sleep-PSG: non-wake spans). Then:

* A positive window holds exactly one target event and no other annotated event: it is drawn
  inside the event's corridor, clipped at the nearest neighbouring events (and at the region the
  event sits in when `positive_in_regions`). The event keeps `edge_fraction` of L clear of both
  edges, so no anomaly sits at a window edge.
* Its length L is drawn uniformly over the supported range [min_s, max_s] x fs, capped at `cap`
  samples and at what the corridor allows; its offset uniformly over the placements that keep
  the event inside and away from the edges.
* Kinds are served round-robin under equal quotas until every quota is met (a kind that runs out
  of usable events leaves its share to the others).
* `negative_share` of the windows (20 %) are anomaly-free: drawn from clean gaps (inside the
  regions, clear of every event) with lengths from the same range.

Everything is a function of the inputs and the seed: the same seed gives the same windows.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

Span = tuple[int, int]


@dataclass(frozen=True)
class Event:
    start: int
    end: int  # exclusive
    kind: str | None = None  # a target kind, or None: annotated, never a target, blocks windows


@dataclass
class Recording:
    key: str  # unique and stable (the record's path relative to --path)
    length: int
    fs: float
    events: list[Event]
    regions: list[Span] | None = None  # spans windows must lie in; None: the whole recording

    def __post_init__(self) -> None:
        if self.regions is not None:
            self.regions = sorted((int(a), int(b)) for a, b in self.regions if b > a)


@dataclass(frozen=True)
class WindowRules:
    min_s: float
    max_s: float
    cap: int = 131_072
    n_windows: int = 250
    negative_share: float = 0.2
    edge_fraction: float = 0.05
    positive_in_regions: bool = True

    def lengths(self, fs: float) -> tuple[int, int]:
        return math.ceil(self.min_s * fs), min(math.floor(self.max_s * fs), self.cap)


@dataclass(frozen=True)
class Window:
    key: str
    start: int
    end: int
    kind: str | None  # None: anomaly-free
    gold: Span | None  # the event, relative to the window start

    @property
    def length(self) -> int:
        return self.end - self.start


class _Index:
    """A recording's events sorted by start, with running maxima of their ends."""

    def __init__(self, rec: Recording):
        self.events = sorted(rec.events, key=lambda e: (e.start, e.end))
        self.starts = np.array([e.start for e in self.events], dtype=np.int64)
        ends = np.array([e.end for e in self.events], dtype=np.int64)
        self.max_end_before = np.concatenate([[-1], np.maximum.accumulate(ends)]) if len(ends) else np.array([-1])

    def corridor(self, i: int, length: int) -> Span | None:
        """(lo, hi): the free span around event i up to its neighbours; None if another event overlaps it."""
        event = self.events[i]
        lo = int(self.max_end_before[i])  # the latest end among events starting before this one
        if lo > event.start:
            return None
        hi = int(self.starts[i + 1]) if i + 1 < len(self.events) else length
        if hi < event.end:
            return None
        return max(lo, 0), min(hi, length)


def _region_of(span: Span, regions: list[Span] | None, length: int) -> Span | None:
    """The region (sorted, non-overlapping) that holds the whole span, if any."""
    if regions is None:
        return 0, length
    at = bisect.bisect_right(regions, (span[0], math.inf)) - 1
    if at >= 0 and regions[at][0] <= span[0] and span[1] <= regions[at][1]:
        return regions[at]
    return None


def _place_positive(
    rng: np.random.Generator, event: Event, lo: int, hi: int, rules: WindowRules, fs: float
) -> Span | None:
    min_len, max_len = rules.lengths(fs)
    span = event.end - event.start
    shortest = max(min_len, math.ceil(span / (1 - 2 * rules.edge_fraction)) + 2)
    longest = min(max_len, hi - lo)
    if shortest > longest:
        return None
    for _ in range(8):
        length = int(rng.integers(shortest, longest + 1))
        margin = math.ceil(rules.edge_fraction * length)
        first = max(lo, event.end + margin - length)
        last = min(hi - length, event.start - margin)
        if first <= last:
            start = int(rng.integers(first, last + 1))
            return start, start + length
    return None


def free_gaps(rec: Recording) -> list[Span]:
    """Spans inside the regions that touch no event."""
    regions = rec.regions if rec.regions is not None else [(0, rec.length)]
    merged: list[list[int]] = []  # the events' union, disjoint and sorted
    for start, end in sorted((e.start, e.end) for e in rec.events):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    ends = [end for _, end in merged]
    gaps = []
    for r0, r1 in sorted(regions):
        cursor = r0
        for start, end in merged[bisect.bisect_right(ends, r0) :]:  # the first event ending after r0 on
            if start >= r1:
                break
            if start > cursor:
                gaps.append((cursor, start))
            cursor = max(cursor, end)
        if cursor < r1:
            gaps.append((cursor, r1))
    return gaps


def _quotas(total: int, kinds: list[str]) -> dict[str, int]:
    base, extra = divmod(total, len(kinds))
    return {kind: base + (1 if i < extra else 0) for i, kind in enumerate(kinds)}


def plan_windows(recordings: list[Recording], kinds: list[str], rules: WindowRules, seed: int) -> list[Window]:
    """The positive and anomaly-free windows, sorted by (recording, start)."""
    rng = np.random.default_rng(seed)
    recordings = sorted(recordings, key=lambda r: r.key)
    indexes = {rec.key: _Index(rec) for rec in recordings}
    by_key = {rec.key: rec for rec in recordings}
    candidates: dict[str, list[tuple[str, int]]] = {kind: [] for kind in kinds}
    for rec in recordings:
        for i, event in enumerate(indexes[rec.key].events):
            if event.kind in candidates:
                candidates[event.kind].append((rec.key, i))
    queues = {kind: deque(pool[j] for j in rng.permutation(len(pool))) for kind, pool in candidates.items()}

    n_positive = rules.n_windows - round(rules.n_windows * rules.negative_share)
    quota = _quotas(n_positive, kinds)
    made: dict[str, int] = dict.fromkeys(kinds, 0)
    windows: list[Window] = []
    while len(windows) < n_positive:
        open_kinds = [k for k in kinds if queues[k] and made[k] < quota[k]]
        if not open_kinds:  # quotas met where possible: the kinds with events left take the rest
            open_kinds = [k for k in kinds if queues[k]]
            if not open_kinds:
                break
            for kind in open_kinds:
                quota[kind] += 1
            continue
        for kind in open_kinds:
            if len(windows) >= n_positive:
                break
            while queues[kind]:
                key, i = queues[kind].popleft()
                rec, index = by_key[key], indexes[key]
                event = index.events[i]
                corridor = index.corridor(i, rec.length)
                region = _region_of(
                    (event.start, event.end), rec.regions if rules.positive_in_regions else None, rec.length
                )
                if corridor is None or region is None:
                    continue
                lo, hi = max(corridor[0], region[0]), min(corridor[1], region[1])
                placed = _place_positive(rng, event, lo, hi, rules, rec.fs)
                if placed is None:
                    continue
                windows.append(
                    Window(key, placed[0], placed[1], kind, (event.start - placed[0], event.end - placed[0]))
                )
                made[kind] += 1
                break

    share = rules.negative_share
    n_negative = round(len(windows) * share / (1 - share)) if share < 1 else rules.n_windows
    windows += _negatives(rng, recordings, rules, n_negative)
    return sorted(windows, key=lambda w: (w.key, w.start, w.end))


def _negatives(rng: np.random.Generator, recordings: list[Recording], rules: WindowRules, n: int) -> list[Window]:
    pool = []
    for rec in recordings:
        min_len, _ = rules.lengths(rec.fs)
        pool += [(rec, gap) for gap in free_gaps(rec) if gap[1] - gap[0] >= min_len]
    out: list[Window] = []
    taken: set[tuple[str, int]] = set()
    tries = 0
    while pool and len(out) < n and tries < 50 * max(n, 1):
        tries += 1
        rec, (g0, g1) = pool[int(rng.integers(len(pool)))]
        min_len, max_len = rules.lengths(rec.fs)
        length = int(rng.integers(min_len, min(max_len, g1 - g0) + 1))
        start = int(rng.integers(g0, g1 - length + 1))
        if (rec.key, start) in taken:
            continue
        taken.add((rec.key, start))
        out.append(Window(rec.key, start, start + length, None, None))
    return out
