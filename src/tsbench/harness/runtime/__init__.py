"""Where model code runs: the sandboxed kernel (`sandbox.py`), its jail (`jail.py`) and bounds (`limits.py`).

`check_jail()` is the cheap preflight eval runs before any kernel harness: it raises SandboxError
with one line saying why kernels cannot be jailed here and how to fix it.
"""

import importlib
from typing import Any

# Loaded on first use (PEP 562): an episode that never starts a kernel (single-pass, a reference policy)
# and the code that only catches SandboxError (harness/play.py) never import jupyter_client and zmq.
_WHERE = {
    "SandboxError": "errors",
    "check_jail": "jail",
    "OBSERVATION_MAX_CHARS": "observation",
    "CellResult": "observation",
    "truncate_observation": "observation",
    "Sandbox": "sandbox",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:  # a submodule (`from tsbench.harness.runtime import orphans`) is imported by Python
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


__all__ = ["OBSERVATION_MAX_CHARS", "CellResult", "Sandbox", "SandboxError", "check_jail", "truncate_observation"]
