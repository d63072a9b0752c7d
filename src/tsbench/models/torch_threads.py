"""How many threads torch computes with for a model that runs in this process.

torch's default, one intra-op thread per core, makes its OpenMP workers spin in a barrier between
operations; on a shared 2-core machine two of them ran SmolLM2 4.6x slower than one (issue 41: 152 s
against 33 s for one 2,083-token prompt), and `make demo` looked hung. The default here leaves half
the usable cores to the jail kernels and the coordinator; `-M threads=N` (or TSBENCH_TORCH_THREADS)
sets it. Waiting workers sleep (OMP_WAIT_POLICY=PASSIVE) when torch is not imported yet.
"""

from __future__ import annotations

import os
import sys

from tsbench.core.errors import UserError

THREADS_ENV = "TSBENCH_TORCH_THREADS"
MAX_DEFAULT_THREADS = 8


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS has no affinity mask
        return os.cpu_count() or 1


def default_threads() -> int:
    """TSBENCH_TORCH_THREADS if set, else half the usable cores, at least 1, at most 8."""
    given = os.environ.get(THREADS_ENV)
    if given:
        return _checked(given, THREADS_ENV)
    return max(1, min(usable_cores() // 2, MAX_DEFAULT_THREADS))


def _checked(value: object, where: str) -> int:
    try:
        threads = int(str(value))
    except ValueError:
        threads = 0
    if threads < 1:
        raise UserError(f"{where} takes a whole number of threads from 1 (got {value!r})")
    return threads


def set_torch_threads(threads: int | str | None = None) -> int:
    """Set torch's intra-op threads (process-wide) and return the number; None: default_threads()."""
    count = default_threads() if threads is None else _checked(threads, "threads")
    if "torch" not in sys.modules:  # read by OpenMP when torch loads, never after
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    if torch.get_num_threads() != count:
        torch.set_num_threads(count)
    return count
