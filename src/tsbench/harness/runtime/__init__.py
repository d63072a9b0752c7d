"""Where model code runs: the sandboxed kernel (`sandbox.py`), its jail (`jail.py`) and bounds (`limits.py`).

`check_jail()` is the cheap preflight eval runs before any kernel harness: it raises SandboxError
with one line saying why kernels cannot be jailed here and how to fix it.
"""

from tsbench.harness.runtime.errors import SandboxError
from tsbench.harness.runtime.jail import check_jail
from tsbench.harness.runtime.observation import OBSERVATION_MAX_CHARS, CellResult, truncate_observation
from tsbench.harness.runtime.sandbox import Sandbox

__all__ = ["OBSERVATION_MAX_CHARS", "CellResult", "Sandbox", "SandboxError", "check_jail", "truncate_observation"]
