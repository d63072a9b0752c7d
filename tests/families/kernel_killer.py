"""A policy whose code kills its own kernel (`test/kills-its-kernel`), for tests/test_kernel_lost.py and
tests/test_ray_executor.py: installed as a plugin distribution by `install_policy`, so a Ray worker
builds it from its spec string as it would any policy."""

from __future__ import annotations

from pathlib import Path

from tsbench.models.base import Agent, Completion

SPEC = "test/kills-its-kernel"
KILL = "```python\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n```"
ANSWER = '{"answer": [10, 20]}'  # what it says after the cell: never to be scored


class KillsItsKernel(Agent):
    """First reply: code that SIGKILLs the kernel; then an answer (a lost kernel must end the row)."""

    plays = ("rlm", "rlm-image")
    name = SPEC

    def generate(self, messages, *, max_tokens=None, temperature=None, task=None) -> Completion:
        said = sum(1 for message in messages if message.role == "assistant")
        return Completion(text=KILL if said == 0 else ANSWER)


def install_policy(site: Path) -> Path:
    """`site` holding this module's policy as an installed distribution (the module itself is found
    on tests/families, which the caller puts on the path)."""
    info = site / "tsb_kernel_killer-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tsb-kernel-killer\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[tsbench.plugins]\npolicy.{SPEC} = kernel_killer:KillsItsKernel\n")
    return site


def forget_plugins() -> None:
    """The plugin registries read entry points once per process: make them read again."""
    from tsbench.baselines import POLICIES
    from tsbench.core.registry import plugin_targets

    plugin_targets.cache_clear()
    POLICIES._found = None


def use_here(site: Path, monkeypatch) -> None:
    """Make this process see the policy installed in `site` (call forget_plugins() when done)."""
    monkeypatch.syspath_prepend(str(site))
    forget_plugins()
