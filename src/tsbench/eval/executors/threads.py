"""Episodes on a bounded thread pool in this process, sharing one agent per spec.

Threads suit API models (the wait is network I/O) and the kernels (separate processes); a
local model on the CPU is shared and serialised by its own lock. With `jail_pool` > 0 (a kernel
harness), that many jails are pre-started for the run (harness/runtime/pool.py): each serves one
episode and is destroyed after it.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from tsbench.eval.agents import AgentCache
from tsbench.eval.episode import EpisodeJob, execute_job, failed_record, played_by, this_worker
from tsbench.eval.executors import Abandoned, BaseExecutor, ExecutorOptions, OnInterrupt, OnRecord


class ThreadExecutor(BaseExecutor):
    def __init__(
        self, concurrency: int = 4, agents: AgentCache | None = None, jail_pool: int = 0, jail_budget: int | None = None
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.concurrency = concurrency
        self.agents = agents or AgentCache()
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="episode")
        self.jails = None
        if jail_pool > 0:
            from tsbench.harness.runtime.pool import JailPool

            self.jails = JailPool(jail_pool, budget=jail_budget)

    @classmethod
    def from_options(cls, options: ExecutorOptions) -> ThreadExecutor:
        return cls(
            concurrency=options.concurrency,
            agents=options.agents,
            jail_pool=options.jail_pool,
            jail_budget=options.jail_budget,
        )

    def _run_one(self, job: EpisodeJob) -> list[dict]:
        try:
            records = execute_job(job, self.agents)
        except Exception as exc:  # the job could not run at all: error rows, not a dead run
            records = failed_record(job, exc)
        return played_by(records, *this_worker("threads"))

    def run(self, jobs: Iterable[EpisodeJob], on_record: OnRecord, on_interrupt: OnInterrupt | None = None) -> None:
        if self.jails is not None:
            from tsbench.harness.runtime.pool import use_pool

            with use_pool(self.jails):
                return self._run(jobs, on_record, on_interrupt)
        return self._run(jobs, on_record, on_interrupt)

    def _run(self, jobs: Iterable[EpisodeJob], on_record: OnRecord, on_interrupt: OnInterrupt | None) -> None:
        in_flight: set[Future] = set()

        def collect(block_until_one: bool) -> None:
            done, _ = (
                wait(in_flight, return_when=FIRST_COMPLETED)
                if block_until_one
                else ({f for f in in_flight if f.done()}, None)
            )
            for future in done:
                in_flight.discard(future)
                for record in future.result():
                    on_record(record)

        try:
            for job in jobs:
                while len(in_flight) >= 2 * self.concurrency:  # few rows in memory at a time
                    collect(True)
                in_flight.add(self._pool.submit(self._run_one, job))
                collect(False)
            while in_flight:
                collect(True)
        except KeyboardInterrupt:
            try:  # a second Ctrl-C abandons, even one that lands while the first is being announced
                for future in list(in_flight):
                    if future.cancel():
                        in_flight.discard(future)
                if on_interrupt is not None:
                    on_interrupt(len(in_flight))
                while in_flight:
                    collect(True)
            except KeyboardInterrupt:
                raise Abandoned() from None
            raise

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.jails is not None:
            self.jails.close()
        self.agents.close()
