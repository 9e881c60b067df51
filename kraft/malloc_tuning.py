"""Keep the C heap's freed memory for the next request instead of giving it back at once.

A node allocates and frees a request-sized buffer for every Produce it reads and every Fetch
response its followers read (Python's bytes and bytearrays over 512 bytes come from
``malloc``).  With glibc's defaults the top of the heap is handed back to the kernel as soon
as 128 KiB of it (rising with the largest block freed, to 32 MiB at most) is free, and a
block over the mmap threshold is mapped and unmapped each time; the next request then
faults every page in again, each one zeroed by the kernel.  Measured on one node taking
kcat's 2M records of 100 bytes: 195,000 minor faults a run and a third of the node's CPU in
the kernel; with the thresholds below, under 2,000 faults and 1.2M -> 1.6M records/s (3 nodes
RF 3 acks=all: 700k -> 1.0M).  Kafka's JVM touches its heap once and keeps it.

The cost is memory: up to ``TRIM_THRESHOLD`` of freed heap stays resident after a burst.
glibc's own environment variables (``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_``,
``GLIBC_TUNABLES``) win: when one is set, nothing is changed here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

# mallopt parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

TRIM_THRESHOLD = 128 << 20  # free heap kept at its top before any is given back
MMAP_THRESHOLD = 32 << 20  # blocks smaller than this come from the heap, not their own mapping

_USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")


def keep_freed_memory(environ=os.environ) -> str:
    """Raise glibc's trim and mmap thresholds for this process; returns what was done, for
    the node's log."""
    given = [name for name in _USER_SETTINGS if environ.get(name)]
    if given:
        return f"malloc thresholds left as {', '.join(given)} sets them"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "malloc thresholds unchanged (no glibc mallopt)"
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    if not (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        return "malloc thresholds unchanged (mallopt refused them)"
    return f"malloc keeps up to {TRIM_THRESHOLD >> 20} MiB of freed heap; blocks under {MMAP_THRESHOLD >> 20} MiB " \
           "come from the heap"
