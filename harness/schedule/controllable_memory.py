"""V-Half and V-Min: V-shape schedules with controllable activation memory.

Qi et al., "Pipeline Parallelism with Controllable Memory", arXiv:2405.15362: a
V placement (rank ``r`` holds stages ``r`` and ``2p-1-r``) built by repeating a
*building block* whose lifespan fixes the activation memory, then squeezing it.
V-Min holds about ``(p+4)//3`` micro-batches' activations per rank at peak and
V-Half about ``(p+2)//2``, against ``p`` for 1F1B; their bubbles are about
``2p/3m`` and ``p/2m`` (idle over the longest rank span) at equal F, B, W (the paper's Table 1).

The orders are those of the paper's reference implementation,
sail-sg/zero-bubble-pipeline-parallelism
``megatron/core/pipeline_parallel/zerobubble/scheduler/zbv_greedy.py``
(``stable_pattern_v_min``/``stable_pattern_v_half``, ``put_w``, ``reorder``,
``schedule_from_pattern``), re-implemented here step for step: the building
block's slots per rank for ``F`` of chunk 0, ``F`` of chunk 1, ``B`` of chunk 1,
``B`` of chunk 0 (the zero-bubble repo's types ``F f B b``), repeated every 6
slots per micro-batch, then a greedy reorder that moves each job to its earliest
free slot that keeps the peak memory, once with ``W`` placed in the gaps and once
without, then ``W`` (one queue per chunk) put in the gaps that remain. The
resulting order of each rank is cost-independent (the repo's reorder works on
unit slots); the harness then runs it with the case's costs.

``B`` in the repo is the backward for inputs, the harness's ``I``.
"""

from __future__ import annotations

import heapq

from harness.errors import ConfigError
from harness.schedule.builders import _finish
from harness.schedule.model import Job, JobKind, Schedule, v_placement
from harness.schedule.registry import _check_sizes, register

__all__ = ["v_half", "v_min"]

# zero-bubble repo's job types per rank: 0 F (chunk 0), 1 f (chunk 1), 2 B (chunk 1's
# backward), 3 b (chunk 0's backward), 4 W of chunk 1, 5 W of chunk 0.


def _pattern_v_min(p: int) -> list[list[int]]:
    gap = 2 if p % 3 == 0 else 0
    return [[i, 2 * p - i - 1, 2 * p + gap + i, 4 * p + gap - i - 1] for i in range(p)]


def _pattern_v_half(p: int) -> list[list[int]]:
    gap = 3 if p % 2 == 0 else 0
    return [[2 * i, 3 * p - i - 2, 3 * p + gap + 2 * i - 1, 6 * p + gap - i - 2] for i in range(p)]


def _next(schedule: list[list[int]], pos: list[int], kinds: range) -> tuple[int, int]:
    """The earliest next slot over ``kinds`` (ties: the lower kind) and its kind."""
    inf = 1 << 60
    return min((schedule[t][pos[t]] if pos[t] < len(schedule[t]) else inf, t) for t in kinds)


def _put_w(schedule: list[list[int]], split_w: bool = False) -> list[list[int]]:
    """Add ``W`` slots: each free slot takes a pending ``W`` (of chunk 1 first when split)."""
    schedule = [list(x) for x in schedule]
    bound = max(x[-1] for x in schedule)
    schedule.append([])
    if split_w:
        schedule.append([])
    pending = [0, 0]
    pos = [0] * len(schedule)
    i = 0
    for i in range(bound + 1):
        at, kind = _next(schedule, pos, range(4))
        if at == i:
            pos[kind] += 1
            if 2 <= kind < 4:
                pending[kind - 2 if split_w else 0] += 1
        else:
            for w in range(2):
                if pending[w]:
                    schedule[w + 4].append(i)
                    pending[w] -= 1
                    break
    for w in range(2):
        while pending[w] > 0:
            i += 1
            schedule[w + 4].append(i)
            pending[w] -= 1
    return schedule


