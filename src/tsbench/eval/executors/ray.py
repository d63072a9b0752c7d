"""Episodes on a Ray cluster: `tsbench eval --executor ray [--ray-address auto|HOST:PORT] [--workers N]`.

The driver (this process) keeps the run: it selects rows, journals every record as it arrives
and alone writes the run directory, so resume, error rows and Ctrl-C behave as with threads.
Each of the N workers is a Ray actor (one process, `TSBENCH_RAY_WORKER_CPUS` CPUs [1] and
`TSBENCH_RAY_WORKER_GPUS` GPUs [0] reserved) that rebuilds the agent from its spec string once
and plays one plain-data `EpisodeJob` at a time; the kernels start inside it, in their own jail.
A worker gets work only after it has started, so a cluster smaller than N just uses fewer.
The driver's model settings in the environment (API keys, server URLs) travel with the workers.

Datasets, per file: by path when every node running a worker reads the same bytes at the
driver's (absolute) path, i.e. one machine or shared storage (each node is probed once: size and
a hash of the first and last MiB); else the driver loads each row and ships the sample through
Ray's object store. `TSBENCH_RAY_DATA=path|object` forces one way (ray_cluster.py).

Egress. Without `--ray-address`: a private cluster on 127.0.0.1 with token auth, shut down with
the run, that sends nothing beyond loopback: usage stats off before ray is imported, and no
dashboard process (Ray's usage-stats module in it probes cloud metadata endpoints whatever the
usage-stats switch says; ray_cluster.head_without_dashboard). With one, the cluster's own token
auth is used as it is, and its egress is what its `ray start` made it (docs/many-machines.md).

Failures. A worker process or node lost mid-episode: Ray restarts the actor (on another node if
need be) and runs the episode again, up to `TSBENCH_RAY_RETRIES` [2] more times; the driver
records each (id, epoch) once. An episode that keeps killing its worker becomes an error row
(`failed_record`), run again on resume like every error row.

Interrupts. The first Ctrl-C stops new episodes and waits for those in flight (their records
still arrive); a second raises `Abandoned`. A killed driver loses only the episodes in flight.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from tsbench.core.errors import UserError
from tsbench.eval.episode import EpisodeJob, failed_record
from tsbench.eval.executors import Abandoned, BaseExecutor, ExecutorOptions, OnInterrupt, OnRecord
from tsbench.eval.executors.ray_cluster import PROBE_GROUP, DataPlacement, connect
from tsbench.eval.executors.ray_worker import EpisodeWorker
from tsbench.harness import Harness, get_harness
from tsbench.tasks import get_taskset
from tsbench.tasks.base import Sample

WAIT_S = 1.0  # longest blocking wait, so the startup deadline is checked
# What the model providers read from the environment: the driver's values (when set) go to the
# workers, so an API model runs from one command; a worker node's own values serve otherwise.
FORWARDED_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "VLLM_BASE_URL", "VLLM_API_KEY", "TSBENCH_CACHE")


class WorkerLost(RuntimeError):
    """The episode's worker process died on every try."""


@dataclass
class _Worker:
    handle: Any
    node: str | None = None  # set once it has answered hello
    dead: bool = False
    busy: bool = False
    no_jail: str | None = None  # why this worker's node cannot jail kernels
    host: str = "?"


def jail_refusal(job: EpisodeJob, host: str, no_jail: str | None) -> str | None:
    """Why a worker whose node cannot jail (`no_jail`) must not play `job` (None: it may): its harness
    runs kernels (`Harness.kernel`, a plugin's as a built-in's) and the run is not --unsafe-sandbox."""
    if no_jail and get_harness(job.harness).kernel and not job.harness_config.unsafe_sandbox:
        return f"Ray worker on {host}: {no_jail}"
    return None


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name)
    try:
        return default if raw in (None, "") else float(raw)
    except ValueError:
        raise UserError(f"{name} must be a number (got {raw!r})") from None


