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

__all__ = ["COMM_KINDS", "grid_slots"]

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
    n = len(jobs["kind"])
    kinds, steps_of, starts = jobs["kind"], jobs["step"], jobs["start_ns"]
    labels = [f"{st}{k}{'' if mb is None else mb}" for st, k, mb in zip(jobs["stage"], kinds, jobs["microbatch"])]
    # Stream order: jobs of one step and stream by recorded start (then end).
    by_stream: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, key in enumerate(zip(steps_of, jobs["stream"])):
        by_stream[key].append(i)
    succ: list[list[int]] = [[] for _ in range(n)]  # dst, or ~dst (negative) when released at the source's start
    indeg = [0] * n
    ends = jobs["end_ns"]
    for members in by_stream.values():
        members.sort(key=lambda i: (starts[i], ends[i]))
        for a, b in pairwise(members):
            succ[a].append(b)
            indeg[b] += 1
    index: dict[tuple[int, str], int] = {key: i for i, key in enumerate(zip(steps_of, labels))}
    steps = sorted(set(steps_of))
    for src, dst, edge in case.get("deps") or []:
        from_start = edge == "start"
        for step in steps:
            s, d = index.get((step, src)), index.get((step, dst))
            if s is not None and d is not None:
                succ[s].append(~d if from_start else d)
                indeg[d] += 1
    # Any topological order gives the same slots (each is the longest path to its job): a plain stack.
    ready = [0] * n  # the earliest slot each job may take, from what it waits for
    todo = [i for i in range(n) if indeg[i] == 0]
    done = 0
    while todo:
        i = todo.pop()
        done += 1
        here = ready[i]
        after = here if kinds[i] in COMM_KINDS else here + 1
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
        stuck = next(i for i in range(n) if indeg[i] > 0)
        raise ValueError(f"case {case.get('id')!r}: the recorded stream order and the dependencies form a cycle "
                         f"through {labels[stuck]} of step {steps_of[stuck]}; the grid cannot place it")
    return ready
