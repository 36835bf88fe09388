"""At most two glibc malloc arenas in a process that runs reports.

glibc gives each thread that meets contention an arena of its own, up to eight per core,
and frees little of them back: a report's decoded tiles and its base map, allocated in
one thread and freed in another, leave each arena holding its high-water mark. Two
arenas keep the worker's peak near what its reports use at once (bench/ZONES.md).

MALLOC_ARENA_MAX in the environment wins (glibc reads it itself); elsewhere than glibc
this does nothing.
"""

import ctypes
import ctypes.util
import os

M_ARENA_MAX = -8  # malloc.h
ARENAS = 2


def cap() -> bool:
    """Cap this process's malloc arenas at ARENAS; return whether the cap was set."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_ARENA_MAX, ARENAS))
    except (OSError, AttributeError):  # not glibc
        return False
