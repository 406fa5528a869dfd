"""Checks of recorded jobs against themselves and their steps: a job listed twice, a job outside its step.

Every recorded step runs each job of the schedule once on its rank, so ``(rank, step, kind, stage,
micro-batch)`` names one job; a second job with the same five is a damaged or hand-edited file (two
merged part files of one run, a line pasted twice), and the figures computed from it (busy time,
bubble, in-flight peak) would count that job twice. A step's span, ``[step_start_ns, step_end_ns]``,
is where the step's jobs ran: the executor takes the step's reference event before any job and its
latest job end (:func:`harness.executor.execute`), the importers the earliest start and latest end of
the step's jobs, and :func:`harness.rank_merge.merge_parts` shifts each rank's jobs and its step
bounds by the same (monotone) map onto rank 0's time base. A job outside its step's span therefore
never comes from the harness; the step time (the span) would not contain the work it is said to hold.

Both checks are vectorized over numpy columns (a sort for the duplicates), so they cost little at
1,000,000 jobs. :mod:`harness.report.fields` runs them on every results-document case (``report``,
and each case a run writes), :mod:`harness.rank_merge` on every part file (``merge-ranks``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["first_duplicate", "first_outside_step"]


def first_duplicate(*columns: np.ndarray) -> tuple[int, int] | None:
    """The first job (in list order) whose key equals an earlier job's, as ``(earlier, later)`` indices.

    Args:
        columns: the key columns, integer arrays of one shape ``(n,)`` (e.g. rank, step, kind code,
            stage, micro-batch with -1 for none).

    Returns:
        ``None`` when every key is distinct; else the indices of the repeated job's earlier
        occurrence and of the first later job that repeats a key.
    """
    n = len(columns[0]) if columns else 0
    if n < 2:
        return None
    order = np.lexsort(columns[::-1])  # stable: equal keys keep their list order
    same = np.ones(n - 1, dtype=bool)
    for col in columns:
        ranked = col[order]
        same &= ranked[1:] == ranked[:-1]
    hits = np.flatnonzero(same)
    if not len(hits):
        return None
    later = order[hits + 1]
    k = int(np.argmin(later))
    return int(order[hits[k]]), int(later[k])


def first_outside_step(step: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray, steps: Sequence[int],
                       step_start_ns: Sequence[int], step_end_ns: Sequence[int], slack_ns: int = 0) -> tuple[int, int] | None:
    """The first job that starts before its step's start or ends after its step's end.

    Args:
        step, start_ns, end_ns: the jobs' step numbers and times (ns), int64 arrays of shape ``(n,)``.
        steps, step_start_ns, step_end_ns: the recorded steps and their spans (ns), one entry per step;
            every job's step must be among ``steps``.
        slack_ns: how far (ns) outside its span a job may lie and still pass (0: exactly within).

    Returns:
        ``None`` when every job lies within its step; else ``(job index, step index)``.
    """
    if not len(step):
        return None
    numbers = np.asarray(steps, dtype=np.int64)
    if len(numbers) > 1 and not bool((numbers[1:] > numbers[:-1]).all()):  # unsorted steps (refused elsewhere): by lookup
        index_of = {int(s): i for i, s in enumerate(steps)}
        where = np.fromiter((index_of[int(s)] for s in step), dtype=np.int64, count=len(step))
    else:
        where = np.searchsorted(numbers, step)
    lo = np.asarray(step_start_ns, dtype=np.int64)[where] - slack_ns
    hi = np.asarray(step_end_ns, dtype=np.int64)[where] + slack_ns
    hits = np.flatnonzero((start_ns < lo) | (end_ns > hi))
    if not len(hits):
        return None
    return int(hits[0]), int(where[hits[0]])
