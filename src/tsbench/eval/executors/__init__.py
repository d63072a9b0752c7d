"""Executors run EpisodeJobs somewhere and hand each finished record back to the coordinator,
which alone writes the journal. A new executor is one module here and one line in EXECUTORS.

Interrupts behave the same in every executor: the first Ctrl-C stops new episodes and waits for
those in flight (their records still arrive); a second Ctrl-C raises `Abandoned` at once.
"""

from __future__ import annotations

import importlib
from typing import Callable, Iterable, Protocol

from tsbench.eval.episode import EpisodeJob

OnRecord = Callable[[dict], None]
OnInterrupt = Callable[[int], None]  # told how many episodes are still in flight

EXECUTORS = {
    "threads": "tsbench.eval.executors.threads:ThreadExecutor",
    "ray": "tsbench.eval.executors.ray:RayExecutor",
}


class Abandoned(KeyboardInterrupt):
    """A second Ctrl-C: in-flight episodes were left behind (their rows are re-run on resume)."""


class Executor(Protocol):
    def run(self, jobs: Iterable[EpisodeJob], on_record: OnRecord, on_interrupt: OnInterrupt | None = None) -> None:
        ...

    def close(self) -> None:
        ...


def get_executor(name: str, **options) -> Executor:
    if name not in EXECUTORS:
        raise ValueError(f"unknown executor {name!r}; choose from {', '.join(EXECUTORS)}")
    module, cls = EXECUTORS[name].split(":")
    return getattr(importlib.import_module(module), cls)(**options)
