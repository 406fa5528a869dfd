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

Busy time per rank (:mod:`harness.metrics`, :mod:`harness.analytics`) is the time
the rank is busy, the union of its compute jobs' intervals (:func:`busy_union`):
a group counts once, for as long as it lasts.

**How long a group lasts.** By default ``max`` of its jobs' durations. A cost model
may say otherwise (the two compete for the same SMs and memory bandwidth, so the
overlap is rarely perfect) with the optional method
``overlapped_group_ns(jobs, durations_ns, num_stages) -> int`` (:data:`GROUP_METHOD`);
:class:`~harness.cost.FixedCost` and :class:`~harness.transformer.TransformerCost`
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

import numbers
from collections.abc import Iterable
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from harness.errors import ConfigError, ScheduleError
from harness.schedule.model import Job, JobKind, Schedule

if TYPE_CHECKING:
    from harness.plan import Plan

__all__ = ["GROUP_METHOD", "OVERLAP_PARAM", "apply", "busy_union", "group_ns", "groups_of", "stretched", "with_groups"]

#: The key of a schedule's ``params`` that holds its overlapped groups.
OVERLAP_PARAM = "overlap"
#: Optional cost-model method: ``overlapped_group_ns(jobs, durations_ns, num_stages) -> int``,
#: the wall time (ns) of an overlapped group whose jobs last ``durations_ns`` on their own
#: (module doc); without it a group lasts ``max(durations_ns)``.
GROUP_METHOD = "overlapped_group_ns"


def group_ns(cost: object, jobs: tuple[Job, ...], durations_ns: tuple[int, ...], num_stages: int) -> int:
    """The wall time (ns) of an overlapped group under ``cost``: its :data:`GROUP_METHOD`, or
    ``max(durations_ns)`` without one.

    Raises:
        ConfigError: the answer is not a whole number of ns, is below the longest job
            (a group cannot end before its longest job would alone), or is not below
            :data:`~harness.cost.MAX_DURATION_NS`; names the group and the cost model.
    """
    longest = max(durations_ns, default=0)
    method = getattr(cost, GROUP_METHOD, None)
    if method is None:
        return longest
    value = method(jobs, durations_ns, num_stages)
    from harness.cost import MAX_DURATION_NS

    shown = "(" + ";".join(map(str, jobs)) + ")OVERLAP_F_B"
    model = type(getattr(cost, "inner", cost)).__name__
    if isinstance(value, bool) or (not isinstance(value, int) and not (isinstance(value, float) and value.is_integer())):
        raise ConfigError(f"cost model {model}: {GROUP_METHOD}({shown}) gave {value!r}, not a whole number of ns")
    if not longest <= value < MAX_DURATION_NS:
        raise ConfigError(
            f"cost model {model}: {GROUP_METHOD}({shown}) gave {int(value):,} ns, but the group's jobs last "
            f"{', '.join(f'{d:,}' for d in durations_ns)} ns: an overlapped group lasts at least its longest job"
            + ("" if value < MAX_DURATION_NS else " (and below 2**53 ns)")
        )
    return int(value)


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


def busy_union(rank: Any, start: Any, end: Any, p: int) -> list[int]:
    """Per rank, the length (ns) of the union of its jobs' ``[start, end)`` intervals: a rank
    running an overlapped group (:mod:`harness.overlap`) is busy once while both jobs run.

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


# --- the cost-model fields overlap_ns / overlap_ratio (FixedCost, TransformerCost) ---
def _overlap_fields(obj: Any) -> None:
    """Check ``overlap_ns`` (a duration >= 0) and ``overlap_ratio`` (in [0, 1]), at most one given."""
    if obj.overlap_ns is not None and obj.overlap_ratio is not None:
        raise ConfigError(f"cost model: give overlap_ns or overlap_ratio, not both (got {obj.overlap_ns!r} and {obj.overlap_ratio!r})")
    from harness.cost import _set_whole_ns

    if obj.overlap_ns is not None:
        _set_whole_ns(obj, "overlap_ns")  # rounded to the nearest ns, as every duration
    r = obj.overlap_ratio
    if r is not None and (isinstance(r, bool) or not isinstance(r, numbers.Real) or not 0 <= float(r) <= 1):
        raise ConfigError(f"cost model: overlap_ratio must be a number in [0, 1] (0: max(F, B), 1: F + B), got {r!r}")


def _overlap_group_ns(obj: Any, durations_ns: tuple[int, ...]) -> int:
    """An overlapped group's time from ``overlap_ns`` / ``overlap_ratio`` (:mod:`harness.overlap`)."""
    longest = max(durations_ns, default=0)
    if obj.overlap_ns is not None:
        return int(obj.overlap_ns)
    if obj.overlap_ratio is not None:
        return longest + round(obj.overlap_ratio * (sum(durations_ns) - longest))
    return longest