class RayExecutor(BaseExecutor):
    @classmethod
    def preflight(cls, harness: Harness, unsafe_sandbox: bool) -> None:
        """Nothing on the driver: each worker checks the jail of its own node, where the kernels run."""

    @classmethod
    def from_options(cls, options: ExecutorOptions) -> RayExecutor:
        return cls(workers=options.concurrency, address=options.address, forward_env=options.forward_env)

    def __init__(
        self,
        workers: int = 4,
        address: str | None = None,
        retries: int | None = None,
        data: str | None = None,
        startup_timeout_s: float | None = None,
        forward_env: tuple[str, ...] = (),
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        cpus = _env_number("TSBENCH_RAY_WORKER_CPUS", 1.0)
        gpus = _env_number("TSBENCH_RAY_WORKER_GPUS", 0.0)
        self.retries = int(retries if retries is not None else _env_number("TSBENCH_RAY_RETRIES", 2))
        self.startup_timeout_s = (
            startup_timeout_s if startup_timeout_s is not None else _env_number("TSBENCH_RAY_STARTUP_TIMEOUT", 300.0)
        )
        self.ray, self._connected = connect(address, workers * cpus)
        self.placement = DataPlacement(self.ray, data or os.environ.get("TSBENCH_RAY_DATA", "auto"))
        env = {name: os.environ[name] for name in (*FORWARDED_ENV, *forward_env) if os.environ.get(name)}
        actor = self.ray.remote(concurrency_groups={PROBE_GROUP: 1})(EpisodeWorker).options(
            num_cpus=cpus,
            num_gpus=gpus,
            max_restarts=-1,
            max_task_retries=self.retries,
            runtime_env={"env_vars": env} if env else None,
        )
        self.workers = [_Worker(actor.remote()) for _ in range(workers)]
        self._hello = {w.handle.hello.remote(): w for w in self.workers}
        self.hosts: dict[int, str] = {}  # worker pid -> host, as each first answered

    # -- the driver loop ------------------------------------------------------------------
    def run(self, jobs: Iterable[EpisodeJob], on_record: OnRecord, on_interrupt: OnInterrupt | None = None) -> None:
        ray = self.ray
        busy: dict[Any, tuple[_Worker, EpisodeJob]] = {}
        recorded: set[tuple[str, int]] = set()

        def deliver(job: EpisodeJob, records: list[dict]) -> None:
            if job.key not in recorded:  # one set of records per job, however Ray retried it
                recorded.add(job.key)
                for record in records:
                    on_record(record)

        def collect(block: bool) -> None:
            refs = [*busy, *self._hello]
            if not refs:
                return
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            if not ready and block:
                ready, _ = ray.wait(refs, num_returns=1, timeout=WAIT_S)
            for ref in ready:
                if ref in self._hello:
                    self._greet(ref)
                else:
                    worker, job = busy.pop(ref)
                    worker.busy = False
                    deliver(job, self._result(ref, job))

        def free_worker() -> _Worker:
            waiting_since = time.monotonic()
            while True:
                for worker in self.workers:
                    if worker.node is not None and not worker.busy and not worker.dead:
                        return worker
                if not busy and not self._hello:
                    raise UserError(
                        "every Ray worker died before it could start (see the Ray logs, "
                        "/tmp/ray/session_latest/logs on each node)"
                    )
                if not busy and time.monotonic() - waiting_since > self.startup_timeout_s:
                    raise UserError(
                        f"no Ray worker started within {self.startup_timeout_s:.0f} s: does the cluster "
                        "have a free CPU per worker, and tsbench installed on every node?"
                    )
                collect(True)

        try:
            for job in jobs:
                mode, prepared = self._prepare(job)  # while the workers are still busy
                worker = free_worker()
                if refusal := jail_refusal(job, worker.host, worker.no_jail):
                    raise UserError(refusal)
                if mode != self.placement.mode(os.path.abspath(job.ref.path)):  # a node that came up since
                    mode, prepared = self._prepare(job)
                if isinstance(prepared, list):  # the driver could not load its samples: error rows
                    deliver(job, prepared)
                    continue
                worker.busy = True
                busy[worker.handle.run.remote(*prepared)] = (worker, job)
                collect(False)
            while busy:
                collect(True)
        except KeyboardInterrupt:
            if on_interrupt is not None:
                on_interrupt(len(busy))
            try:
                while busy:
                    collect(True)
            except KeyboardInterrupt:
                raise Abandoned() from None
            raise

    def _greet(self, ref: Any) -> None:
        worker = self._hello.pop(ref)
        try:
            info = self.ray.get(ref)
        except Exception:
            worker.dead = True
            return
        self.hosts[info["pid"]] = info["host"]
        self.placement.add_node(info["node"], worker.handle)
        worker.node, worker.host, worker.no_jail = info["node"], info["host"], info.get("jail")

    def _prepare(self, job: EpisodeJob) -> tuple[str, tuple[EpisodeJob, list[Sample] | None] | list[dict]]:
        """(data mode, the job as the worker gets it: by absolute path, or with its samples loaded
        here); the payload is the error rows when the driver cannot load the samples."""
        path = os.path.abspath(job.ref.path)
        mode = self.placement.mode(path)
        if mode == "path":
            absolute = tuple(replace(ref, path=os.path.abspath(ref.path)) for ref in job.chain)
            return mode, (replace(job, ref=replace(job.ref, path=path), chain=absolute), None)
        try:
            taskset = get_taskset(job.ref.family)
            return mode, (job, [taskset.load(ref) for ref in job.refs])
        except Exception as exc:
            return mode, failed_record(job, exc)

    def _result(self, ref: Any, job: EpisodeJob) -> list[dict]:
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            lost = WorkerLost(
                f"the Ray worker died on each of {self.retries + 1} tries ({type(exc).__name__}: {first})"
            )
            return failed_record(job, lost)

    def close(self) -> None:
        for worker in self.workers:
            try:
                self.ray.kill(worker.handle, no_restart=True)
            except Exception:
                pass
        self.workers = []
        self._hello = {}
        if self._connected:
            self.ray.shutdown()
            self._connected = False
