"""Executors run EpisodeJobs somewhere and hand each finished record back to the coordinator,
which alone writes the journal. A new executor is a `BaseExecutor` subclass in a module here and
one line in EXECUTORS, or, from outside tsbench, an `executor.<name>` entry point in the
`tsbench.plugins` group (see tsbench.core.registry). The coordinator calls only the base class's
hooks, so it never branches on an executor's name.

Interrupts behave the same in every executor: the first Ctrl-C stops new episodes and waits for
those in flight (their records still arrive); a second Ctrl-C raises `Abandoned` at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tsbench.core.errors import UserError
from tsbench.core.registry import Registry
from tsbench.eval.episode import EpisodeJob
from tsbench.harness import Harness

OnRecord = Callable[[dict], None]
OnInterrupt = Callable[[int], None]  # told how many episodes are still in flight

EXECUTORS = {
    "threads": "tsbench.eval.executors.threads:ThreadExecutor",
    "ray": "tsbench.eval.executors.ray:RayExecutor",
}
REGISTRY = Registry("executor", EXECUTORS)


class Abandoned(KeyboardInterrupt):
    """A second Ctrl-C: in-flight episodes were left behind (their rows are re-run on resume)."""


@dataclass(frozen=True)
class ExecutorOptions:
    """What the coordinator gives every executor; each takes what it uses."""

    concurrency: int = 4  # episodes in flight (threads) or workers (ray)
    agents: Any = None  # the coordinator's AgentCache: an in-process executor shares it
    address: str | None = None  # a cluster to join (ray)
    # Environment variables the run's settings name (--api-key-env, --judge-api-key-env): an executor
    # whose workers are other processes hands them on, so a remote worker reads the same key.
    forward_env: tuple[str, ...] = ()
    jail_pool: int = 0  # pre-started jails for a kernel harness (threads): 0 = none
    jail_budget: int | None = None  # jails booted in all (the run's pending episodes); None: no bound


class BaseExecutor:
    """The coordinator's view of an executor; every hook but `run` has a default."""

    @classmethod
    def preflight(cls, harness: Harness, unsafe_sandbox: bool) -> None:
        """Checks before any row is read. Default: a kernel harness's kernels run on this host, so its
        jail must work (`harness.kernel`, harness/base.py)."""
        from tsbench.harness import require_jail

        require_jail(harness, unsafe_sandbox)

    @classmethod
    def from_options(cls, options: ExecutorOptions) -> BaseExecutor:
        """The executor for a run (default: `cls(concurrency=...)`)."""
        return cls(concurrency=options.concurrency)

    def run(self, jobs: Iterable[EpisodeJob], on_record: OnRecord, on_interrupt: OnInterrupt | None = None) -> None:
        """Run every job, calling `on_record` with each finished record (in this process)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release workers and pools."""


def executor_class(name: str) -> type[BaseExecutor]:
    """The executor class `name` stands for; an unknown name lists the choices."""
    found = REGISTRY.load(name)
    if not (isinstance(found, type) and issubclass(found, BaseExecutor)):
        raise UserError(f"executor {name!r} is not a BaseExecutor subclass (see tsbench/eval/executors/__init__.py)")
    return found
