"""Joining a Ray cluster, and choosing how each dataset file reaches it.

Connecting. `RAY_USAGE_STATS_ENABLED=0` is set before ray is imported or started, so every Ray
process started from here inherits it. Without an address a private local cluster is started:
every service on 127.0.0.1, token authentication on (Ray >= 2.52 generates the token), and no
dashboard process at all (`head_without_dashboard`): Ray starts one even with
`include_dashboard=False`, and its usage-stats module asks the cloud metadata services
(169.254.169.254, DNS `metadata.google.internal`) for the cloud name before it reads the
usage-stats switch, and on a cluster not started by `ray.init` also sends usage-stats.ray.io a
"disabled" report. So a cluster tsbench starts sends nothing beyond 127.0.0.1 (tests/test_egress.py
checks it with strace in a loopback-only network namespace). With an address (`auto`, `HOST:PORT`)
the driver joins that cluster as it is, and its egress is as its `ray start` made it
(docs/many-machines.md); its token auth is kept (`RAY_AUTH_MODE`, `RAY_AUTH_TOKEN` or
`~/.ray/auth_token`, as the head was started with).

Datasets. A file reaches workers by its path when every node that runs a worker reads the same
bytes there (shared storage, or one machine): each node is probed once per file, comparing the
file's size and a hash of its first and last MiB with the driver's copy. Otherwise the driver
loads each row of that file and ships the loaded sample through Ray's object store, so workers
need no copy of the data at all. `TSBENCH_RAY_DATA=path|object` forces one way.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from tsbench.core.errors import UserError
from tsbench.eval.executors.ray_worker import fingerprint

INSTALL_HINT = "--executor ray needs Ray: pip install 'tsbench[ray]'"
DATA_MODES = ("auto", "path", "object")
PROBE_TIMEOUT_S = 60.0
PROBE_GROUP = "probe"  # the worker's concurrency group for fingerprints


def import_ray(local: bool) -> Any:
    """The ray module, imported with usage stats off; `local`: a cluster that binds 127.0.0.1."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    if local:
        # Ray's own switch for single-machine clusters: the node IP is the loopback address, so
        # the GCS, raylets, object managers and workers all listen on 127.0.0.1 only.
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        os.environ.setdefault("RAY_AUTH_MODE", "token")
        # Ray waits 20 s for its GCS to answer; a loaded 2-core machine can take longer to start it
        os.environ.setdefault("RAY_gcs_server_port_wait_time_s", "120")
    try:
        import ray
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    constants = sys.modules.get("ray._private.ray_constants")
    if local and constants is not None:  # ray imported earlier in this process: the switch is read at import
        constants.ENABLE_RAY_CLUSTER = False
    return ray


@contextlib.contextmanager
def head_without_dashboard(ray: Any) -> Iterator[None]:
    """Head nodes started in this block (`ray.init()`, `ray.cluster_utils.Cluster`) start no
    dashboard process: with the dashboard off, that process holds only Ray's usage-stats module,
    which probes cloud metadata endpoints whatever RAY_USAGE_STATS_ENABLED says (see the module
    docstring). Nothing tsbench uses needs it (no job submission, no state API). Ray has no switch
    for this, so the head's step that starts it is skipped; a Ray without that step is an error
    here rather than a silent probe."""
    try:
        node_class = getattr(importlib.import_module("ray._private.node"), "Node", None)
    except ImportError:
        node_class = None
    start = getattr(node_class, "start_api_server", None)
    if start is None:
        raise UserError(
            f"Ray {getattr(ray, '__version__', '?')}: no Node.start_api_server to skip; "
            "tsbench cannot start a cluster without its dashboard process"
        )

    def skipped(self: Any, **_: Any) -> None:
        """The head's dashboard process, not started."""

    node_class.start_api_server = skipped
    try:
        yield
    finally:
        node_class.start_api_server = start


def connect(address: str | None, cpus: float) -> tuple[Any, bool]:
    """(ray, whether this call connected and so must disconnect). A process already connected
    (a notebook's `ray.init()`) is used as it is."""
    ray = import_ray(local=address is None)
    if ray.is_initialized():
        return ray, False
    quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
    try:
        if address is None:
            with head_without_dashboard(ray):
                ray.init(address="local", num_cpus=max(1, math.ceil(cpus)), include_dashboard=False, **quiet)
        else:
            ray.init(address=address, **quiet)
    except UserError:
        raise
    except Exception as exc:
        where = "start a local Ray cluster" if address is None else f"join the Ray cluster at {address}"
        hint = (
            ""
            if address is None
            else " (is the head up? A head started with token auth needs RAY_AUTH_MODE=token here too"
            f"{'' if os.environ.get('RAY_AUTH_MODE') == 'token' else ' (unset here)'}, and its token in "
            "RAY_AUTH_TOKEN or ~/.ray/auth_token)"
        )
        raise UserError(
            f"cannot {where}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}{hint}"
        ) from None
    return ray, True


def choose_mode(driver: tuple[int, str] | None, workers: Iterable[tuple[int, str] | None]) -> str:
    """`path` when every probed node sees the driver's bytes (or the driver cannot read the file
    itself, so only the workers' copy can serve), else `object`."""
    if driver is None:
        return "path"
    return "path" if all(seen == driver for seen in workers) else "object"


class DataPlacement:
    """Per dataset file, `path` or `object`. Each node is probed through one of its workers (in
    the worker's probe concurrency group, beside any running episode) before it gets work."""

    def __init__(self, ray: Any, mode: str = "auto") -> None:
        if mode not in DATA_MODES:
            raise UserError(f"TSBENCH_RAY_DATA must be one of {', '.join(DATA_MODES)} (got {mode!r})")
        self.ray = ray
        self.forced = None if mode == "auto" else mode
        self.nodes: dict[str, Any] = {}  # node id -> a worker handle on it
        self._driver: dict[str, tuple[int, str] | None] = {}
        self._modes: dict[str, str] = {}

    def add_node(self, node: str, worker: Any) -> None:
        """A worker came up on `node`: probe that node for the files seen so far."""
        if node in self.nodes:
            return
        self.nodes[node] = worker
        if self.forced is None and self._modes:
            self._update(list(self._modes), [worker])

    def forget(self, worker: Any) -> None:
        """A lost worker no longer speaks for its node (the next worker that starts there will)."""
        for node, handle in list(self.nodes.items()):
            if handle is worker:
                del self.nodes[node]

    def mode(self, path: str) -> str:
        if self.forced is not None:
            return self.forced
        if path not in self._modes:
            self._driver[path] = fingerprint(path)
            self._modes[path] = "path"
            self._update([path], list(self.nodes.values()))
        return self._modes[path]

    def modes(self) -> dict[str, str]:
        return dict(self._modes)

    def _update(self, paths: list[str], workers: list[Any]) -> None:
        refs = [w.fingerprints.options(concurrency_group=PROBE_GROUP).remote(paths) for w in workers]
        for ref in refs:
            try:
                seen = self.ray.get(ref, timeout=PROBE_TIMEOUT_S)
            except Exception:  # a node that cannot answer cannot be trusted with a path
                seen = {}
            for path in paths:
                if self._modes[path] == "path" and choose_mode(self._driver[path], [seen.get(path)]) == "object":
                    self._modes[path] = "object"
