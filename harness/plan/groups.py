"""Overlapped job groups: a forward and a backward that a rank runs as one unit.

DualPipe (deepseek-ai/DualPipe) and PyTorch's ``ScheduleDualPipeV`` pair a forward
of one micro-batch with a backward of another (PyTorch's ``OVERLAP_F_B`` action,
written ``(0F2;3B0)OVERLAP_F_B`` in its CSV), so that a model's own
``overlapped_forward_backward`` can hide one's communication under the other's
compute. A schedule carries such pairs as overlapped job groups
(:mod:`harness.schedule.groups`); :func:`apply` makes a plan run each as one unit,
as DualPipe runs it (``dualpipev.py``, ``_forward_backward_chunk``: both receives are
committed and waited for before ``_forward_backward_compute_chunk`` runs, and both
outputs are sent after it):

* **a group starts when every member's inputs are in**: the first job, on the rank's
  compute stream, also waits for what the other members need; each further job runs
  on a sibling stream ``rank{r}/overlap`` (``overlap2``, ...) and starts with the first
  (a start dependency); the rank's next compute job waits for every member;
* **every member lasts the group's time** ``G`` (:func:`group_durations`;
  :func:`harness.model.overlap.group_ns` says how long: ``F + B`` unless the cost model
  says otherwise), so the group holds the rank from its start to its end and both
  outputs leave at its end.

``sim``, ``cpu`` and ``cuda`` run it the same way (two streams on the rank), and traces
show the two slices on sibling tracks, so slices on one track still nest. Busy time per
rank (:mod:`harness.analysis.busy`) is the union of the rank's compute intervals, so a
group counts once, ``G``; idle, the bubble, its decomposition and the critical path follow
from these times.

PyTorch's runtime starts differently: ``_PipelineScheduleRuntime`` runs an
``OVERLAP_F_B``'s sub-actions one after the other, each waiting for its own receive, so
its forward starts on its own input and its backward after the forward and its input.
The harness follows DualPipe's rule for every schedule; an imported PyTorch trace is
measured as it ran.

``options={"overlap": False}`` on DualPipeV and DualPipe lists the pairs as plain jobs
instead: the forward then the backward, each starting when its own input is in and
handing its output on at its own end (DualPipeV at p=4, m=8, F=1, B=2 ms: 51 ms, against
54 ms for the default group of ``F + B`` and 44 ms at ``overlap_ratio=0``).
"""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING, Any

from harness.errors import ScheduleError

if TYPE_CHECKING:
    from harness.plan.graph import Plan
    from harness.schedule.model import Job
from harness.model.overlap import group_ns
from harness.schedule.groups import _needs, groups_of

__all__ = ["apply", "group_durations"]


def group_durations(plan: Plan, cost: object, dur: list[int]) -> list[int]:
    """``dur`` (per job of ``plan``, ns) with every job of each overlapped group lasting the
    group's time :func:`~harness.model.overlap.group_ns` (module doc). ``dur`` itself when the
    plan has no groups.

    The cost model is asked once per group shape (its members' stages and kinds) and member
    durations, as :func:`harness.plan.timeline.durations` asks once per stage and kind: for the
    first group of each, and for the last to check that the answer does not depend on the micro-batch.

    Raises:
        ConfigError: see :func:`~harness.model.overlap.group_ns`; a group time that differs by
            micro-batch (names both groups).
    """
    layout = _group_layout(plan)
    if layout is None:
        return dur
    import numpy as np

    groups, batches = layout
    n_stages = plan.schedule.num_stages
    out = np.array(dur, np.int64)
    for which, at, shape in batches:  # the groups of one width (DualPipe's pairs: all of them), numpy over them
        rows = np.column_stack((shape, out[at]))  # per group: its shape, then its members' durations (ns)
        keys, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        last = np.zeros(len(keys), np.int64)
        last[inverse] = np.arange(len(rows))  # the last group of each key (later writes win)
        wall = np.empty(len(keys), np.int64)
        for u, (k, k_last) in enumerate(zip(first.tolist(), last.tolist())):
            durs = tuple(keys[u, 1:].tolist())
            group = groups[int(which[k])]
            wall[u] = g = group_ns(cost, group, durs, n_stages)
            if k_last != k:
                other_group = groups[int(which[k_last])]
                other = group_ns(cost, other_group, durs, n_stages)
                if other != g:
                    from harness.errors import ConfigError

                    shown = ["(" + ";".join(map(str, x)) + ")OVERLAP_F_B" for x in (other_group, group)]
                    raise ConfigError(
                        f"cost model {type(getattr(cost, 'inner', cost)).__name__}: group {shown[0]} lasts {other} ns but "
                        f"{shown[1]} lasts {g} ns; an overlapped group's time may differ by its jobs' stages, kinds and "
                        "durations, not by micro-batch"
                    )
        out[at] = wall[inverse][:, None]
    return out.tolist()  # type: ignore[no-any-return]


