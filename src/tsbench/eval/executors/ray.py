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

Failures. Ray neither restarts a worker nor retries its tasks: the driver does both. A worker whose
process or node is lost is replaced by a new actor (wherever Ray finds room; never more than N live
or waiting), and its episode is played again by the next idle worker, up to `TSBENCH_RAY_RETRIES`
[2] more times, counting only attempts that started (sent to a worker that had answered and was
idle); the driver records each (id, epoch) once. Every episode in flight has a deadline: its own
budget (`episode_wall_s`, else `TSBENCH_RAY_EPISODE_S` [7200] s; per sample of a chain) plus
`TSBENCH_RAY_PLACEMENT_S` [120] s; past it the worker is stopped and the attempt counts as lost
(a node gone silent ends there). When every worker is lost and no new one is placed within
`TSBENCH_RAY_PLACEMENT_S` (no spare capacity), each episode left becomes an error row saying so and
the run finishes. Lost episodes end as error rows of kind `worker_lost`, run again on resume.

Interrupts. The first Ctrl-C stops new episodes and waits for those in flight (their records
still arrive); a second raises `Abandoned`. A killed driver loses only the episodes in flight.
"""

from __future__ import annotations

import os
import time
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from tsbench.core.errors import UserError
from tsbench.eval.episode import EpisodeJob, failed_record, played_by
from tsbench.eval.executors import Abandoned, BaseExecutor, ExecutorOptions, OnInterrupt, OnRecord
from tsbench.eval.executors.ray_cluster import PROBE_GROUP, DataPlacement, connect
from tsbench.eval.executors.ray_worker import EpisodeWorker
from tsbench.harness import Harness, get_harness
from tsbench.tasks import get_taskset
from tsbench.tasks.base import Sample

WAIT_S = 1.0  # longest blocking wait, so the deadlines are checked
# What the model providers read from the environment: the driver's values (when set) go to the
# workers, so an API model runs from one command; a worker node's own values serve otherwise.
FORWARDED_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "VLLM_BASE_URL", "VLLM_API_KEY", "TSBENCH_CACHE")
WORKER_LOST = "worker_lost"  # the error kind of an episode whose Ray worker (or its node) was lost


class WorkerLost(RuntimeError):
    """The episode's worker process or node was lost (or it passed its deadline) on every attempt."""


@dataclass
class _Worker:
    handle: Any
    node: str | None = None  # set once it has answered hello
    dead: bool = False
    busy: bool = False
    no_jail: str | None = None  # why this worker's node cannot jail kernels
    host: str = "?"
    label: str | None = None  # the rows' `worker` column: ray:<actor>@<pid>


@dataclass
class _Flight:
    """One attempt of an episode on a worker that had started (answered hello) and was idle."""

    worker: _Worker
    job: EpisodeJob
    prepared: tuple
    deadline: float  # time.monotonic(): the episode's budget plus the placement margin


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


