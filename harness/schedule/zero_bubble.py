"""Zero-bubble schedules: the backward split into ``I`` (inputs) and ``W`` (weights), ``W``
moved into the bubbles (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR'24, arXiv:2401.10241).

- ``ZB-H1`` (:func:`zb_h1`): 1F1B memory, ``W`` deferred to the cool-down (§2.1; PyTorch's
  ``ScheduleInterleavedZeroBubble`` for one chunk per rank);
- ``InterleavedZeroBubble`` (:func:`interleaved_zero_bubble`): ZB1P over ``v`` chunks per
  rank in loop placement (PyTorch's ``ScheduleInterleavedZeroBubble``);
- ``ZB-H2`` (:func:`zb_h2`): ``2p-1`` in-flight micro-batches, the handcrafted schedule of §2.2;
- ``ZB-V`` (:func:`zb_v`): two chunks per rank in a V placement (§6; PyTorch's
  ``ScheduleZBVZeroBubble``).

V-Half and V-Min, the same authors' controllable-memory V schedules, are in
:mod:`harness.schedule.controllable_memory`. The builders register on import
(:mod:`harness.schedule.builders` imports this module) and stay importable from
:mod:`harness.schedule.builders`.
"""

from __future__ import annotations

from harness.schedule.builders import _finish, _from_parts
from harness.schedule.interleaved import _interleaved_rounds, _rank_ops_1f1b
from harness.schedule.model import Job, JobKind, Schedule, loop_placement, v_placement
from harness.schedule.registry import _check_sizes, register

__all__ = ["interleaved_zero_bubble", "zb_h1", "zb_h2", "zb_v"]


