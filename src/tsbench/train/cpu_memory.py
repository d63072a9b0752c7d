"""Peak memory of training on CPU: fewer glibc malloc arenas.

glibc gives each thread that allocates its own arena (up to 8 per core), and freed activations stay
mapped in each of them, so a step on two threads peaks about 0.5 GB higher than on one (measured with
`make bench`, section train). `mallopt(M_ARENA_MAX, 2)` (mallopt(3)) caps them for every later
allocation of this process; elsewhere (another libc, macOS) nothing changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_ARENA_MAX = -8  # from glibc's malloc.h
ARENAS = 2


def limit_malloc_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas; True when the C library took the setting."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(M_ARENA_MAX, arenas))
    except (OSError, AttributeError):  # not glibc: no mallopt
        return False
