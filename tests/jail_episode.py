"""Shared by tests/test_jail_*.py: real rlm episodes whose "model" replies with attack code.

`play_attack(blocks)` runs one real episode through `tsbench.harness.play` (real kernel, real jail):
the scripted model replies with each block in a ```python fence, one per turn, then a final
answer. Containment is judged by the callers from the host side (marker files, listeners, the
host's process table); the observations come back so that a test can also see what the attack saw.
"""

from __future__ import annotations

import os
import socket
import textwrap
from pathlib import Path

import numpy as np

from tsbench.core.episode import EpisodeTask
from tsbench.harness import play
from tsbench.harness.rlm import RLMSettings
from tsbench.models.base import Completion

FINAL = 'The anomaly is at index 120. {"answer": [120, 130]}'


class ScriptedChat:
    """A ChatModel that replies from a list; a callable entry is asked for its text when its turn comes."""

    name = "test/attacker"

    def __init__(self, replies) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    def generate(self, messages, *, max_tokens=None, temperature=None, task=None) -> Completion:
        self.prompts.append(messages[-1].content)
        reply = self.replies.pop(0) if self.replies else FINAL
        text = reply() if callable(reply) else reply
        return Completion(text=text, input_tokens=len(messages), output_tokens=len(text.split()))

    def close(self) -> None:
        pass


def fenced(code: str) -> str:
    return f"Let me look.\n```python\n{textwrap.dedent(code).strip()}\n```"


def attack_task(files: dict[str, bytes] | None = None) -> EpisodeTask:
    values = np.sin(np.arange(400, dtype=np.float32) / 7.0)[None, :]
    return EpisodeTask(
        row_id="attack-0",
        category="localize",
        regime="precise",
        question="Where is the anomaly? Answer with [start, end].",
        channel_names=["a"],
        values=values,
        files=files or {},
    )


def play_attack(blocks: list[str], **config) -> tuple[object, list[str]]:
    """One episode: each block in its own turn, then FINAL. Returns (outcome, observations)."""
    model = ScriptedChat([fenced(block) for block in blocks] + [FINAL])
    cfg = RLMSettings(max_turns=len(blocks) + 2, cell_timeout_s=config.pop("cell_timeout_s", 60), **config)
    outcome = play(model, "rlm", attack_task(), cfg)
    assert outcome.error is None, outcome.error
    observations = [entry["observation"] for entry in outcome.result.transcript if entry["role"] == "tool"]
    assert outcome.result.final_message == FINAL  # the episode went on to its end
    return outcome, observations


class TcpListener:
    """A listener on the host's 127.0.0.1 that records whether anything connected."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.3)
        self.port = self.sock.getsockname()[1]

    def connected(self) -> bool:
        try:
            conn, _ = self.sock.accept()
        except TimeoutError:
            return False
        conn.close()
        return True

    def close(self) -> None:
        self.sock.close()


def host_processes_with(token: str) -> list[int]:
    """Host pids whose command line contains `token` (a jailed process that outlived its jail)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(entry.name))
    return found
