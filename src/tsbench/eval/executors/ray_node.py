"""`python -m tsbench.eval.executors.ray_node --address=HEAD:6379 --node-ip-address=IP [ray start flags]`:
`ray start` for a worker node of a hand-built cluster that asks nothing of the outside.

Why not plain `ray start`: Ray (2.60) finds "this machine's IP" by connecting a UDP socket to
8.8.8.8:53 (then [2001:4860:4860::8888]:53) and, when that fails, by looking the host name up, in
DNS where /etc/hosts lacks it (`services.get_node_ip_address()` with no address; C++
GetNodeIpAddressFromPerspective). It does so whatever `--node-ip-address` says: on a worker node in
`ray start`'s own version check (`Node.check_version_info`), and in every node's runtime-env agent.
Ray's one switch that skips it, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (the IP is then 127.0.0.1, used
there only in log lines), also makes `ray start --address` refuse to join a cluster. The head needs
only the variable (docs/many-machines.md); here, for a worker node, it is set for every process the
node starts, while this one process keeps the join allowed and names itself by the IP it was given.
"""

from __future__ import annotations

import os
import sys

SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def node_ip(argv: list[str]) -> str | None:
    """The value of --node-ip-address in `argv` (either spelling), None when absent."""
    for index, arg in enumerate(argv):
        if arg.startswith("--node-ip-address="):
            return arg.split("=", 1)[1]
        if arg == "--node-ip-address" and index + 1 < len(argv):
            return argv[index + 1]
    return None


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    ip = node_ip(argv)
    if not ip or not any(arg.startswith("--address") for arg in argv):
        sys.exit(
            "usage: python -m tsbench.eval.executors.ray_node --address=HEAD:PORT --node-ip-address=IP [ray start flags]"
        )
    os.environ[SWITCH] = "0"  # the raylet, its agents and workers: the IP of a log line is 127.0.0.1, never probed
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from ray._private import ray_constants, services
    from ray.scripts.scripts import main as ray_main

    ray_constants.ENABLE_RAY_CLUSTER = True  # this process joins a cluster (read before starting the node)

    def given_ip(address: str | None = None) -> str:
        """This node's IP as given; Ray asks it with an address only to learn the route to the head."""
        return ip if address is None else services.node_ip_address_from_perspective(address)

    services.get_node_ip_address = given_ip
    sys.argv = ["ray", "start", *argv]
    ray_main()


if __name__ == "__main__":
    main()
