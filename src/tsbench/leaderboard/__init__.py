"""The AnomalyXL leaderboard: results files in, Table-1 layout, figures and HTML out.

Reads run directories only (tsbench.eval.schema); imports no harness, model or trainer, so a
leaderboard can be built anywhere the result files have been copied to.
"""

from .build import build_leaderboard
from .load import RunInfo, discover_runs, load_results
from .result import LeaderboardResult
from .terminal import rich_table

__all__ = ["LeaderboardResult", "RunInfo", "build_leaderboard", "discover_runs", "load_results", "rich_table"]
