"""Overlapped job groups: a forward and a backward that a rank runs at the same time.

DualPipe (deepseek-ai/DualPipe) and PyTorch's ``ScheduleDualPipeV`` pair a forward
of one chunk with a backward of the other (PyTorch's ``OVERLAP_F_B`` action,
written ``(0F3;1B2)OVERLAP_F_B`` in its CSV): the point of the schedule is that
the backward's compute hides under the forward's communication and the other
way round, so the pair costs less than ``F + B``. The harness keeps such a
group as one overlapped job group:

* a schedule carries its groups in ``schedule.params["overlap"]``, a tuple of
  job tuples (first job first); :func:`with_groups` sets them. They name jobs,
  not positions, so passes that insert send/receive jobs keep them;
* :func:`apply` turns a plan's groups into concurrent work: the first job stays
  on the rank's compute stream, each further job runs on a sibling stream
  ``rank{r}/overlap`` (``overlap2``, ...) and starts with the first (a start
  dependency), and the rank's next compute job waits for every job of the
  group. The group therefore lasts ``max(F, B)``, the duration
  Victarry/PP-Schedule-Visualization gives an overlapped pair by default
  (``overlapped_op_time = max(...)``); ``sim``, ``cpu`` and ``cuda`` run it the
  same way (two streams on the rank), and traces show the two slices on sibling
  tracks, so slices on one track still nest.

Busy time per rank counts both jobs of a group (the work done), so with overlap
a rank's busy time may exceed its wall time inside the group.

Not modelled: a group lasting something other than ``max`` of its jobs (a
cost-model ``overlap_ns`` or ratio), e.g. when the two compete for the same SMs.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise
from typing import TYPE_CHECKING

from harness.errors import ScheduleError
from harness.schedule.model import Job, JobKind, Schedule

if TYPE_CHECKING:
    from harness.plan import Plan

__all__ = ["OVERLAP_PARAM", "apply", "busy_union", "groups_of", "with_groups"]

#: The key of a schedule's ``params`` that holds its overlapped groups.
OVERLAP_PARAM = "overlap"


def groups_of(schedule: Schedule) -> tuple[tuple[Job, ...], ...]:
    """The overlapped job groups of ``schedule`` (empty when it has none)."""
    return tuple(schedule.params.get(OVERLAP_PARAM, ()))  # type: ignore[arg-type]


def with_groups(schedule: Schedule, groups: Iterable[Iterable[Job]]) -> Schedule:
    """``schedule`` with ``groups`` as its overlapped job groups (replacing any it had).

    Each group is two or more jobs of one rank, listed one after the other in the
    rank's list (send/receive jobs and idle slots between them allowed), none of which
    needs another of the group (a forward and the backward of the same stage and
    micro-batch cannot overlap). Checked when the plan is built (:func:`apply`).
    """
    params = dict(schedule.params)
    kept = tuple(tuple(g) for g in groups)
    if kept:
        params[OVERLAP_PARAM] = kept
    else:
        params.pop(OVERLAP_PARAM, None)
    return Schedule(schedule.name, schedule.num_microbatches, schedule.stage_to_rank, schedule.ranks, params)


def _needs(later: Job, earlier: Job, schedule: Schedule) -> bool:
    """Whether ``later`` depends on ``earlier`` (directly or through its stage's order)."""
    if later.microbatch != earlier.microbatch:
        return False
    if later.stage == earlier.stage:
        return earlier.kind is JobKind.F or (earlier.kind is JobKind.I and later.kind is JobKind.W)
    if later.kind is JobKind.F and earlier.kind is JobKind.F:
        return earlier.stage < later.stage
    if later.kind in (JobKind.B, JobKind.I) and earlier.kind in (JobKind.B, JobKind.I):
        return earlier.stage > later.stage
    return False


def apply(plan: Plan) -> Plan:
    """The plan with its schedule's overlapped groups running concurrently (module doc).

    Returns:
        ``plan`` itself when the schedule has no groups; else a new plan whose
        later group members sit on sibling streams ``rank{r}/overlap``,
        ``overlap2``, ... with a start dependency on the group's first job, and
        whose next compute job of the rank waits for every member's end.

    Raises:
        ScheduleError: a group with fewer than two jobs, a job not in the
            schedule, jobs on different ranks or not listed one after the other
            (only send/receive jobs and idle slots between them), a job in two
            groups, or a job that needs another of its group.
    """
    groups = groups_of(plan.schedule)
    if not groups:
        return plan
    import numpy as np

    from harness.plan import Plan, PlanArrays, _csr

    schedule = plan.schedule
    jobs = plan.jobs
    index = {job: j for j, job in enumerate(jobs)}
    cols = plan.arrays
    rank = cols.rank
    stream = cols.stream.copy()
    comm = np.array([job.kind.is_comm for job in jobs], bool)
    # per rank, its compute jobs in list order (positions in the plan's job list)
    compute_next = np.full(len(jobs), -1, np.int64)
    prev_compute = -1
    for j in range(len(jobs)):
        if comm[j]:
            continue
        if prev_compute >= 0 and rank[prev_compute] == rank[j]:
            compute_next[prev_compute] = j
        prev_compute = j
    deps = [list(d) for d in plan.deps]
    start_deps = [list(d) for d in plan.start_deps]
    names = list(plan.stream_names)
    stream_rank = list(plan.stream_rank)
    sibling: dict[tuple[int, int], int] = {}
    seen: set[int] = set()
    for group in groups:
        shown = "(" + ";".join(map(str, group)) + ")OVERLAP_F_B"
        if len(group) < 2:
            raise ScheduleError(f"schedule {schedule.name!r}: overlapped group {shown} has fewer than two jobs", tuple(map(str, group)))
        missing = [str(job) for job in group if job not in index]
        if missing:
            raise ScheduleError(f"schedule {schedule.name!r}: overlapped group {shown} names {missing[0]}, which is not in the schedule",
                                tuple(missing))
        at = [index[job] for job in group]
        if len({int(rank[j]) for j in at}) > 1:
            raise ScheduleError(f"schedule {schedule.name!r}: overlapped group {shown} has jobs on different ranks", tuple(map(str, group)))
        for a, b in pairwise(at):
            if compute_next[a] != b:
                raise ScheduleError(
                    f"schedule {schedule.name!r}: the jobs of overlapped group {shown} must be listed one after the other on their rank "
                    "(only send/receive jobs and idle slots between them)", tuple(map(str, group)))
        for j in at:
            if j in seen:
                raise ScheduleError(f"schedule {schedule.name!r}: {jobs[j]} is in two overlapped groups", (str(jobs[j]),))
            seen.add(j)
        for k, later in enumerate(group):
            for earlier in group[:k]:
                if _needs(later, earlier, schedule):
                    raise ScheduleError(
                        f"schedule {schedule.name!r}: overlapped group {shown}: {later} needs {earlier}, so they cannot run at the same time",
                        (str(later), str(earlier)))
        first = at[0]
        r = int(rank[first])
        after = int(compute_next[at[-1]])
        for k, j in enumerate(at[1:], start=1):
            key = (r, k)
            if key not in sibling:
                sibling[key] = len(names)
                names.append(f"rank{r}/overlap" + ("" if k == 1 else str(k)))
                stream_rank.append(r)
            stream[j] = sibling[key]
            start_deps[j].append(first)
            if after >= 0 and j not in deps[after]:
                deps[after].append(j)
    # Streams ordered by rank, the rank's compute stream first, then its overlap and comm streams.
    order_key = sorted(range(len(names)), key=lambda s: (stream_rank[s], "/compute" not in names[s], "/overlap" not in names[s], names[s]))
    remap = np.empty(len(names), np.int64)
    remap[order_key] = np.arange(len(names))
    deps_ptr, deps_idx = _csr([tuple(d) for d in deps])
    start_ptr, start_idx = _csr([tuple(d) for d in start_deps])
    columns = PlanArrays(
        stage=cols.stage, kind=cols.kind, microbatch=cols.microbatch, rank=cols.rank, step=cols.step,
        stream=remap[stream], chunk=cols.chunk,
        deps_ptr=deps_ptr, deps_idx=deps_idx, start_ptr=start_ptr, start_idx=start_idx,
    )
    out = Plan(schedule, columns, tuple(names[s] for s in order_key), tuple(stream_rank[s] for s in order_key), plan.order)
    object.__setattr__(out, "_wait", None)  # several waits per job now: simulate's general path
    return out


def busy_union(rank: list[int], start: list[int], end: list[int], p: int) -> list[int]:
    """Per rank, the length (ns) of the union of its jobs' ``[start, end)`` intervals: a rank
    running an overlapped group (:mod:`harness.overlap`) is busy once while both jobs run."""
    out = [0] * p
    by_rank: dict[int, list[tuple[int, int]]] = {}
    for r, a, b in zip(rank, start, end):
        by_rank.setdefault(r, []).append((a, b))
    for r, spans in by_rank.items():
        total, reach = 0, None
        for a, b in sorted(spans):
            if reach is None or a >= reach:
                total += b - a
                reach = b
            elif b > reach:
                total += b - reach
                reach = b
        out[r] = total
    return out
