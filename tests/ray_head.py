"""Shared by the Ray tests: a head node on 127.0.0.1 without its dashboard process, started again
when a loaded machine took it past Ray's raylet-registration wait (30 s, fixed in Ray 2.60's
`Node.__init__`; no setting lengthens it)."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from collections.abc import Iterator
from typing import Any

TRIES = 3
# One token per test process: Ray keeps the first token it reads for the life of the process, so a second
# cluster started here (another test file on the same xdist worker) with a new token refuses its own driver.
TOKEN = secrets.token_hex(16)


def start_head(ray: Any, **head_args: Any) -> Any:
    """A `ray.cluster_utils.Cluster` with its head started (`head_args` as Cluster's head_node_args)."""
    from ray.cluster_utils import Cluster

    from tsbench.eval.executors.ray_cluster import head_without_dashboard

    for attempt in range(TRIES):
        try:
            with head_without_dashboard(ray):  # its usage-stats module would probe cloud metadata
                return Cluster(initialize_head=True, head_node_args={"include_dashboard": False, **head_args})
        except Exception as exc:
            if "timed out during startup" not in str(exc) or attempt == TRIES - 1:
                raise
    raise AssertionError("unreachable")


def forget_cached_token() -> None:
    """Drop the token Ray cached in this process (an earlier cluster's, if any), as Ray's own tests do."""
    try:
        from ray._private.authentication_test_utils import reset_auth_token_state
    except ImportError:  # another Ray: the shared TOKEN above still keeps one token per process
        return
    reset_auth_token_state()


@contextlib.contextmanager
def driven_cluster(paths: list[str], **head_args: Any) -> Iterator[Any]:
    """A head on 127.0.0.1 with this process its driver, token auth on, `paths` on the workers' PYTHONPATH;
    the environment is restored after. Ray reads its settings (auth mode, loopback only) when imported."""
    from tsbench.eval.executors.ray_cluster import import_ray

    saved = dict(os.environ)
    os.environ.update(
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=TOKEN,
        TSBENCH_STUMPY_WARMUP="0",
        PYTHONPATH=os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]),
    )
    try:
        ray_module = import_ray(local=True)
        forget_cached_token()
        head = start_head(ray_module, **head_args)
        import ray

        ray.init(address=head.address, log_to_driver=False, logging_level=logging.WARNING)
        try:
            yield head
        finally:
            ray.shutdown()
            head.shutdown()
    finally:
        os.environ.clear()
        os.environ.update(saved)