def _memory(schedule: list[list[int]]) -> int:
    """Peak activations of one rank, in chunk activations (``F``/``f`` +1, ``W`` -1; without
    ``W`` slots, a free slot frees one pending backward's).

    The repo's walk over every slot ``0..bound``, taking at slot ``i`` the earliest next job (ties: the lower
    kind) when it sits at ``i``, made event by event: the slots between two jobs are gaps, taken at once. As
    there, two jobs in one slot stop the walk at the second (its queue never advances again, and the slots
    after it only free activations, which cannot raise the peak).
    """
    delta = (1, 1, 0, 0, -1)
    has_w = len(schedule) > 4
    bound = max(x[-1] for x in schedule)
    heads = [(queue[0], kind) for kind, queue in enumerate(schedule) if queue]
    heapq.heapify(heads)
    pos = [0] * len(schedule)
    pending = cur = peak = 0
    i = 0  # the next slot to walk
    while heads:
        at, kind = heads[0]
        if at < i or at > bound:  # two jobs in one slot (the walk stops here), or past the repo's last slot
            break
        if at > i and not has_w:  # gap slots i..at-1: each frees one pending backward's activations
            freed = min(pending, at - i)
            cur -= freed
            pending -= freed
        pos[kind] += 1
        queue = schedule[kind]
        if pos[kind] < len(queue):
            heapq.heapreplace(heads, (queue[pos[kind]], kind))
        else:
            heapq.heappop(heads)
        cur += delta[kind]
        if 2 <= kind < 4:
            pending += 1
        if cur > peak:
            peak = cur
        i = at + 1
    return peak


def _heads(stage_result: list[list[list[int]]], kinds: int) -> list[tuple[int, int, int, int]]:
    """A heap of every queue's first job, ``(slot, rank, kind, micro-batch)``: the repo's scan for the job with
    the earliest slot (ties: lower rank, then lower kind) over all ranks and kinds, kept as a heap."""
    heads = [(stage_result[s][t][0], s, t, 0) for s in range(len(stage_result)) for t in range(kinds) if stage_result[s][t]]
    heapq.heapify(heads)
    return heads


def _pop(heads: list[tuple[int, int, int, int]], stage_result: list[list[list[int]]]) -> tuple[int, int, int, int]:
    """The job with the earliest slot, its queue's next job put in its place (a job's slot changes only once it
    is taken, so the heap's entries stay those of the scan)."""
    _at, s, t, mb = head = heads[0]
    queue = stage_result[s][t]
    if mb + 1 < len(queue):
        heapq.heapreplace(heads, (queue[mb + 1], s, t, mb + 1))
    else:
        heapq.heappop(heads)
    return head


def _start_slots(stage_result: list[list[list[int]]]) -> list[list[list[int]]]:
    """The repo's ``eager_execution_time`` with unit costs and no transfer time: every job's
    start slot once each starts as early as its dependencies and its rank's order allow."""
    kinds = len(stage_result[0])
    n = len(stage_result)
    total = n * sum(len(t) for t in stage_result[0])
    end: dict[tuple[int, int, int], int] = {}
    last: list[tuple[int, int] | None] = [None] * n
    heads = _heads(stage_result, kinds)
    for _ in range(total):
        _at, s, t, mb = _pop(heads, stage_result)
        ready = 0
        if t in (0, 2) and s > 0:
            ready = max(ready, end[(s - 1, t, mb)])
        if t in (1, 3) and s + 1 < n:
            ready = max(ready, end[(s + 1, t, mb)])
        if 0 < t < 4:
            ready = max(ready, end[(s, t - 1, mb)])
        if mb > 0:
            ready = max(ready, end[(s, t, mb - 1)])
        prev = last[s]
        if prev is not None:
            ready = max(ready, end[(s, prev[0], prev[1])])
        end[(s, t, mb)] = ready + 1
        last[s] = (t, mb)
    return [[[end[(s, t, mb)] - 1 for mb in range(len(stage_result[s][t]))] for t in range(kinds)] for s in range(n)]


def _reorder(stage_result: list[list[list[int]]], consider_w: bool) -> list[list[list[int]]]:
    """The repo's greedy ``reorder`` ("squeeze"): each job, in slot order, moves to the
    earliest free slot after its dependencies that does not raise the peak memory."""
    kinds = 4
    if consider_w:
        stage_result = [_put_w(s) for s in stage_result]
        kinds = 5
    stage_result = [[list(x) for x in s] for s in stage_result]
    limit = max(_memory(s) for s in stage_result)
    n = len(stage_result)
    occupied = [[False] * (s[-1][-1] + 1) for s in stage_result]
    total = n * sum(len(t) for t in stage_result[0])
    phase = 0
    heads = _heads(stage_result, kinds)
    for _ in range(total):
        at, s, t, mb = _pop(heads, stage_result)
        if t == 3 and s == 0 and phase == 0:
            phase = 1
        if phase == 1:
            if t == 0 and mb == len(stage_result[0][0]) - 1:
                phase = 2
            occupied[s][stage_result[s][t][mb]] = True
            continue
        if phase == 0 and not consider_w:
            occupied[s][stage_result[s][t][mb]] = True
            continue
        ready = -1
        if t in (0, 2) and s > 0:
            ready = max(ready, stage_result[s - 1][t][mb])
        if t in (1, 3) and s + 1 < n:
            ready = max(ready, stage_result[s + 1][t][mb])
        if 0 < t < 4:
            ready = max(ready, stage_result[s][t - 1][mb])
        if t == 4:
            ready = max(ready, sorted(stage_result[s][2] + stage_result[s][3])[mb])
        if mb > 0:
            ready = max(ready, stage_result[s][t][mb - 1])
        ready += 1
        moved = False
        for slot in range(ready, at):
            if not occupied[s][slot]:
                stage_result[s][t][mb] = slot
                if _memory(stage_result[s]) <= limit:
                    moved = True
                    break
        if not moved:
            stage_result[s][t][mb] = at
        occupied[s][stage_result[s][t][mb]] = True
    if not consider_w:
        stage_result = [_put_w(s) for s in stage_result]
    return _start_slots(stage_result)


