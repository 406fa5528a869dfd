"""Busy time per rank: the union of its compute jobs' intervals, so an overlapped group
(:mod:`harness.plan.groups`) counts once, for as long as it lasts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

__all__ = ["busy_union"]


def busy_union(rank: Any, start: Any, end: Any, p: int) -> list[int]:
    """Per rank, the length (ns) of the union of its jobs' ``[start, end)`` intervals: a rank
    running an overlapped group (:mod:`harness.plan.groups`) is busy once while both jobs run.

    Args:
        rank, start, end: one entry per job (lists or int64 arrays of one length; ns).
        p: ranks (the length of the result).

    One sort by rank and start, then a per-rank running maximum of the ends: each job adds
    the part of it past every earlier job's end, ``O(n log n)`` in numpy.
    """
    import numpy as np

    rk = np.asarray(rank, dtype=np.int64)
    a = np.asarray(start, dtype=np.int64)
    b = np.asarray(end, dtype=np.int64)
    out = [0] * p
    if not len(rk):
        return out
    order = np.lexsort((a, rk))
    rk, a, b = rk[order], a[order], b[order]
    # a running maximum that restarts per rank: lift each rank's times above the previous rank's
    lo, hi = int(min(a.min(), b.min())), int(max(a.max(), b.max()))
    lift = (rk - int(rk.min())) * (hi - lo + 1) - lo
    reach = np.maximum.accumulate(b + lift) - lift
    before = np.empty_like(reach)
    before[1:] = reach[:-1]
    first = np.ones(len(rk), dtype=bool)
    first[1:] = rk[1:] != rk[:-1]
    before[first] = np.iinfo(np.int64).min
    part = b - np.maximum(a, before)
    part[part < 0] = 0
    sums = np.zeros(int(rk.max()) + 1, dtype=np.int64)
    np.add.at(sums, rk, part)
    for r in range(min(p, len(sums))):
        out[r] = int(sums[r])
    return out
