"""Where model code runs: the sandboxed kernel (`sandbox.py`), its jail (`jail.py`) and bounds (`limits.py`).

`check_jail()` is the cheap preflight eval runs before any kernel harness: it raises SandboxError
with one line saying why kernels cannot be jailed here and how to fix it.
"""

# The kernel itself (sandbox.py, with jupyter_client and zmq) is imported from its module by whoever starts
# one, so an episode that never starts a kernel, or code that only catches SandboxError, does not load it.
from tsbench.harness.runtime.errors import SandboxError
from tsbench.harness.runtime.jail import check_jail

__all__ = ["SandboxError", "check_jail"]