def _orders(pattern: list[list[int]], m: int) -> list[list[tuple[int, int]]]:
    """Per rank, its ``(type, micro-batch)`` jobs in order (``schedule_from_pattern`` with reorder)."""
    stage_result = [[list(range(x, x + 6 * m, 6)) for x in stage] for stage in pattern]
    r1 = [s[:4] for s in _reorder(stage_result, consider_w=True)]
    r2 = [s[:4] for s in _reorder(r1, consider_w=False)]
    final = [_put_w(s, split_w=True) for s in r2]
    orders = []
    for s in final:
        events = sorted((slot, t, mb) for t, slots in enumerate(s) for mb, slot in enumerate(slots))
        orders.append([(t, mb) for _, t, mb in events])
    return orders


def _build(name: str, pattern: list[list[int]], p: int, m: int, optimizer: bool) -> Schedule:
    F, I, W = JobKind.F, JobKind.I, JobKind.W  # noqa: N806
    ranks: list[list[Job | None]] = []
    for r, order in enumerate(_orders(pattern, m)):
        s0, s1 = r, 2 * p - 1 - r
        kind_stage = [(F, s0), (F, s1), (I, s1), (I, s0), (W, s1), (W, s0)]
        ranks.append([Job(kind_stage[t][1], kind_stage[t][0], mb) for t, mb in order])
    return _finish(name, m, v_placement(p), ranks, optimizer)


@register("V-Half", "VHalf", summary="V schedule holding about half of 1F1B's activations, (p+2)//2 micro-batches (Qi et al., arXiv:2405.15362)",
          splits_backward=True, placed_chunks=2)
def v_half(num_ranks: int, num_microbatches: int, optimizer: bool = False) -> Schedule:
    """V-Half (arXiv:2405.15362): the half-memory building block, repeated and squeezed
    as the paper's reference implementation does (module doc). Peak activations about
    ``(p+2)//2`` micro-batches per rank (``p+2`` chunk activations), bubble about
    ``p/2m`` of ideal time for equal ``F``, ``I``, ``W`` (the paper's Table 1).

    Raises:
        ConfigError: ``m < p`` (the building blocks need at least ``p`` micro-batches to overlap).
    """
    _check_sizes(num_ranks, num_microbatches)
    if num_microbatches < num_ranks:
        raise ConfigError(f"V-Half needs m >= p micro-batches; got p={num_ranks}, m={num_microbatches}")
    return _build("V-Half", _pattern_v_half(num_ranks), num_ranks, num_microbatches, optimizer)


@register("V-Min", "VMin", summary="V schedule holding about a third of 1F1B's activations, (p+4)//3 micro-batches (Qi et al., arXiv:2405.15362)",
          splits_backward=True, placed_chunks=2)
def v_min(num_ranks: int, num_microbatches: int, optimizer: bool = False) -> Schedule:
    """V-Min (arXiv:2405.15362): the minimal-memory building block, repeated and squeezed
    as the paper's reference implementation does (module doc). Peak activations about
    ``(p+4)//3`` micro-batches per rank, bubble about ``2p/3m`` of ideal time for equal
    ``F``, ``I``, ``W`` (the paper's Table 1).

    Raises:
        ConfigError: ``m < p``.
    """
    _check_sizes(num_ranks, num_microbatches)
    if num_microbatches < num_ranks:
        raise ConfigError(f"V-Min needs m >= p micro-batches; got p={num_ranks}, m={num_microbatches}")
    return _build("V-Min", _pattern_v_min(num_ranks), num_ranks, num_microbatches, optimizer)
