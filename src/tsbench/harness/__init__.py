"""Harnesses: each runs one episode (task in, final message + trace out) and knows nothing of runs.

A harness is a `Harness[S]` subclass (harness/base.py): its settings class S beside it, its
capabilities declared; a new one is one line in HARNESSES (harness/registry.py), or, from outside
tsbench, a `harness.<name>` entry point in the `tsbench.plugins` group (see tsbench.core.registry).
`play` (harness/play.py) is the one way every caller runs an episode.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

# Loaded on first use (PEP 562), so reading settings (harness/settings.py) does not start the jail's
# and the models' imports: name -> the module that defines it.
_WHERE = {
    "FunctionHarness": "base",
    "Harness": "base",
    "EpisodeError": "tsbench.core.episode",
    "EpisodeOutcome": "tsbench.core.episode",
    "EpisodeResult": "tsbench.core.episode",
    "EpisodeTask": "tsbench.core.episode",
    "episode_outcome": "play",
    "play": "play",
    "require_jail": "play",
    "HARNESSES": "registry",
    "get_harness": "registry",
    "settings_class": "registry",
    "HarnessSettings": "settings",
    "MemorySettings": "settings",
    "as_settings": "settings",
    "harness_settings": "settings",
    "memory_for": "settings",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    where = _WHERE[name]
    value = getattr(importlib.import_module(where if "." in where else f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


class _Package(types.ModuleType):
    """Importing the submodule harness/play.py binds it on the package; the name stays the function `play`,
    as an eager `from tsbench.harness.play import play` left it."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "play" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = sorted(_WHERE)
