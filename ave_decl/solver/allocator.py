"""Memory management of a check: keep freed memory in the process instead of handing it back
to the kernel (glibc only), and collect cyclic garbage rarely while a check runs.

Why: each kernel gets a fresh Z3 context (smt.Encoder, and one per violated query's canonical
model), and a Z3 context allocates about 16 MB. With glibc's defaults, large blocks are mapped
and unmapped per allocation and the top of the heap is trimmed past 128 KB, so every new
context faulted its pages in again: 4-7 ms per context, five contexts per check of
examples/gemm_lds_mfma.ave, and checks ran 130 ms or 160 ms depending on what had been freed
before (docs/performance.md, Session 19). With blocks below 32 MiB taken from the heap and up to
64 MiB of free heap kept, a freed context's pages serve the next one. Results never depend on it.

`AVE_MALLOC_TUNING=off` leaves the C library's settings alone (a host program that tunes its
allocator itself). Elsewhere than glibc nothing is done.

The collector: a check makes millions of short-lived objects (z3py wrappers, ctypes arguments,
memo tuples) and no reference cycles that outlive it (tests/test_reference_cycles.py), so
Python's default thresholds (a collection every 700 net allocations) walked the live facts and
terms thousands of times for nothing: ~5 % of production attention's check, ~10 % of its time
on the process clock (docs/performance.md, Session 24). `few_collections` raises them while a
check runs and restores the caller's afterwards.
"""
from __future__ import annotations

import ctypes
import gc
import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager

M_TRIM_THRESHOLD = -1  # glibc mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024
TRIM_THRESHOLD = 64 * 1024 * 1024

_outcome: bool | None = None  # decided once per process

# a collection after 50,000 net new objects instead of 700, the older generations rarely
COLLECTOR_THRESHOLDS = (50_000, 20, 100)


@contextmanager
def few_collections() -> Iterator[None]:
    """The collector's thresholds raised to COLLECTOR_THRESHOLDS for the block (never lowered:
    a caller's higher thresholds stay, and a threshold of 0, automatic collection off, stays
    off), the caller's restored after."""
    previous = gc.get_threshold()
    if previous[0] != 0:
        gc.set_threshold(*(max(p, t) for p, t in zip(previous, COLLECTOR_THRESHOLDS)))
    try:
        yield
    finally:
        gc.set_threshold(*previous)


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds, once per process; whether they were set."""
    global _outcome
    if _outcome is None:
        _outcome = _set_thresholds()
    return _outcome


def _set_thresholds() -> bool:
    if os.environ.get("AVE_MALLOC_TUNING", "").lower() in ("off", "0", "no", "false"):
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
