"""Give the C heap's free memory back before a report is written.

A long run (``run_case`` of a million jobs) leaves the process's C heap (glibc's
``malloc``) holding hundreds of MB of free, fragmented chunks. Rendering then
allocates and frees thousands of ~1 MB strings (the chunks of trace text), and
each allocation searched those fragments: measured here, writing 420 MB of such
chunks took 1.5 s of CPU after a 1 M-job run, 0.47 s in a fresh process, and
0.24 s after ``malloc_trim(0)`` (glibc's ``malloc_trim(3)``, which consolidates
the free chunks and returns whole free pages to the system). :func:`trim_heap`
calls it where the C library has it (glibc on Linux), and does nothing elsewhere.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import time
from typing import Any

__all__ = ["trim_heap"]

_libc: Any = None


def trim_heap() -> float | None:
    """Call glibc's ``malloc_trim(0)`` (see module doc).

    Returns:
        The seconds it took, or ``None`` where there is no ``malloc_trim`` (not glibc, not Linux).
    """
    global _libc
    if not sys.platform.startswith("linux"):
        return None
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        except OSError:
            _libc = False
    trim = getattr(_libc, "malloc_trim", None) if _libc else None
    if trim is None:
        return None
    start = time.perf_counter()
    trim(0)
    return time.perf_counter() - start
