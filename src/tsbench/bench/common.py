"""Shared by the benchmarks: a measurement in a fresh process (its peak RSS is its own), sides measured
interleaved, and ratios printed with min, median, goal, met/missed and the load average."""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _child(fn: Callable[..., Any], args: tuple, queue) -> None:
    started, cpu = time.perf_counter(), _cpu_seconds()
    result = fn(*args)
    seconds, cpu = time.perf_counter() - started, _cpu_seconds() - cpu
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put((seconds, peak_kib * 1024, result, cpu))


def measure_in_child_cpu(fn: Callable[..., Any], *args) -> tuple[float, int, Any, float]:
    """(seconds, peak RSS bytes, fn's return value, CPU seconds of all its threads) of fn(*args) run
    in a spawned process. CPU beside wall shows what a side gains from a second core."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(fn, args, queue))
    proc.start()
    out = queue.get()
    proc.join()
    return out


def measure_in_child(fn: Callable[..., Any], *args) -> tuple[float, int, Any]:
    """(seconds, peak RSS bytes, fn's return value) of fn(*args) run in a spawned process."""
    seconds, peak, result, _ = measure_in_child_cpu(fn, *args)
    return seconds, peak, result


def load_average() -> str:
    """The 1/5/15-minute load averages and the core count, printed beside every ratio."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f}/{five:.2f}/{fifteen:.2f} on {os.cpu_count()} cores"


def interleaved(sides: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Seconds of each side, measured A, B, A, B, ... (the first side alternates each round), so that
    a change in machine load hits every side alike. Each callable returns its own measured seconds."""
    names = list(sides)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        order = names if index % 2 == 0 else names[::-1]
        for name in order:
            samples[name].append(sides[name]())
    return samples


@dataclass(frozen=True)
class Ratio:
    """A measured ratio a/b with its goal: `at_most` (a/b <= goal) or at least (a/b >= goal)."""

    label: str
    a: list[float]
    b: list[float]
    goal: float
    at_most: bool = True

    @property
    def median(self) -> float:
        return statistics.median(self.a) / statistics.median(self.b)

    @property
    def best(self) -> float:
        return min(self.a) / min(self.b)

    @property
    def met(self) -> bool:
        return self.median <= self.goal if self.at_most else self.median >= self.goal

    def line(self) -> str:
        sign = "<=" if self.at_most else ">="
        return (
            f"{self.label}: ratio median {self.median:.2f} (of mins {self.best:.2f}; {len(self.a)} interleaved rounds) "
            f"goal {sign} {self.goal:g}: {verdict(self.met)}  [{load_average()}]"
        )

    def as_dict(self) -> dict:
        return {"median": self.median, "of_mins": self.best, "goal": self.goal, "met": self.met, "rounds": len(self.a)}


def verdict(met: bool) -> str:
    """How every bench line ends: met, or MISSED in capitals so a miss stands out."""
    return "met" if met else "MISSED"


def spread(samples: list[float], scale: float = 1.0, unit: str = "s") -> str:
    """min / median of a list of timings, for the lines beside a ratio."""
    return f"min {min(samples) * scale:.3f} {unit}, median {statistics.median(samples) * scale:.3f} {unit}"
