"""Shared by the Ray tests: a head node on 127.0.0.1 without its dashboard process, started again
when a loaded machine took it past Ray's raylet-registration wait (30 s, fixed in Ray 2.60's
`Node.__init__`; no setting lengthens it)."""

from __future__ import annotations

import secrets
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
