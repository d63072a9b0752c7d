"""What runs inside a Ray worker process: the episode actor, which also probes dataset files.

Nothing here imports ray at module level: the driver wraps these with `ray.remote` when it runs,
so tsbench imports (and its other executors run) without the optional extra.
"""

from __future__ import annotations

import hashlib
import os
import socket

from tsbench.eval.agents import AgentCache
from tsbench.eval.episode import EpisodeJob, execute_job, failed_record, played_by
from tsbench.tasks.base import Sample

FINGERPRINT_BYTES = 1 << 20  # hashed from each end of a file


class EpisodeWorker:
    """One per worker process: agents are built once from their spec strings (a local model is
    loaded once per worker, not per episode) and reused by every episode this worker plays."""

    def __init__(self) -> None:
        self.agents = AgentCache()
        self.node, self.worker = socket.gethostname(), worker_label(os.getpid())

    def hello(self) -> dict:
        """Where this worker runs, and why it cannot jail kernels (None when it can); the driver
        gives it no work before it has answered."""
        import ray

        from tsbench.harness.runtime import SandboxError, check_jail

        try:
            check_jail()
            jail = None
        except SandboxError as exc:
            jail = str(exc)
        return {
            "node": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "host": self.node,
            "worker": self.worker,
            "jail": jail,
        }

    def run(self, job: EpisodeJob, samples: list[Sample] | None = None) -> list[dict]:
        """The job's records; a job that cannot run (its samples will not load) gives error rows,
        exactly as with the thread executor. A dying process is left to Ray's retries."""
        try:
            records = execute_job(job, self.agents, samples)
        except Exception as exc:
            records = failed_record(job, exc)
        return played_by(records, self.node, self.worker)

    def fingerprints(self, paths: list[str]) -> dict[str, tuple[int, str] | None]:
        """Called in its own concurrency group, so it answers while an episode is running."""
        return {path: fingerprint(path) for path in paths}

    def close(self) -> None:
        self.agents.close()


def worker_label(pid: int) -> str:
    """`ray:<actor id, first 8 hex>@<pid>`: the `worker` column of the rows this actor plays (a
    restarted actor keeps its id and gets a new pid)."""
    import ray

    actor = ray.get_runtime_context().get_actor_id() or "?"
    return f"ray:{actor[:8]}@{pid}"


def fingerprint(path: str) -> tuple[int, str] | None:
    """(size, sha256 of the first and last MiB) of a file, None when it cannot be read here.
    Parquet keeps its footer (schema, row-group statistics) at the end, so two different files
    of one size almost surely differ in these bytes; hashing them all would cost a full read."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            digest = hashlib.sha256(fh.read(FINGERPRINT_BYTES))
            if size > FINGERPRINT_BYTES:
                fh.seek(max(FINGERPRINT_BYTES, size - FINGERPRINT_BYTES))
                digest.update(fh.read(FINGERPRINT_BYTES))
    except OSError:
        return None
    return size, digest.hexdigest()