def episode_seconds(job: EpisodeJob, default_s: float) -> float:
    """An episode's own time budget: its wall clock (`episode_wall_s`) when set, else `default_s`;
    a chain's is one per sample."""
    wall = job.harness_config.episode_wall_s
    return (wall if wall is not None else default_s) * len(job.refs)


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
        placement_s: float | None = None,
        episode_s: float | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        cpus = _env_number("TSBENCH_RAY_WORKER_CPUS", 1.0)
        gpus = _env_number("TSBENCH_RAY_WORKER_GPUS", 0.0)
        self.retries = int(retries if retries is not None else _env_number("TSBENCH_RAY_RETRIES", 2))
        self.startup_timeout_s = (
            startup_timeout_s if startup_timeout_s is not None else _env_number("TSBENCH_RAY_STARTUP_TIMEOUT", 300.0)
        )
        # How long an episode may take beyond its own budget (getting its row, the worker's first agent
        # build), and how long a run with no live worker waits for a new one to be placed.
        self.placement_s = placement_s if placement_s is not None else _env_number("TSBENCH_RAY_PLACEMENT_S", 120.0)
        # An episode's budget when its harness settings set no wall clock (episode_wall_s).
        self.episode_s = episode_s if episode_s is not None else _env_number("TSBENCH_RAY_EPISODE_S", 7200.0)
        self.ray, self._connected = connect(address, workers * cpus)
        self.placement = DataPlacement(self.ray, data or os.environ.get("TSBENCH_RAY_DATA", "auto"))
        env = {name: os.environ[name] for name in (*FORWARDED_ENV, *forward_env) if os.environ.get(name)}
        # No restarts and no task retries by Ray: a lost worker is replaced by a new actor, and the
        # driver retries the episode, counting only attempts that started (on a live, idle worker).
        self._actor = self.ray.remote(concurrency_groups={PROBE_GROUP: 1})(EpisodeWorker).options(
            num_cpus=cpus,
            num_gpus=gpus,
            max_restarts=0,
            max_task_retries=0,
            runtime_env={"env_vars": env} if env else None,
        )
        self.size = workers
        self.workers: list[_Worker] = []
        self._hello: dict[Any, _Worker] = {}
        for _ in range(workers):
            self._spawn()
        self.hosts: dict[int, str] = {}  # worker pid -> host, as each first answered
        self._started_any = False  # some worker has answered hello
        self._exhausted = False  # every worker lost, and none placed within placement_s

    def _spawn(self) -> None:
        worker = _Worker(self._actor.remote())
        self.workers.append(worker)
        self._hello[worker.handle.hello.remote()] = worker

    def _bury(self, worker: _Worker, kill: bool) -> None:
        """A worker that died (or is stopped, `kill`) is replaced by a new actor, placed wherever Ray
        finds room (a node that came back, spare capacity); never more live or pending than --workers."""
        worker.dead, worker.busy = True, False
        self.placement.forget(worker.handle)
        if kill:
            try:
                self.ray.kill(worker.handle, no_restart=True)
            except Exception:
                pass
        if sum(not w.dead for w in self.workers) < self.size:
            self._spawn()

    # -- the driver loop ------------------------------------------------------------------
    def run(self, jobs: Iterable[EpisodeJob], on_record: OnRecord, on_interrupt: OnInterrupt | None = None) -> None:
        ray = self.ray
        busy: dict[Any, _Flight] = {}
        again: deque[tuple[EpisodeJob, tuple]] = deque()  # attempts to make again after a lost worker
        recorded: set[tuple[str, int]] = set()
        started: Counter[tuple[str, int]] = Counter()  # attempts that started, per job
        stopping = [False]  # after the first Ctrl-C: nothing new starts, nothing lost is retried

        def deliver(job: EpisodeJob, records: list[dict], worker: _Worker | None = None) -> None:
            if job.key not in recorded:  # one set of records per job
                recorded.add(job.key)
                if worker is not None:  # rows the driver made for a worker's episode: where it was lost
                    played_by(records, worker.host, worker.label)
                for record in records:
                    on_record(record)

        def lost(flight: _Flight, why: str) -> None:
            job = flight.job
            if started[job.key] <= self.retries and not stopping[0]:
                again.append((job, flight.prepared))
                return
            n = started[job.key]
            error = WorkerLost(
                f"lost on {flight.worker.host}, on each of {n} attempt{'s' * (n != 1)} that started: {why}"
            )
            deliver(job, failed_record(job, error, WORKER_LOST), flight.worker)

        def collect(block: bool) -> None:
            refs = [*busy, *self._hello]
            ready = ray.wait(refs, num_returns=len(refs), timeout=0)[0] if refs else []
            if not ready and block:
                if refs:
                    ready = ray.wait(refs, num_returns=1, timeout=WAIT_S)[0]
                else:
                    time.sleep(WAIT_S)
            for ref in ready:
                if ref in self._hello:
                    self._greet(ref)
                    continue
                flight = busy.pop(ref)
                flight.worker.busy = False
                try:
                    records = ray.get(ref)
                except ray.exceptions.RayError as exc:  # its process or its node died
                    self._bury(flight.worker, kill=False)
                    lost(flight, f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"[:500])
                    continue
                deliver(flight.job, records)
            now = time.monotonic()
            for ref, flight in list(busy.items()):
                if now > flight.deadline:  # a node gone silent, or an episode past every budget
                    del busy[ref]
                    self._bury(flight.worker, kill=True)
                    budget = episode_seconds(flight.job, self.episode_s)
                    lost(
                        flight,
                        f"no result within its deadline ({budget:.0f} s budget + {self.placement_s:.0f} s margin)",
                    )

        def free_worker() -> _Worker | None:
            """An idle live worker; None when every worker is lost and none was placed within placement_s."""
            waiting_since = time.monotonic()
            while True:
                for worker in self.workers:
                    if worker.node is not None and not worker.busy and not worker.dead:
                        self._exhausted = False
                        return worker
                if busy:
                    waiting_since = time.monotonic()  # one will free up (or be lost, and time out)
                elif not self._started_any:
                    if not self._hello:
                        raise UserError(
                            "every Ray worker died before it could start (see the Ray logs, "
                            "/tmp/ray/session_latest/logs on each node)"
                        )
                    if time.monotonic() - waiting_since > self.startup_timeout_s:
                        raise UserError(
                            f"no Ray worker started within {self.startup_timeout_s:.0f} s: does the cluster "
                            "have a free CPU per worker, and tsbench installed on every node?"
                        )
                elif self._exhausted or time.monotonic() - waiting_since > self.placement_s:
                    self._exhausted = True
                    return None
                collect(True)

        def start(job: EpisodeJob, prepared: tuple) -> None:
            worker = free_worker()
            if worker is None:
                error = WorkerLost(
                    f"no Ray worker left to play it: every worker was lost (a node down?) and no new one "
                    f"could be placed within {self.placement_s:.0f} s (no spare capacity)"
                )
                deliver(job, failed_record(job, error, WORKER_LOST))
                return
            if refusal := jail_refusal(job, worker.host, worker.no_jail):
                raise UserError(refusal)
            if prepared[1] is None and self.placement.mode(os.path.abspath(job.ref.path)) != "path":
                mode, redone = self._prepare(job)  # a node that came up since cannot read the driver's path
                if isinstance(redone, list):
                    deliver(job, redone)
                    return
                prepared = redone
            started[job.key] += 1
            worker.busy = True
            deadline = time.monotonic() + episode_seconds(job, self.episode_s) + self.placement_s
            busy[worker.handle.run.remote(*prepared)] = _Flight(worker, job, prepared, deadline)

        try:
            for job in jobs:
                _, prepared = self._prepare(job)  # while the workers are still busy
                if isinstance(prepared, list):  # the driver could not load its samples: error rows
                    deliver(job, prepared)
                    continue
                while again:
                    start(*again.popleft())
                start(job, prepared)
                collect(False)
            while busy or again:
                while again:
                    start(*again.popleft())
                if busy:
                    collect(True)
        except KeyboardInterrupt:
            stopping[0] = True
            try:  # a second Ctrl-C abandons, even one that lands while the first is being announced
                if on_interrupt is not None:
                    on_interrupt(len(busy))
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
        worker.label = info.get("worker")
        self._started_any = True

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