@register(
    "ZB-H1",
    "ZB1P",
    "ZBH1",
    summary="zero bubble, 1F1B memory: backward split into I and W, W delayed (Qi et al., arXiv:2401.10241, §2.1)",
    splits_backward=True,
)
def zb_h1(num_ranks: int, num_microbatches: int, optimizer: bool = False) -> Schedule:
    """ZB-H1: 1F1B with the backward split into ``I`` (inputs) and ``W`` (weights);
    rank ``s`` defers its first ``s`` ``W`` passes to the tail, where they fill the
    cool-down bubble.

    Port of PyTorch's ``ScheduleInterleavedZeroBubble`` (ZB1P) for one chunk per
    rank: ``min(m, p-1-s)`` warm-up forwards, steady ``F I`` pairs, a ``W`` after
    each pair from the ``s``-th on, remaining ``W`` at the end. Peak in-flight
    micro-batches ``min(m, p)`` on every rank (1F1B's rank-0 peak, the paper's
    ``p M_B``: rank ``s`` holds its activations ``s`` W-passes longer). Uniform stages: bubble
    ``(p-1)(T_F+T_B-T_W)`` per rank (arXiv:2401.10241, Table 2).
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    parts = [_rank_ops_1f1b(s, p, 1, m, m, min(m, p - 1 - s), zero_bubble=True, deferred_w=s) for s in range(p)]
    return _from_parts("ZB-H1", m, loop_placement(p), parts, optimizer, {})



@register(
    "InterleavedZeroBubble",
    "InterleavedZB",
    "ZB1P-interleaved",
    summary="ZB-H1 (ZB1P) over v chunks per rank in loop placement (Qi et al., arXiv:2401.10241; PyTorch ScheduleInterleavedZeroBubble)",
    takes_chunks=True,
    splits_backward=True,
)
def interleaved_zero_bubble(num_ranks: int, num_microbatches: int, chunks: int = 2, optimizer: bool = False) -> Schedule:
    """Interleaved zero bubble (ZB1P) with ``v = chunks`` stages per rank (loop placement).

    Port of PyTorch's ``ScheduleInterleavedZeroBubble._calculate_single_rank_operations``
    (its ``_get_1f1b_rank_ops`` with ``enable_zero_bubble``), without the idle slots its
    ``_add_bubbles_to_actions`` inserts (slots take no time here; the order of the jobs
    on each rank is PyTorch's): rank ``s`` runs ``min(v m, (v-1) R + (p-1-s))`` warm-up
    forwards (``R = m // max(1, m // p)`` micro-batches per round), then ``F I`` pairs
    over the chunks (forwards ascending, backwards descending chunk order), a ``W`` of
    the oldest pending ``I`` after each backward from the ``s``-th on, the remaining
    ``W`` at the end. With ``v = 1`` it is ``ZB-H1``.

    Raises:
        ConfigError: ``m`` is not a multiple of the number of rounds ``max(1, m // p)``
            (PyTorch's constraint).
    """
    _check_sizes(num_ranks, num_microbatches, chunks)
    p, m, v = num_ranks, num_microbatches, chunks
    per_round = _interleaved_rounds("InterleavedZeroBubble", p, m)
    parts = [
        _rank_ops_1f1b(s, p, v, m, per_round, min(v * m, (v - 1) * per_round + (p - 1 - s)), zero_bubble=True, deferred_w=s)
        for s in range(p)
    ]
    return _from_parts("InterleavedZeroBubble", m, loop_placement(p, v), parts, optimizer, {"v": v})



@register(
    "ZB-H2",
    "ZB2P",
    "ZBH2",
    summary="zero bubble with 2p-1 in-flight micro-batches: extra warm-up forwards, F I W steady (Qi et al., arXiv:2401.10241, §2.2)",
    splits_backward=True,
)
def zb_h2(num_ranks: int, num_microbatches: int, optimizer: bool = False) -> Schedule:
    """ZB-H2: rank ``s`` runs ``w = min(m, 2(p-1-s)+1)`` warm-up forwards, then for
    each micro-batch ``i`` an ``I``, a ``W`` (except that the first ``2s`` ``W`` are
    deferred to the tail) and the next forward; the deferred ``W`` close the list.

    This is the handcrafted schedule of Figure 3 (bottom) of arXiv:2401.10241,
    §2.2: extra forwards in the warm-up fill the bubble before the first ``I`` and
    the ``W`` moved to the tail turn the trapezoid into a parallelogram. Peak
    in-flight micro-batches ``min(m, 2p-1)``. Uniform stages: every rank is idle
    ``(p-1)(T_F+T_B-2T_W)`` (when ``>= 0``) inside its own span (first job start to
    last job end); that is the paper's bubble, the iteration period once the
    optimizer synchronization is removed (paper §4). With a barrier per step
    the parallelogram's skew of ``(p-1) T_F`` adds to the step time.
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    F, I, W = JobKind.F, JobKind.I, JobKind.W  # noqa: N806
    ranks: list[list[Job | None]] = []
    for s in range(p):
        warmup = min(m, 2 * (p - 1 - s) + 1)
        jobs: list[Job | None] = [Job(s, F, i) for i in range(warmup)]
        deferred = 2 * s
        w_next = 0
        for i in range(m):
            jobs.append(Job(s, I, i))
            if i >= deferred:
                jobs.append(Job(s, W, w_next))
                w_next += 1
            if warmup + i < m:
                jobs.append(Job(s, F, warmup + i))
        jobs.extend(Job(s, W, i) for i in range(w_next, m))
        ranks.append(jobs)
    return _finish("ZB-H2", m, loop_placement(p), ranks, optimizer)



@register(
    "ZB-V",
    "ZBV",
    "ZBVZeroBubble",
    summary="zero bubble in a V placement, two chunks per rank, 1F1B memory (Qi et al., arXiv:2401.10241, §6; PyTorch ScheduleZBVZeroBubble)",
    splits_backward=True,
    placed_chunks=2,
)
def zb_v(num_ranks: int, num_microbatches: int, optimizer: bool = False) -> Schedule:
    """ZB-V: rank ``r`` holds stages ``r`` and ``2p-1-r`` (V placement) and runs the
    handcrafted order of PyTorch's ``ScheduleZBVZeroBubble._calculate_single_rank_operations``:
    ``2(p-r)-1`` forwards of chunk 0; ``r`` pairs (F chunk 1, F chunk 0); ``p-r``
    triples (F, I, W of chunk 1); a steady phase of (F0 I0 W0 F1 I1 W1); a
    cool-down of ``I`` passes with delayed ``W``.

    The order is built for ``max(m, 2p-1)`` micro-batches and jobs of micro-batches
    ``>= m`` are dropped, as PyTorch does. Zero bubble for ``T_F = T_B = T_W``
    given enough micro-batches (paper §6, README of sail-sg/zero-bubble-pipeline-parallelism).
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    n = max(2 * p - 1, m)
    F, I, W = JobKind.F, JobKind.I, JobKind.W  # noqa: N806
    ranks: list[list[Job | None]] = []
    for r in range(p):
        c0, c1 = r, 2 * p - 1 - r
        jobs: list[Job] = []
        f0 = f1 = b0 = b1 = 0
        for _ in range(2 * (p - r) - 1):
            jobs.append(Job(c0, F, f0))
            f0 += 1
        for _ in range(r):
            jobs += [Job(c1, F, f1), Job(c0, F, f0)]
            f1 += 1
            f0 += 1
        for _ in range(p - r):
            jobs += [Job(c1, F, f1), Job(c1, I, b1), Job(c1, W, b1)]
            f1 += 1
            b1 += 1
        while f1 < f0 or f0 < n:
            if f0 < n:
                jobs.append(Job(c0, F, f0))
                f0 += 1
            jobs += [Job(c0, I, b0), Job(c0, W, b0), Job(c1, F, f1), Job(c1, I, b1), Job(c1, W, b1)]
            b0 += 1
            f1 += 1
            b1 += 1
        w0, w1 = b0, b1
        for _ in range(r):
            jobs += [Job(c0, I, b0), Job(c1, I, b1)]
            b0 += 1
            b1 += 1
        for _ in range(p - r):
            jobs += [Job(c0, I, b0), Job(c0, W, w0)]
            b0 += 1
            w0 += 1
        jobs += [Job(c1, W, i) for i in range(w1, b1)]
        jobs += [Job(c0, W, i) for i in range(w0, b0)]
        ranks.append([j for j in jobs if j.microbatch is not None and j.microbatch < m])
    return _finish("ZB-V", m, v_placement(p), ranks, optimizer)
