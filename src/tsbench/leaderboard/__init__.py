"""The leaderboard: results files in, each family's table (Table-1 layout for AnomalyXL), figures
and HTML out.

Reads run directories only (tsbench.results) and each family's columns (tsbench.tasks); imports no harness, model or trainer, so a
leaderboard can be built anywhere the result files have been copied to.
"""

import importlib
import sys
import types

from .build import build_leaderboard
from .load import RunInfo, discover_runs, load_results
from .result import LeaderboardResult
from .terminal import rich_tables

__all__ = ["LeaderboardResult", "RunInfo", "build_leaderboard", "discover_runs", "load_results", "rich_tables"]


class _CallablePackage(types.ModuleType):
    """`tsbench.leaderboard(...)` (the Python API's function) and `tsbench.leaderboard` (this package)
    are one name: Python binds a subpackage to its parent once it is imported, so the package answers
    the call (the API is looked up at call time: it sits above this package)."""

    def __call__(self, *args, **kwargs):
        return importlib.import_module("tsbench.api").leaderboard(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
