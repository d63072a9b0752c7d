"""inspect_ai's entry point into tsbench (pyproject: [project.entry-points.inspect_ai]).

inspect loads this module when a name starts with `tsbench/`; importing the task registers it as
`tsbench/anomalyxl`.
"""

from tsbench.interop.inspect_task import anomalyxl, tsbench_harness, tsbench_score  # noqa: F401
