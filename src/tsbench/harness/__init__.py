"""Harnesses: each runs one episode (task in, final message + trace out) and knows nothing of runs.

A harness is a `Harness[S]` subclass (harness/base.py): its settings class S beside it, its
capabilities declared; a new one is one line in HARNESSES (harness/registry.py), or, from outside
tsbench, a `harness.<name>` entry point in the `tsbench.plugins` group (see tsbench.core.registry).
`play` (harness/play.py) is the one way every caller runs an episode.
"""

from __future__ import annotations

from tsbench.harness.base import FunctionHarness, Harness
from tsbench.harness.episode import EpisodeError, EpisodeOutcome, EpisodeResult, EpisodeTask
from tsbench.harness.play import episode_outcome, play, require_jail
from tsbench.harness.registry import HARNESSES, get_harness, settings_class
from tsbench.harness.settings import HarnessSettings, MemorySettings, as_settings, harness_settings, memory_for

__all__ = [
    "HARNESSES",
    "EpisodeError",
    "EpisodeOutcome",
    "EpisodeResult",
    "EpisodeTask",
    "FunctionHarness",
    "Harness",
    "HarnessSettings",
    "MemorySettings",
    "as_settings",
    "episode_outcome",
    "get_harness",
    "harness_settings",
    "memory_for",
    "play",
    "require_jail",
    "settings_class",
]
