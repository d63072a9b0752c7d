"""Episode threads sharing one generation backend: waiting requests leave as one batch."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from tsbench.train.backends import Backend, Reply, Request


class Batcher:
    """Episode threads share one backend: each asks for one reply; waiting requests go out as one batch.

    With `wait_s=None` a batch leaves only when every episode that can be running is waiting:
    min(workers, episodes not yet finished), when the caller says how many there are, else the
    episodes inside `episode()`. Each batch is then one round of every live episode, whatever the
    threads' timing, so a seeded CPU run is reproducible. With a float, a batch leaves after that long.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        wait_s: float | None = None,
        episodes: int | None = None,
        workers: int | None = None,
        max_batch: int = 256,
    ):
        self.backend = backend
        self.wait_s = wait_s
        self.pending = episodes  # episodes of this rollout not yet finished
        self.slots = workers or episodes
        self.max_batch = max_batch
        self.running = 0
        self.batches = 0
        self.failure: BaseException | None = None  # the first error the backend raised (the rollout re-raises it)
        self._queue: list[dict[str, Any]] = []
        self._leading = False
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def episode(self) -> Iterator[None]:
        with self._cond:
            self.running += 1
        try:
            yield
        finally:
            with self._cond:
                self.running -= 1
                if self.pending is not None:
                    self.pending -= 1
                self._cond.notify_all()

    def _ready(self, deadline: float | None) -> bool:
        live = self.running if self.pending is None else min(self.slots, self.pending)
        if len(self._queue) >= min(max(live, 1), self.max_batch):
            return True
        return deadline is not None and time.monotonic() >= deadline

    def generate(self, request: Request) -> Reply:
        slot: dict[str, Any] = {"request": request, "done": False, "reply": None, "error": None}
        with self._cond:
            self._queue.append(slot)
            self._cond.notify_all()
            while not slot["done"]:
                if self._leading:
                    self._cond.wait()
                    continue
                self._leading = True
                deadline = None if self.wait_s is None else time.monotonic() + self.wait_s
                while not self._ready(deadline):
                    self._cond.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
                batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
                batch.sort(key=lambda s: (s["request"].seed, s["request"].prompt_ids))  # not the threads' arrival order
                self._cond.release()
                try:
                    replies, error = self.backend.generate([s["request"] for s in batch]), None
                except BaseException as exc:  # every waiter of this batch gets the error
                    replies, error = None, exc
                    self.failure = self.failure or exc
                finally:
                    self._cond.acquire()
                for i, s in enumerate(batch):
                    s.update(done=True, reply=None if replies is None else replies[i], error=error)
                self.batches += 1
                self._leading = False
                self._cond.notify_all()
        if slot["error"] is not None:
            raise slot["error"]
        return slot["reply"]