def _group_layout(plan: Plan) -> tuple[list[tuple[Job, ...]], list[tuple[Any, Any, Any]]] | None:
    """``plan``'s overlapped groups and, per group width, ``(which, at, shape)``: the groups' indices, their
    jobs' indices in the plan (an array of groups x width) and each group's shape (an id per tuple of its
    members' stages and kinds). Made once per plan and kept on it; ``None`` without groups."""
    cached = plan.__dict__.get("_group_layout", False)
    if cached is not False:
        return cached  # type: ignore[no-any-return]
    found = groups_of(plan.schedule)
    layout = None
    if found:
        import numpy as np

        index = {job: j for j, job in enumerate(plan.jobs)}
        groups = [tuple(group) for group in found]
        ids: dict[tuple[tuple[int, Any], ...], int] = {}
        by_width: dict[int, list[int]] = {}
        for k, group in enumerate(groups):
            by_width.setdefault(len(group), []).append(k)
        batches = []
        for members in by_width.values():
            at = np.array([[index[job] for job in groups[k]] for k in members], np.int64)
            shape = np.array([ids.setdefault(tuple((job.stage, job.kind) for job in groups[k]), len(ids)) for k in members], np.int64)
            batches.append((np.array(members, np.int64), at, shape))
        layout = (groups, batches)
    object.__setattr__(plan, "_group_layout", layout)
    return layout


def _still_ordered(np: Any, order: tuple[int, ...], cols: Any) -> bool:
    """Whether ``order`` enqueues every job after each job it waits for (ends and starts) under the
    dependencies of ``cols`` (:class:`~harness.plan.graph.PlanArrays`); streams keep their jobs' order."""
    n = len(order)
    pos = np.empty(n, np.int64)
    pos[np.asarray(order, np.int64)] = np.arange(n)
    for ptr, idx in ((cols.deps_ptr, cols.deps_idx), (cols.start_ptr, cols.start_idx)):
        waiter = np.repeat(np.arange(n), np.diff(ptr))
        if bool((pos[idx] > pos[waiter]).any()):
            return False
    return True


def apply(plan: Plan) -> Plan:
    """The plan with its schedule's overlapped groups each run as one unit (module doc).

    Returns:
        ``plan`` itself when the schedule has no groups; else a new plan whose
        group's first job also waits for every other member's dependencies (the
        group starts when all its inputs are in), whose later members sit on
        sibling streams ``rank{r}/overlap``, ``overlap2``, ... with a start
        dependency on the first job, whose next compute job of the rank waits
        for every member's end, and whose enqueue order is walked again over
        these dependencies.

    Raises:
        ScheduleError: a group with fewer than two jobs, a job not in the
            schedule, jobs on different ranks or not listed one after the other
            (only send/receive jobs and idle slots between them), a job in two
            groups, a job that needs another of its group, or a group whose
            inputs wait, through other jobs, for the group itself.
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
        kinds = [job.kind.value for job in group]
        if len(group) != 2 or kinds.count("F") != 1 or not {"B", "I", "W"} & set(kinds):
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
        for j in at[1:]:  # the group starts when every member's inputs are in (DualPipe's rule)
            for d in deps[j]:
                if d not in deps[first]:
                    deps[first].append(d)
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
    # The first members now wait for jobs that may come later in the old enqueue order: keep it where every
    # job still comes after what it waits for (DualPipeV), else walk again (DualPipe's directions).
    order: tuple[int, ...] | list[int] | None = plan.order
    if not _still_ordered(np, plan.order, columns):
        from harness.plan.fast import _fast_order

        order = _fast_order(len(jobs), columns.stream.tolist(), [tuple(d) for d in deps], [tuple(d) for d in start_deps], len(names))
    if order is None:
        raise ScheduleError(
            f"schedule {schedule.name!r}: an overlapped group waits, through other jobs, for one of its own members "
            "(its inputs can never all be in before it starts, as DualPipe starts a pair)", tuple(str(j) for g in groups for j in g))
    out = Plan(schedule, columns, tuple(names[s] for s in order_key), tuple(stream_rank[s] for s in order_key), tuple(order))
    object.__setattr__(out, "_wait", None)  # several waits per job now: simulate's general path
    return out
