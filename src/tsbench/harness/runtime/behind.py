"""A sandbox started behind the episode's first model call.

An rlm episode's first reply needs no kernel, yet the jail's start (a pool claim, or a cold start) sat
in front of it: 42-76 % of an episode at concurrency 1 to 32 (issue 47). `started_behind(box)` starts
the sandbox on a thread and returns at once; `Sandbox.run` waits for that start, so the first cell runs
as soon as both the reply and the kernel are there. A start that fails fails the episode as before: at
its first cell, or when the episode leaves the block without having run one.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from tsbench.harness.runtime.cleanup import release_event_loop

if TYPE_CHECKING:
    from tsbench.harness.runtime.sandbox import Sandbox

__all__ = ["StartBehind", "started_behind"]


# Starts run on long-lived threads: a jail's kernel is bound to die with the thread that launched it
# (orphans.py: the parent-death signal follows the launching thread), so a thread that ended after
# the start would take its kernel with it. Idle workers wait for the next episode's start.
_STARTERS = ThreadPoolExecutor(max_workers=256, thread_name_prefix="jail-start")


class StartBehind:
    """`box.start()` on a starter thread; `wait()` waits for it and raises what it raised."""

    def __init__(self, box: Sandbox) -> None:
        self.box = box
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        _STARTERS.submit(self._start)

    def _start(self) -> None:
        self._thread = threading.current_thread()
        try:
            self.box.start()
        except BaseException as exc:  # noqa: BLE001 - handed to the episode's thread by wait()
            self.error = exc
        finally:
            release_event_loop()  # this thread's loop: the episode's thread drives the kernel from here on
            self._done.set()

    def wait(self) -> None:
        if threading.current_thread() is not self._thread:  # start() closes the box itself when it fails
            self._done.wait()
        if self.error is not None:
            raise self.error


@contextlib.contextmanager
def started_behind(box: Sandbox) -> Iterator[Sandbox]:
    """`with started_behind(box):` as `with box:`, but the block begins while the kernel starts."""
    box._starting = StartBehind(box)  # run() and close() wait for it
    try:
        yield box
        box.wait_started()  # an episode that ran no cell still fails when its jail could not start
    finally:
        try:
            box.close()
        finally:  # box and its start refer to each other: freed now, not at the next full gc (the series)
            box._starting = None
