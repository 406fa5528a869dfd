"""ZB-auto's local search: first-improvement descent on the per-stage kind strings, timed
incrementally (:func:`harness.schedule.zb_auto_eval._resimulate`), from each starting point of
:mod:`harness.schedule.zb_auto_candidates` in turn (:func:`harness.schedule.zb_auto.zb_auto`).

The moves and the acceptance key ``(longest span, step, sum of spans)`` are this harness's own:
improvements of the longest span come through moves on other stages that lower the step or the
sum of spans, so the tie-breakers take the descent across plateaus of the objective.
"""

from __future__ import annotations

import time

from harness.schedule.zb_auto_eval import _F, _I, _W, Delays, _Index, _key, _resimulate, _simulate_full, _valid_string

__all__: list[str] = []


def _shift_forwards(ks: list[int], start: int, earlier: bool) -> list[int] | None:
    """All forwards from position ``start`` on one slot earlier (``earlier``) or later
    relative to the backwards for inputs: flip each ``I F`` (or ``F I``) pair of the F/I
    subsequence once, left to right. A warm-up one forward longer (shorter) with the
    steady pattern kept."""
    pos = [q for q in range(start, len(ks)) if ks[q] != _W]
    sub = [ks[q] for q in pos]
    a, b = (_I, _F) if earlier else (_F, _I)
    changed = False
    q = 0
    while q < len(sub) - 1:
        if sub[q] == a and sub[q + 1] == b:
            sub[q], sub[q + 1] = b, a
            changed = True
            q += 2
        else:
            q += 1
    if not changed:
        return None
    out = list(ks)
    for q, x in zip(pos, sub):
        out[q] = x
    return out


def _local_search(
    p: int,
    m: int,
    dur: list[tuple[int, int, int]],
    c: Delays,
    mems: list[tuple[float, float, float]],
    limits: list[float],
    kinds: list[list[int]],
    key: tuple[int, int, int],
    bound: int,
    budget: int,
    deadline: float | None,
) -> tuple[list[list[int]], tuple[int, int, int], int, int]:
    """First-improvement descent on the per-stage kind strings, lexicographic in ``(longest
    span, step, sum of spans)``; returns ``(kinds, key, jobs timed, moves accepted)``.

    Moves, stage by stage from the longest span down: every adjacent swap of two different
    kinds, every W moved two or three slots, then the warm-up shifts of
    :func:`_shift_forwards`. A move is kept only if the string stays valid (I after its F,
    W after its I, memory within the limit), the lists do not deadlock and the key drops.
    A move on a stage off the critical path can still lower the step or the sum of spans:
    the tie-breakers take the descent across plateaus of the longest span. Each candidate is
    timed incrementally (:func:`_resimulate`); ``budget`` counts jobs re-timed.
    """
    work = 0
    accepted = 0
    kinds = [list(x) for x in kinds]
    base = _simulate_full(p, m, dur, c, kinds)
    assert base is not None
    index = _Index(kinds)

    def moves(spans: list[int]):  # type: ignore[no-untyped-def]
        order = sorted(range(p), key=lambda s: (-spans[s], s))
        for s in order:
            ks = kinds[s]
            n = len(ks)
            # from the end of the list: the cheapest to re-time, and where the bubbles are
            for q in range(n - 2, -1, -1):
                if ks[q] != ks[q + 1]:
                    new = list(ks)
                    new[q], new[q + 1] = new[q + 1], new[q]
                    yield s, q, new
            for q in range(n - 1, -1, -1):
                if ks[q] != _W:
                    continue
                for d in (-3, -2, 2, 3):
                    r = q + d
                    if 0 <= r < n:
                        new = list(ks)
                        x = new.pop(q)
                        new.insert(r, x)
                        yield s, min(q, r), new
        for s in order:
            ks = kinds[s]
            first_i = ks.index(_I)
            for earlier in (True, False):
                start = first_i if earlier else max(0, first_i - 1)
                shifted = _shift_forwards(ks, start, earlier)
                if shifted is not None:
                    q0 = next(q for q in range(len(ks)) if ks[q] != shifted[q])
                    yield s, q0, shifted

    improved = True
    while improved and key[0] > bound and work < budget:
        improved = False
        spans = [base.free[s] - base.starts[s][0] for s in range(p)]
        for s, q0, new in moves(spans):
            if not _valid_string(new, mems[s], limits[s]):
                continue
            sim, rerun = _resimulate(p, m, dur, c, kinds, base, index, s, q0, new)
            work += rerun
            if sim is not None:
                k2 = _key(p, sim.starts, sim.free)
                if k2 < key:
                    key = k2
                    kinds[s] = new
                    index.update_row(new, s)
                    base = sim
                    improved = True
                    accepted += 1
                    break
            if work >= budget or (deadline is not None and time.perf_counter() > deadline):
                return kinds, key, work, accepted
    return kinds, key, work, accepted
