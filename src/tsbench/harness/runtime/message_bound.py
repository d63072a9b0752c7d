"""Bounds on what the host takes from a kernel, so model code cannot fill host memory.

Three bounds, each met before a message's body is decoded:

* **per message**: every socket of the host's kernel client refuses frames over `MAX_MESSAGE_BYTES`
  (zmq's MAXMSGSIZE): zmq reads the frame's length, drops the connection and never buffers the body
  (a 900 MiB print, received and decoded whole, took the host to ~3 GiB). libzmq treats that as a
  protocol error and does not reconnect on its own, so `RefusalWatch` sees the drop on a socket monitor,
  connects the socket again and counts the refusal.
* **messages in flight**: each socket queues at most `RECEIVE_QUEUE` messages (zmq's RCVHWM; the default
  of 1,000 let a cell that sent N pre-packed 31 MiB messages grow the host by ~25 MiB each, 60 -> 1.5
  GiB). Past it zmq stops reading the kernel's socket and the kernel's own queue fills, in the kernel's
  memory, which its jail bounds; its publisher then drops what does not fit.
* **bytes per cell and per episode** (`OutputBudget`): `KernelReader` takes each message off the socket
  as raw frames and admits it only while the cell's and the episode's budgets hold it; past them a
  message is dropped unread (its content never decoded), counted, and the cell's observation says so.
  Status messages (a few hundred bytes) are always read, so the end of a cell is still seen, and so is
  a message with a bad signature or a broken frame layout dropped and counted rather than raised.

Messages the kernel sent while a connection was down, or that its publisher dropped, are lost (the
cell's `idle` status among them): the sandbox then takes the shell channel's execute_reply as the end
of the cell, once nothing has come for a moment.
"""

from __future__ import annotations

import hmac
import time
from collections import Counter
from dataclasses import dataclass

import orjson
import zmq
from zmq.utils.monitor import recv_monitor_message

__all__ = [
    "CELL_OUTPUT_BYTES",
    "EPISODE_OUTPUT_BYTES",
    "MAX_MESSAGE_BYTES",
    "RECEIVE_QUEUE",
    "KernelReader",
    "OutputBudget",
    "RefusalWatch",
    "bound_client",
    "refusal_marker",
]

MAX_MESSAGE_BYTES = 32 * 2**20  # far above any figure or sub_rlm request; the observation keeps 256 KiB
RECEIVE_QUEUE = 2  # messages zmq may hold per socket before the host reads them
CELL_OUTPUT_BYTES = 64 * 2**20  # what one cell may send the host; an observation shows 8,192 characters
EPISODE_OUTPUT_BYTES = 256 * 2**20  # what a whole episode may send (figures and sub_rlm requests included)
WATCHED_CHANNELS = ("iopub", "shell", "stdin")
_ALWAYS_READ_BYTES = 4096  # a status message: read past any budget, so the end of a cell is seen
_HEADER_BYTES = 65536  # a header frame longer than this is not a kernel's
_DELIMITER = b"<IDS|MSG>"


def refusal_marker(count: int) -> str:
    return (
        f"\n[... output cut: {count} message(s) from the kernel over {MAX_MESSAGE_BYTES // 2**20} MiB "
        f"refused by the host ...]\n"
    )


def _mib(count: int) -> str:
    return f"{count / 2**20:.0f} MiB" if count >= 2**20 else f"{count} bytes"


@dataclass
class OutputBudget:
    """The bytes of kernel messages the host admits: per cell (reset by `start_cell`) and per episode."""

    cell_bytes: int = CELL_OUTPUT_BYTES
    episode_bytes: int = EPISODE_OUTPUT_BYTES
    episode_used: int = 0
    cell_used: int = 0
    dropped: int = 0  # this cell's messages dropped unread
    dropped_bytes: int = 0
    episode_spent: bool = False  # whether a drop of this cell was the episode's budget's
    malformed: int = 0  # this cell's messages dropped for a bad signature or frame layout

    def __post_init__(self) -> None:
        if self.cell_bytes < 1 or self.episode_bytes < 1:
            raise ValueError("output budgets must be at least one byte")

    def start_cell(self) -> None:
        self.cell_used = self.dropped = self.dropped_bytes = self.malformed = 0
        self.episode_spent = False

    def admit(self, size: int) -> bool:
        """Charge `size` bytes if both budgets hold them; else count the message as dropped."""
        over_episode = self.episode_used + size > self.episode_bytes
        if self.cell_used + size <= self.cell_bytes and not over_episode:
            self.charge(size)
            return True
        self.dropped += 1
        self.dropped_bytes += size
        self.episode_spent = self.episode_spent or over_episode
        return False

    def charge(self, size: int) -> None:
        """A message read past the budget (a status message): counted, never refused."""
        self.cell_used += size
        self.episode_used += size

    @property
    def cut(self) -> bool:
        return bool(self.dropped or self.malformed)

    def marker(self) -> str:
        """The line the cell's observation carries when its output was cut here ('' when it was not)."""
        parts = []
        if self.dropped:
            spent, budget = ("episode's", self.episode_bytes) if self.episode_spent else ("cell's", self.cell_bytes)
            parts.append(
                f"\n[... output cut: {self.dropped} message(s) from the kernel ({_mib(self.dropped_bytes)}) past the "
                f"{spent} output budget of {_mib(budget)} dropped unread ...]\n"
            )
        if self.malformed:
            parts.append(f"\n[... {self.malformed} malformed message(s) from the kernel dropped ...]\n")
        return "".join(parts)


