"""The eval host's memory by the rows in flight: freed buffers go back to the OS (issue 47).

Measured on a c8 rlm eval of the paper's split, the host's RSS grew with the rows played although
the live objects did not (tracemalloc saw < 30 MiB of rows in flight):

- pyarrow's default pool (mimalloc) kept what reading the index and the rows' pages had freed:
  selecting 16 rows of the paper split left +57 MiB resident (system pool: +5 MiB), loading 16 rows
  +26 MiB (system pool: +2 MiB);
- glibc raises its mmap threshold to the largest block freed (up to 32 MiB), so every later series
  copy, npz and context.json buffer was carved from the thread arenas, which then held 239 MiB free
  of 298 MiB after 40 rows. A fixed threshold (mallopt(3) M_MMAP_THRESHOLD) maps each large buffer
  on its own and unmaps it when freed: the arenas stayed at 59 MiB.

Both are process-wide and apply to allocations made after the call; a user's own
ARROW_DEFAULT_MEMORY_POOL or MALLOC_MMAP_THRESHOLD_ is left as set. Nothing read or written changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_MMAP_THRESHOLD = -3  # from glibc's malloc.h
MMAP_THRESHOLD = 128 * 2**10  # glibc's own starting value, kept fixed
_done: dict[str, bool] = {}


def _mallopt(option: int, value: int) -> bool:
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        return bool(ctypes.CDLL(name).mallopt(option, value))
    except (OSError, AttributeError):  # not glibc: no mallopt
        return False


def release_freed_memory() -> dict[str, bool]:
    """Once per process: pyarrow on the system allocator and glibc's mmap threshold fixed; says which took."""
    if _done:
        return _done
    import pyarrow as pa

    _done["arrow_system_pool"] = False
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ and pa.default_memory_pool().backend_name != "system":
        pa.set_memory_pool(pa.system_memory_pool())
        _done["arrow_system_pool"] = True
    _done["mmap_threshold"] = "MALLOC_MMAP_THRESHOLD_" not in os.environ and _mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    return _done
