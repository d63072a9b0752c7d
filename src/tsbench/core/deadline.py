"""Deadlines that hold while work is in flight, not only between steps.

A budget checked between turns is no budget against a server that trickles one byte every two
seconds, or a cell that calls `sub_rlm` in a loop: the work that overruns is the work in between.
So each budget with a clock (an episode's wall clock, a cell's timeout, one model call's total
time) is pushed here for the thread doing the work, and every blocking step below it (a socket
read, a retry's back-off, a nested episode, a nested cell) asks `remaining()` and waits no longer.

The stack is per thread: an episode, its cells and the sub_rlm episodes they serve all run on the
episode's thread, and concurrent episodes never see each other's clocks.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["BudgetSpent", "Deadline", "load_factor", "remaining", "tightest", "within"]


class BudgetSpent(Exception):
    """A budget ran out while work was in flight; `budget` names it (wall_clock, token_cap, ...).
    Code that turns other failures into observations (the sandbox's sub_rlm server) lets it pass."""

    def __init__(self, budget: str, message: str):
        super().__init__(f"{budget}: {message}")
        self.budget, self.detail = budget, message


@dataclass(frozen=True)
class Deadline:
    """A point on the monotonic clock and the budget it ends (what an error row will name)."""

    at: float
    budget: str

    def left(self) -> float:
        return self.at - time.monotonic()


_local = threading.local()


def _stack() -> list[Deadline]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


@contextmanager
def within(seconds: float | None, budget: str) -> Iterator[Deadline | None]:
    """Run the block under a deadline `seconds` from now (None: no new deadline); nested deadlines
    only tighten, never widen, what an outer one allows."""
    if seconds is None:
        yield tightest()
        return
    deadline = Deadline(time.monotonic() + max(0.0, float(seconds)), budget)
    stack = _stack()
    stack.append(deadline)
    try:
        yield deadline
    finally:
        stack.remove(deadline)


def tightest() -> Deadline | None:
    """The earliest deadline over this thread's work (None: nothing bounds it)."""
    stack = _stack()
    return min(stack, key=lambda d: d.at) if stack else None


def remaining(cap: float | None = None) -> float | None:
    """Seconds left before the tightest deadline, at most `cap` (None: unbounded); never negative."""
    deadline = tightest()
    left = None if deadline is None else max(0.0, deadline.left())
    if cap is None:
        return left
    return max(0.0, float(cap)) if left is None else min(left, max(0.0, float(cap)))


def load_factor() -> float:
    """How many times over the machine's cores are asked for (1.0 on a quiet machine; 10 at a load of 20
    on 2 cores): how much longer than quiet a CPU-bound wait may take. A grace given in seconds of a
    quiet machine (a kernel's answer to an interrupt) is scaled by it, so a busy host does not turn a
    slow answer into a lost kernel."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1.0, os.getloadavg()[0] / cores)
