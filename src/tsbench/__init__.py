"""tsbench: long-context time-series reasoning benchmarks for language-model agents.

The Python API (docs/python.md) loads on first use, so `import tsbench` stays cheap:

    import tsbench
    data = tsbench.generate(preset="small", out="data/anomalyxl")
    run = tsbench.evaluate("scripted/zscore", data, harness="single-pass-text", out="results/zscore")
    tsbench.compare(run, "results/detector").lines()
    tsbench.leaderboard([run, "results/detector"], out="results/leaderboard")
    tsbench.contamination.probe("scripted/zscore", data, harness="single-pass-text").verdict

`tsbench.leaderboard` is also the leaderboard package (Python binds a subpackage to its parent's
name once it is imported), so the package is made callable: `tsbench.leaderboard(...)` is
`tsbench.api.leaderboard(...)` either way.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# name -> module holding it, imported when the name is first read (dynamically: `tsbench` is imported by
# core/ for its version, and a static import here would make every package reach eval/ in import-linter's eyes)
_LAZY = {name: "tsbench.api" for name in ("generate", "evaluate", "compare", "Dataset", "Run")}
_LAZY["UserError"] = "tsbench.core.errors"
# modules read as attributes: tsbench.contamination.probe(...); the leaderboard package is itself callable
_MODULES = ("contamination", "leaderboard")
__all__ = sorted([*_LAZY, *_MODULES, "__version__"])


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f"tsbench.{name}")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tsbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
