"""Run a measurement in a fresh process so its peak RSS is its own."""

from __future__ import annotations

import multiprocessing as mp
import resource
import time
from collections.abc import Callable
from typing import Any


def _child(fn: Callable[..., Any], args: tuple, queue) -> None:
    started = time.perf_counter()
    result = fn(*args)
    seconds = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put((seconds, peak_kib * 1024, result))


def measure_in_child(fn: Callable[..., Any], *args) -> tuple[float, int, Any]:
    """(seconds, peak RSS bytes, fn's return value) of fn(*args) run in a spawned process."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(fn, args, queue))
    proc.start()
    out = queue.get()
    proc.join()
    return out
