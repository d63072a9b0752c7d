"""A bound on what the host takes from a kernel in one message, so model code cannot fill host memory.

A cell that prints 900 MiB at once reaches the host as one zmq frame; received and decoded whole it took
the eval process to ~3 GiB before the observation was cut. Every socket of the host's kernel client
therefore refuses frames over `MAX_MESSAGE_BYTES` (zmq's MAXMSGSIZE): zmq reads the frame's length,
drops the connection and never buffers the body. libzmq treats that as a protocol error and does not
reconnect on its own, so `RefusalWatch` sees the drop on a socket monitor, connects the socket again
and counts the refusal; the sandbox marks the cell's output as cut. Messages the kernel sent while the
connection was down are lost too (the cell's `idle` status among them): the sandbox then takes the
shell channel's execute_reply as the end of the cell.
"""

from __future__ import annotations

from collections import Counter

import zmq
from zmq.utils.monitor import recv_monitor_message

__all__ = ["MAX_MESSAGE_BYTES", "RefusalWatch", "bound_client", "refusal_marker"]

MAX_MESSAGE_BYTES = 32 * 2**20  # far above any figure or sub_rlm request; the observation keeps 256 KiB
WATCHED_CHANNELS = ("iopub", "shell", "stdin")


def refusal_marker(count: int) -> str:
    return (
        f"\n[... output cut: {count} message(s) from the kernel over {MAX_MESSAGE_BYTES // 2**20} MiB "
        f"refused by the host ...]\n"
    )


def bound_client(client) -> None:
    """Call before `start_channels()`: every socket the client makes refuses frames over the bound."""
    client.context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)


class RefusalWatch:
    """Monitors the started client's sockets; `poll()` reconnects the ones zmq dropped and names them."""

    def __init__(self, client) -> None:
        self.refused: Counter[str] = Counter()
        self._watched = []
        for name in WATCHED_CHANNELS:
            sock = getattr(client, f"{name}_channel").socket
            monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
            self._watched.append((name, sock, monitor, sock.get(zmq.LAST_ENDPOINT).decode()))

    def poll(self) -> list[str]:
        """Channels whose connection was dropped since the last call, each connected again."""
        dropped = []
        for name, sock, monitor, url in self._watched:
            lost = False
            while True:
                try:
                    event = recv_monitor_message(monitor, flags=zmq.NOBLOCK)
                except zmq.Again:
                    break
                lost = lost or event["event"] == zmq.EVENT_DISCONNECTED
            if lost:
                try:
                    sock.disconnect(url)
                except zmq.ZMQError:  # already forgotten by zmq
                    pass
                sock.connect(url)
                self.refused[name] += 1
                dropped.append(name)
        return dropped

    def close(self) -> None:
        for _, sock, monitor, _ in self._watched:
            try:
                sock.disable_monitor()
            except zmq.ZMQError:
                pass
            monitor.close(linger=0)
        self._watched = []
