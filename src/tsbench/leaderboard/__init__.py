"""The leaderboard: results files in, each family's table (Table-1 layout for AnomalyXL), figures
and HTML out.

Reads run directories only (tsbench.results) and each family's columns (tsbench.tasks); imports no harness, model or trainer, so a
leaderboard can be built anywhere the result files have been copied to.
"""

from .build import build_leaderboard
from .load import RunInfo, discover_runs, load_results
from .result import LeaderboardResult
from .terminal import rich_tables

__all__ = ["LeaderboardResult", "RunInfo", "build_leaderboard", "discover_runs", "load_results", "rich_tables"]
