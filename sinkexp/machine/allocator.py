"""glibc's malloc on the CPU: keep the memory a training step frees for the next step.

A step frees and allocates the same activations (megabytes each) every step. By default glibc
returns freed memory at the top of its heap to the kernel once it exceeds a trim threshold and
serves large blocks with fresh mappings, so the next step faults those pages in again and the
kernel zeroes them (`sinkexp reproduce barbero2025`: 80 M minor page faults, 9% of its CPU time
in the kernel). `keep_freed_memory()` raises both thresholds (mmap: glibc's maximum, 32 MiB; trim:
1 GiB): where memory comes from changes, never what is computed. A process then keeps its peak heap
instead of handing it back. docs/performance.md ("Memory") has the measured effect (scripts/bench_malloc.py).

Left alone: SINKEXP_MALLOC=glibc, any MALLOC_*_ setting of the user's, and a C library that is
not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 * 2**20  # the largest glibc accepts on 64-bit
TRIM_THRESHOLD = 2**30
USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")


def keep_freed_memory() -> str:
    """Set glibc's thresholds for this process; returns what was done, for the run's log."""
    if os.environ.get("SINKEXP_MALLOC") == "glibc":
        return "glibc defaults (SINKEXP_MALLOC=glibc)"
    if any(name in os.environ for name in USER_SETTINGS):
        return "the user's MALLOC_* / GLIBC_TUNABLES settings"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "left alone (no glibc mallopt)"
    if not (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        return "left alone (mallopt refused)"
    return "freed memory kept (mmap threshold 32 MiB, trim threshold 1 GiB; SINKEXP_MALLOC=glibc undoes it)"
