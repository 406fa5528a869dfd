"""The schedule grid: every job of a step in a rank × slot table, one slot per compute job.

The review page's grid view draws a case as PyTorch's schedule visualizer does
(``torch/distributed/pipelining/_schedule_visualizer.py`` in pytorch/pytorch:
``get_schedule_ops`` then ``add_schedule_op_spacing``): every compute job
(F, B, I, W, OPT) takes one slot on its stream, and a job starts in the first
slot after both the job before it on its stream and every job it depends on
(a dependency on a job's start: in that job's slot). Transfers (send/receive
jobs) take no slot: they pass their dependency through. Idle slots are the
slots a stream waits for a dependency, so warm-up, cool-down and the schedule's
bubbles show as empty cells whatever the measured durations were.

Each stream keeps its recorded job order (the order the run executed), so the
grid shows the schedule that ran, not a re-planned one.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

import numpy as np

__all__ = ["COMM_KINDS", "GridCycleError", "grid_slots", "place_in_order", "place_slots"]

#: Edges turned into Python ints at a time by :func:`place_in_order` (all 2 M of a 1 M-job case at once
#: took 180 MB of fresh memory, and page faults to match).
_EDGES_PER_PASS = 8192
#: Job kinds that take no slot in the grid (transfers).
COMM_KINDS = frozenset({"SEND_F", "RECV_F", "SEND_B", "RECV_B"})


def grid_slots(case: dict[str, Any]) -> list[int]:
    """The grid slot of every job of a results-document case.

    Args:
        case: a results-document case (``jobs`` columns, ``deps`` as
            ``[src, dst, "end" | "start"]`` job texts, applied within each step).

    Returns:
        One slot per job, in the order of ``case["jobs"]`` (length n), counted
        from 0 at each step's start. A compute job occupies its slot; a transfer
        sits at the slot its dependency released it (it occupies none).

    Raises:
        ValueError: the recorded order and the dependencies form a cycle (a job
            recorded after a job that depends on it, on one stream), naming the
            case and a job of the cycle.
    """
    jobs = case["jobs"]
    kinds, steps_of, starts, ends = jobs["kind"], jobs["step"], jobs["start_ns"], jobs["end_ns"]
    labels = [f"{st}{k}{'' if mb is None else mb}" for st, k, mb in zip(jobs["stage"], kinds, jobs["microbatch"])]
    # Stream order: jobs of one step and stream by recorded start (then end).
    by_stream: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, key in enumerate(zip(steps_of, jobs["stream"])):
        by_stream[key].append(i)
    for members in by_stream.values():
        members.sort(key=lambda i: (starts[i], ends[i]))
    index: dict[tuple[int, str], int] = {key: i for i, key in enumerate(zip(steps_of, labels))}
    steps = sorted(set(steps_of))
    deps: list[int] = []
    for src, dst, edge in case.get("deps") or []:
        for step in steps:
            s, d = index.get((step, src)), index.get((step, dst))
            if s is not None and d is not None:
                deps.extend((s, d, 1 if edge == "start" else 0))
    try:
        return place_slots([k in COMM_KINDS for k in kinds], list(by_stream.values()), deps)
    except GridCycleError as e:
        raise ValueError(f"case {case.get('id')!r}: the recorded stream order and the dependencies form a cycle "
                         f"through {labels[e.job]} of step {steps_of[e.job]}; the grid cannot place it") from None


class GridCycleError(ValueError):
    """The stream orders and the dependencies form a cycle through job index ``job``."""

    def __init__(self, job: int) -> None:
        super().__init__(f"the stream orders and the dependencies form a cycle through job {job}")
        self.job = job


def place_slots(comm: list[bool], streams: list[list[int]], deps: list[int]) -> list[int]:
    """The core of :func:`grid_slots` on job indices (what the page's data already holds).

    Args:
        comm: per job (n), whether it is a transfer (takes no slot).
        streams: the jobs of each stream in one step, in their recorded order.
        deps: flat triples ``src, dst, from_start`` (1: ``dst`` may start when ``src`` starts).

    Returns:
        Per job its slot (n), counted from 0 at its step's start.

    Raises:
        GridCycleError: the stream orders and the dependencies form a cycle (a ValueError; ``job`` names a job of it).
    """
    n = len(comm)
    succ: list[list[int]] = [[] for _ in range(n)]  # dst, or ~dst (negative) when released at the source's start
    indeg = [0] * n
    for members in streams:
        for a, b in pairwise(members):
            succ[a].append(b)
            indeg[b] += 1
    for k in range(0, len(deps), 3):
        d = deps[k + 1]
        succ[deps[k]].append(~d if deps[k + 2] else d)
        indeg[d] += 1
    # Any topological order gives the same slots (each is the longest path to its job): a plain stack.
    ready = [0] * n  # the earliest slot each job may take, from what it waits for
    todo = [i for i in range(n) if indeg[i] == 0]
    done = 0
    while todo:
        i = todo.pop()
        done += 1
        here = ready[i]
        after = here if comm[i] else here + 1
        for j in succ[i]:
            if j < 0:
                j = ~j
                if here > ready[j]:
                    ready[j] = here
            elif after > ready[j]:
                ready[j] = after
            indeg[j] -= 1
            if indeg[j] == 0:
                todo.append(j)
    if done < n:
        raise GridCycleError(next(i for i in range(n) if indeg[i] > 0))
    return ready


def place_in_order(comm: np.ndarray, chained: np.ndarray, deps: np.ndarray, start: np.ndarray) -> list[int] | None:
    """:func:`place_slots` for jobs whose streams are runs of consecutive indices, in one pass over
    the edges in the order of the recorded times, no Python call per job.

    Every slot is the longest path to its job (a compute job adds 1 after it, a transfer or a
    start dependency 0), so any order in which every edge goes forward gives the same slots as
    :func:`place_slots`. A recorded run starts a job after what it waits for (or with it, for a
    start dependency), so ordering by start, then by how many jobs of the same start lead to a
    job along the edges, is one; it is checked, never trusted. One sort of the edges by their
    source's place, then one Python step per edge.

    Args:
        comm: bool, shape ``(n,)``: the job is a transfer (takes no slot).
        chained: bool, shape ``(n,)``: job ``i`` follows job ``i - 1`` on its stream in the same step.
        deps: int64, shape ``(d, 3)``: ``src, dst, from_start`` (1: ``dst`` may start when ``src`` starts).
        start: int64, shape ``(n,)``: each job's recorded start (any unit).

    Returns:
        Per job its slot (n), as :func:`place_slots` gives; ``None`` when the times order no edge
        list forward (an imported log's host stamps, a cycle): then use :func:`place_slots`.
    """
    n = len(comm)
    nxt = np.flatnonzero(chained)
    src = np.concatenate([nxt - 1, deps[:, 0]]).astype(np.int64, copy=False)
    dst = np.concatenate([nxt, deps[:, 1]]).astype(np.int64, copy=False)
    tied = np.flatnonzero(start[src] == start[dst])
    depth = np.zeros(n, np.int64)
    for _ in range(64):  # chains of jobs that start together are short: a send and its receive, an overlapped group
        deeper = depth.copy()
        np.maximum.at(deeper, dst[tied], depth[src[tied]] + 1)
        if (deeper == depth).all():
            break
        depth = deeper
    else:
        return None
    # Each job's place in the order: (start, depth). Ties share no edge (an edge between two jobs of one
    # start makes their depths differ), so the edges sorted by their source's place go forward.
    if not n or int(np.abs(start).max()) < (1 << 56):
        key = start.astype(np.int64) * 64 + depth  # depth < 64: one int64 key, one sort
    else:
        key = np.empty(n, np.int64)
        key[np.lexsort((depth, start))] = np.arange(n)
    if len(src) and not (key[src] < key[dst]).all():
        return None
    step = np.where(comm, 0, 1)[src]
    step[len(nxt):][deps[:, 2] != 0] = 0  # released at the source's start
    order = np.argsort(key[src], kind="stable")  # every edge into a job before any edge out of it
    ready = [0] * n
    for lo in range(0, len(order), _EDGES_PER_PASS):  # a few thousand edges at a time: their memory is reused
        at = order[lo:lo + _EDGES_PER_PASS]
        for u, v, w in zip(src[at].tolist(), dst[at].tolist(), step[at].tolist()):
            x = ready[u] + w
            if x > ready[v]:
                ready[v] = x
    return ready
