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
  group. The group therefore lasts ``max(F, B)`` unless the cost model says
  otherwise (below), the duration Victarry/PP-Schedule-Visualization gives an
  overlapped pair by default (``overlapped_op_time = max(...)``); ``sim``, ``cpu``
  and ``cuda`` run it the same way (two streams on the rank), and traces show the
  two slices on sibling tracks, so slices on one track still nest.

Busy time per rank (:mod:`harness.analysis.metrics`, :mod:`harness.analysis.analytic`) is the time
the rank is busy, the union of its compute jobs' intervals (:func:`busy_union`):
a group counts once, for as long as it lasts.

**How long a group lasts.** By default ``max`` of its jobs' durations. A cost model
may say otherwise (the two compete for the same SMs and memory bandwidth, so the
overlap is rarely perfect) with the optional method
``overlapped_group_ns(jobs, durations_ns, num_stages) -> int`` (:data:`GROUP_METHOD`);
:class:`~harness.model.cost.FixedCost` and :class:`~harness.model.transformer.TransformerCost`
answer from two fields, at most one of them set:

* ``overlap_ns``: every group lasts this many ns;
* ``overlap_ratio`` ``r`` in ``[0, 1]``: the share of the shorter jobs' time that is not
  hidden, so a group lasts ``max(d) + r (sum(d) - max(d))``: ``r = 0`` is ``max(F, B)``
  (perfect overlap, the default), ``r = 1`` is ``F + B`` (none). This parametrization
  is the harness's own (DualPipe's README writes the pair's time as one measured
  figure, "F&B").

A group of ``G`` ns is run by stretching its jobs by the same factor ``G / max(d)``
(:func:`stretched`; the longest lasts exactly ``G``, the others
``round(d G / max(d))``): both slow down as they share the device, both slices show in
the trace, and the rank's next compute job waits for the group's end. The same
durations go to ``sim``, the analytic timeline, ``cpu`` and ``cuda``.

So ``r`` says how long the *group* lasts, not that ``r = 1`` is the same as running its
jobs one after the other: the stretched forward hands its output on at ``F G / max(d)``
after the group starts, later than the ``F`` of back-to-back execution, and a backward
that waits for its input starts later than the forward and still lasts its stretched
time. DualPipeV at p=4, m=8, F=1, B=2 ms takes 54 ms at ``r = 1`` against 51 ms with
``overlap=False``; to model no overlap, use the schedule's ``overlap=False``. The step
falls monotonically as ``r`` falls to 0 (44 ms there).
"""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING

from harness.errors import ScheduleError

if TYPE_CHECKING:
    from harness.plan.graph import Plan
from harness.model.overlap import GROUP_METHOD, group_ns
from harness.schedule.groups import _needs, groups_of

__all__ = ["apply", "stretched"]


def stretched(plan: Plan, cost: object, dur: list[int]) -> list[int]:
    """``dur`` (per job of ``plan``, ns) with each overlapped group's jobs stretched so the group
    lasts :func:`group_ns`: every job of a group by the factor ``G / max(d)``, the longest to
    exactly ``G`` (module doc). ``dur`` itself when the plan has no groups or no group changes.

    Raises:
        ConfigError: see :func:`group_ns`.
    """
    groups = groups_of(plan.schedule)
    if not groups or getattr(cost, GROUP_METHOD, None) is None:
        return dur
    index = {job: j for j, job in enumerate(plan.jobs)}
    n_stages = plan.schedule.num_stages
    out = dur
    for group in groups:
        at = [index[job] for job in group]
        ds = tuple(dur[j] for j in at)
        longest = max(ds)
        g = group_ns(cost, tuple(group), ds, n_stages)
        if g == longest:
            continue
        if out is dur:
            out = list(dur)
        first_longest = ds.index(longest)
        for k, j in enumerate(at):
            if k == first_longest:
                out[j] = g
            elif longest:
                out[j] = (ds[k] * g + longest // 2) // longest
    return out

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

    from harness.plan.graph import Plan, PlanArrays, _csr

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
        kinds = sorted(job.kind.value for job in group)
        if len(group) != 2 or kinds[1] != "F" or kinds[0] not in ("B", "I", "W"):
            # PyTorch's OVERLAP_F_B pairs one forward with one backward (DualPipe's F&B chunk)
            raise ScheduleError(f"schedule {schedule.name!r}: overlapped group {shown} must pair one forward with one backward "
                                "(F with B, I or W), as PyTorch's OVERLAP_F_B does", tuple(map(str, group)))
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