def bound_client(client) -> None:
    """Call before `start_channels()`: every socket the client makes refuses frames over the bound and
    queues at most RECEIVE_QUEUE messages."""
    client.context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
    client.context.setsockopt(zmq.RCVHWM, RECEIVE_QUEUE)


class KernelReader:
    """Takes the started client's messages off its sockets as raw frames, and decodes those the budget
    admits (jupyter_client's own get_*_msg decode everything, and raise on a bad signature)."""

    def __init__(self, client) -> None:
        self.session = client.session
        self._sockets = {name: getattr(client, f"{name}_channel").socket for name in WATCHED_CHANNELS}
        self.last_message = time.monotonic()  # when anything last came, read or dropped

    def get(self, channel: str, budget: OutputBudget, timeout_s: float = 0.0) -> dict | None:
        """The next admitted message of `channel` within `timeout_s`, or None. Dropped messages are
        skipped (and counted in `budget`) without resetting the wait."""
        sock = self._sockets[channel]
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            if not sock.poll(int(remaining * 1000)):
                return None
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                continue
            self.last_message = time.monotonic()
            message = self._admit(frames, budget)
            if message is not None:
                return message
            if time.monotonic() >= deadline:
                return None

    def ready(self, channel: str) -> bool:
        return bool(self._sockets[channel].poll(0))

    def _admit(self, frames: list, budget: OutputBudget) -> dict | None:
        size = sum(len(frame) for frame in frames)
        try:
            start = next(i for i, f in enumerate(frames) if len(f) == len(_DELIMITER) and f.bytes == _DELIMITER) + 1
            header_frame = frames[start + 1]
            if len(frames) < start + 5 or len(header_frame) > _HEADER_BYTES:
                raise ValueError("not a kernel message")
            header = orjson.loads(header_frame.buffer)
            small = size <= _ALWAYS_READ_BYTES and header.get("msg_type") == "status"
            if small:
                budget.charge(size)
            elif not budget.admit(size):
                return None
            return self._decode(frames[start:], header)
        except (StopIteration, ValueError, TypeError, KeyError, AttributeError, IndexError, UnicodeDecodeError):
            # orjson.JSONDecodeError is a ValueError: malformed JSON, or nested past orjson's 1,024 levels
            budget.malformed += 1
            return None

    def _decode(self, parts: list, header: dict) -> dict:
        """jupyter_client's Session.deserialize, without its copy of every frame (the content is parsed
        from zmq's buffer) or its replay check (only the kernel holds the key, and it is the one sending)."""
        signature, header_frame, parent, metadata, content = parts[:5]
        if self.session.auth is not None:
            check = self.session.auth.copy()
            for part in (header_frame, parent, metadata, content):
                check.update(part.buffer)
            if not hmac.compare_digest(signature.bytes, check.hexdigest().encode()):
                raise ValueError("bad signature")
        message = {  # orjson alone: jupyter's unpack falls back to json, which recursed past its limit
            "header": header,
            "msg_id": header["msg_id"],
            "msg_type": header["msg_type"],
            "parent_header": orjson.loads(parent.buffer),
            "metadata": orjson.loads(metadata.buffer),
            "content": orjson.loads(content.buffer),  # parsed straight from zmq's buffer
            "buffers": [part.buffer for part in parts[5:]],
        }
        if not all(isinstance(message[name], dict) for name in ("header", "parent_header", "metadata", "content")):
            raise ValueError("not a kernel message")
        return message


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
