"""Pure passes over schedules: add send/receive jobs, split or merge backwards.

Each pass takes a :class:`Schedule` and returns a new one; nothing is mutated.

:func:`add_communication` lowers a compute-only schedule to one with explicit
point-to-point jobs, as PyTorch's ``_add_send_recv`` does: for every edge
between stages on different ranks, a ``SEND_F``/``SEND_B`` right after the
producing job and a ``RECV_F``/``RECV_B`` right before the consuming job, in
the rank's list; an overlapped group's receives all go right before its first job, since
the group starts when every member's input is in (:mod:`harness.plan.groups`), as
PyTorch's ``_add_send_recv`` posts them before an ``OVERLAP_F_B``. Neighbours are
those within a stage's chain (:mod:`harness.schedule.chains`: DualPipe's two directions
exchange nothing where they meet). Send/receive jobs run on the rank's comm stream
(:mod:`harness.plan`): a receive starts with its send (both comm streams are
busy during the transfer) and the consumer waits for the receive's end. The
durations come from the cost model (``p2p_latency_ns``, bandwidth and
activation bytes in :mod:`harness.model.cost`).

Why this placement cannot deadlock: take a topological order of the
compute-only plan (its groups applied) and put each send right after its producer and
each receive right before its consumer (a group's first job, for a group's receives). Every comm stream then lists its jobs in the order
of that sequence, every receive comes after its send, and every consumer after
its receive, so the sequence is a topological order of the lowered graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness._gcpause import gc_paused
from harness.errors import ScheduleError
from harness.schedule.model import KIND_CODE, Job, JobKind, Schedule, _job_arrays, _JobArrays

if TYPE_CHECKING:
    pass

__all__ = ["add_communication", "comm_jobs_added", "merge_backward", "split_backward", "strip_communication"]


_F, _B, _I, _W = JobKind.F, JobKind.B, JobKind.I, JobKind.W

@gc_paused
def add_communication(schedule: Schedule) -> Schedule:
    """Insert ``SEND_*``/``RECV_*`` jobs between stages placed on different ranks.

    Stage ``k``'s forward output goes to ``k+1`` (``kSEND_Fi`` on ``k``'s rank,
    ``(k+1)RECV_Fi`` on the other); the gradient of a backward (``B`` or ``I``)
    of stage ``k`` goes to ``k-1`` (``kSEND_Bi``, ``(k-1)RECV_Bi``). Adjacent stages
    on the same rank (the V placement's turn) exchange nothing. Idle slots are
    kept. Linear in the number of jobs.

    Returns:
        A new schedule named like the input, with ``params["comm"] = True``.

    Raises:
        ScheduleError: the schedule already has send/receive jobs.
        ConfigError: the jobs with the send/receive jobs added would be more
            than :data:`~harness.schedule.registry.MAX_JOBS` (checked before any
            is added; the message states the memory they would need).
        ResourceError: memory ran out all the same (names the jobs and memory).
    """
    from harness.schedule.registry import MAX_JOBS, memory_guard, too_many_jobs

    compute = schedule.num_jobs
    total = compute + comm_jobs_added(schedule)
    if total > MAX_JOBS:
        raise too_many_jobs(total, f"schedule {schedule.name!r} ({compute:,} compute jobs) with its send/receive jobs added")
    with memory_guard(total, f"schedule {schedule.name!r}: adding send/receive jobs"):
        return _add_communication(schedule)

def comm_jobs_added(schedule: Schedule) -> int:
    """How many send/receive jobs :func:`add_communication` adds to ``schedule``: per
    ``F``, ``B`` or ``I`` job, one for each neighbouring stage on another rank. Counted
    without building them (numpy over the schedule's job columns where it has them)."""
    from harness.schedule.chains import links

    rank_of = schedule.stage_to_rank
    n = len(rank_of)
    has_prev, has_next = links(schedule)
    away = [int(has_prev[k] and rank_of[k - 1] != rank_of[k]) + int(has_next[k] and rank_of[k + 1] != rank_of[k]) for k in range(n)]
    arrays = _job_arrays(schedule)
    if arrays is None:
        return sum(away[j.stage] for jobs in schedule.ranks for j in jobs
                   if j is not None and j.kind in (_F, _B, _I) and 0 <= j.stage < n)
    import numpy as np

    moved = (arrays.kind == _CF) | (arrays.kind == _CB) | (arrays.kind == _CI)
    stages = arrays.stage[moved]
    stages = stages[(stages >= 0) & (stages < n)]
    return int(np.bincount(stages, minlength=n).astype(np.int64) @ np.array(away, np.int64))

def _add_communication(schedule: Schedule) -> Schedule:
    """:func:`add_communication` past its size check."""
    fast = _add_communication_fast(schedule)
    rows = _add_communication_loop(schedule) if fast is None else ()
    params = dict(schedule.params)
    params["comm"] = True
    if fast is None:
        return Schedule(schedule.name, schedule.num_microbatches, schedule.stage_to_rank, rows, params)
    # The new jobs take the stage, and so the rank, of the job they sit beside.
    return Schedule._from_arrays(schedule.name, schedule.num_microbatches, schedule.stage_to_rank, fast, params)

def _add_communication_loop(schedule: Schedule) -> tuple[tuple[Job | None, ...], ...]:
    """:func:`add_communication`'s rows, job by job; raises its error."""
    from harness.schedule.chains import links
    from harness.schedule.groups import groups_of

    rank_of = schedule.stage_to_rank
    has_prev, has_next = links(schedule)
    F, B, I = _F, _B, _I  # noqa: N806
    SF, RF, SB, RB = JobKind.SEND_F, JobKind.RECV_F, JobKind.SEND_B, JobKind.RECV_B  # noqa: N806
    # an overlapped group's receives go before its first job (it waits for them all); none before the others
    grouped = {g[0]: tuple(g) for g in groups_of(schedule) if g}
    later_members = {job for g in grouped.values() for job in g[1:]}

    def receive(job: Job, rank: int) -> Job | None:
        k, kind, mb = job
        if kind is F and has_prev[k] and rank_of[k - 1] != rank:
            return Job(k, RF, mb)
        if (kind is B or kind is I) and has_next[k] and rank_of[k + 1] != rank:
            return Job(k, RB, mb)
        return None

    out: list[list[Job | None]] = []
    for rank, jobs in enumerate(schedule.ranks):
        row: list[Job | None] = []
        append = row.append
        for job in jobs:
            if job is None:
                append(None)
                continue
            k, kind, mb = job
            if kind.is_comm:
                raise ScheduleError(
                    f"schedule {schedule.name!r} already has communication jobs ({job} on rank {rank}); "
                    "add_communication takes a compute-only schedule",
                    (str(job),),
                )
            if job not in later_members:  # a group's receives all come before its first job
                for member in grouped.get(job, (job,)):
                    recv = receive(member, rank)
                    if recv is not None:
                        append(recv)
            append(job)
            if kind is F and has_next[k] and rank_of[k + 1] != rank:
                append(Job(k, SF, mb))
            elif (kind is B or kind is I) and has_prev[k] and rank_of[k - 1] != rank:
                append(Job(k, SB, mb))
        out.append(row)
    return tuple(tuple(r) for r in out)

_SF, _RF, _SB, _RB = JobKind.SEND_F, JobKind.RECV_F, JobKind.SEND_B, JobKind.RECV_B

_CODE = KIND_CODE

_CF, _CB, _CI, _CSF, _CRB = _CODE[_F], _CODE[_B], _CODE[_I], _CODE[_SF], _CODE[_RB]

def _add_communication_fast(schedule: Schedule) -> _JobArrays | None:
    """:func:`add_communication`'s jobs as arrays, computed with numpy for
    schedules without idle slots or communication jobs; ``None`` for the others
    (the job-by-job loop handles them, and raises the error)."""
    import numpy as np

    arrays = _job_arrays(schedule)
    if arrays is None or not sum(arrays.counts):
        return None
    if schedule._lazy_arrays() is None and sum(arrays.counts) != sum(map(len, schedule.ranks)):
        return None  # idle slots
    stage, kc, mb, lens = arrays
    from harness.schedule.groups import OVERLAP_PARAM

    if bool(((kc >= _CSF) & (kc <= _CRB)).any()) or schedule.params.get(OVERLAP_PARAM):
        return None  # (overlapped groups: their receives go before the group, job by job)
    n = len(stage)
    st_rank = np.array(schedule.stage_to_rank, np.int64)
    n_stages = len(st_rank)
    # Per stage: whether the previous / next stage of its chain sits on another rank.
    from harness.schedule.chains import links

    has_prev, has_next = (np.array(x, bool) for x in links(schedule))
    prev_away = np.zeros(n_stages, bool)
    next_away = np.zeros(n_stages, bool)
    prev_away[1:] = st_rank[:-1] != st_rank[1:]
    next_away[:-1] = st_rank[1:] != st_rank[:-1]
    prev_away &= has_prev
    next_away &= has_next
    fwd = kc == _CF
    bwd = (kc == _CB) | (kc == _CI)
    before = np.where(fwd, prev_away[stage], bwd & next_away[stage])  # RECV_F / RECV_B
    after = np.where(fwd, next_away[stage], bwd & prev_away[stage])  # SEND_F / SEND_B
    # Output slot of each job: jobs before it, receives up to it, sends before it.
    slot = np.arange(n) + np.cumsum(before) + np.cumsum(after) - after
    grown = np.zeros(n + 1, np.int64)
    np.cumsum(1 + before + after, out=grown[1:])
    row_end = grown[np.cumsum(lens)]
    total = int(row_end[-1])
    out_stage = np.empty(total, np.int64)
    out_kind = np.empty(total, np.int64)
    out_mb = np.empty(total, np.int64)
    out_stage[slot] = stage
    out_kind[slot] = kc
    out_mb[slot] = mb
    for mask, kind, shift in (
        (before & fwd, _RF, -1),
        (before & ~fwd, _RB, -1),
        (after & fwd, _SF, 1),
        (after & ~fwd, _SB, 1),
    ):
        at = np.flatnonzero(mask)
        to = slot[at] + shift
        out_stage[to] = stage[at]
        out_kind[to] = _CODE[kind]
        out_mb[to] = mb[at]
    return _JobArrays(out_stage, out_kind, out_mb, np.diff(row_end, prepend=0).tolist())

def strip_communication(schedule: Schedule) -> Schedule:
    """The schedule without its send/receive jobs (their slots are dropped, not left idle), and
    without the parameters that described them (``comm``, ``comm_placement``, ``comm_model``)."""
    ranks = tuple(tuple(j for j in jobs if j is None or not j.kind.is_comm) for jobs in schedule.ranks)
    params = {k: v for k, v in schedule.params.items() if k not in ("comm", "comm_placement", "comm_model")}
    return Schedule(schedule.name, schedule.num_microbatches, schedule.stage_to_rank, ranks, params)

def split_backward(schedule: Schedule) -> Schedule:
    """Replace every full backward ``B`` by ``I`` immediately followed by ``W``
    (the zero-bubble split, arXiv:2401.10241 §2). Send/receive jobs are kept."""
    ranks = []
    for jobs in schedule.ranks:
        row: list[Job | None] = []
        for job in jobs:
            if job is not None and job.kind is _B:
                row.append(Job(job.stage, _I, job.microbatch))
                row.append(Job(job.stage, _W, job.microbatch))
            else:
                row.append(job)
        ranks.append(tuple(row))
    return Schedule(schedule.name, schedule.num_microbatches, schedule.stage_to_rank, tuple(ranks), dict(schedule.params))

def merge_backward(schedule: Schedule) -> Schedule:
    """Merge an ``I`` with the ``W`` of the same stage and micro-batch into one ``B``
    when the ``W`` is the rank's next compute job (idle slots and send/receive jobs
    in between are allowed and kept), as PyTorch's ``_merge_bw``. Other ``I``/``W``
    stay split. Inverse of :func:`split_backward`."""
    ranks = []
    for jobs in schedule.ranks:
        row: list[Job | None] = list(jobs)
        drop: set[int] = set()
        pending: int | None = None  # index of the last compute I
        for idx, job in enumerate(row):
            if job is None or job.kind.is_comm:
                continue
            if job.kind is _W and pending is not None:
                i_job = row[pending]
                assert i_job is not None
                if i_job.stage == job.stage and i_job.microbatch == job.microbatch:
                    row[pending] = Job(job.stage, _B, job.microbatch)
                    drop.add(idx)
                    pending = None
                    continue
            pending = idx if job.kind is _I else None
        ranks.append(tuple(j for idx, j in enumerate(row) if idx not in drop))
    return Schedule(schedule.name, schedule.num_microbatches, schedule.stage_to_rank, tuple(ranks), dict(schedule.params))
