""":func:`~harness.plan.build.build_plan`'s reference path: the plan built job by job over
``Job`` keys, with every check of :mod:`harness.plan` and the detailed error.

Slower than the fast path (:mod:`harness.plan.fast`), which hands a schedule
over whenever something looks wrong there; this path then names the jobs at
fault and draws the step x rank grid with them marked. The rules checked are
those of :mod:`harness.plan`'s module docstring.
"""

from __future__ import annotations

from collections import deque
from itertools import chain

from harness.errors import ScheduleError
from harness.plan.graph import Plan, PlanArrays, _csr
from harness.schedule.model import Job, JobKind, Schedule, _kind_codes
from harness.schedule.validate import check_counts, check_order

_F, _B, _I, _W = JobKind.F, JobKind.B, JobKind.I, JobKind.W
_SF, _RF, _SB, _RB, _OPT = JobKind.SEND_F, JobKind.RECV_F, JobKind.SEND_B, JobKind.RECV_B, JobKind.OPT


def _assign_streams(
    schedule: Schedule, rank_of: list[int], stage: list[int], is_comm: list[bool], towards_next: list[bool]
) -> tuple[list[int], tuple[str, ...], tuple[int, ...]]:
    """Streams: one compute stream per rank, and one comm stream per pair of
    ranks that exchange data (as PyTorch's NCCL process groups give every
    point-to-point pair its own communicator and stream), so transfers with one
    neighbour never queue behind transfers with another.

    Args:
        rank_of, stage: per job, its rank and stage.
        is_comm: per job, whether it is a send/receive.
        towards_next: per comm job, whether its peer holds the next stage
            (``SEND_F``, ``RECV_B``) rather than the previous one.

    Returns:
        Per job its stream index; per stream its name (``"rank{r}/compute"`` or
        ``"rank{r}/comm↔{q}"``) and rank. Streams are ordered by rank,
        compute first.
    """
    st_rank = schedule.stage_to_rank
    n_stages = len(st_rank)
    p1 = schedule.num_ranks + 1
    keys = []
    for r, k, comm, nxt in zip(rank_of, stage, is_comm, towards_next):
        if comm:
            nb = k + 1 if nxt else k - 1
            keys.append(r * p1 + 1 + (st_rank[nb] if 0 <= nb < n_stages else r))
        else:
            keys.append(r * p1)
    used = sorted(set(keys))
    index = {key: i for i, key in enumerate(used)}
    names = tuple(
        f"rank{key // p1}/compute" if key % p1 == 0 else f"rank{key // p1}/comm↔{key % p1 - 1}" for key in used
    )
    return [index[key] for key in keys], names, tuple(key // p1 for key in used)


def _build_plan_checked(schedule: Schedule) -> Plan:
    """Reference implementation of :func:`build_plan` over ``Job`` keys; slower,
    used to produce the detailed error when the fast path finds a problem.

    Raises:
        ScheduleError: wrong counts (see :func:`check_counts`), a send/receive
            whose peer stage does not exist or shares its rank, a job whose
            producer is missing, a job listed before a job it needs on its own
            rank, or a deadlock - a job that can never become ready; the message
            names the jobs and draws the grid with them marked.
    """
    check_counts(schedule)
    check_order(schedule)
    jobs: list[Job] = []
    rank_of: list[int] = []
    step_of: list[int] = []
    index: dict[Job, int] = {}
    for rank, step, job in schedule.jobs():
        if job in index:  # comm jobs are not covered by check_counts
            r0, s0 = rank_of[index[job]], step_of[index[job]]
            raise ScheduleError(
                f"schedule {schedule.name!r}: job {job} is listed twice (rank {r0} step {s0}, rank {rank} step {step})\n"
                + schedule.format_grid({(rank, step): f"{job} listed twice"}),
                (str(job),),
            )
        index[job] = len(jobs)
        jobs.append(job)
        rank_of.append(rank)
        step_of.append(step)
    _check_peers(schedule, jobs, rank_of, step_of)
    n = len(jobs)
    from harness.schedule.chains import links

    has_prev, has_next = links(schedule)  # the neighbour stages within each chain (harness.schedule.chains)
    stage_rank = schedule.stage_to_rank
    stream_of, stream_names, stream_rank = _assign_streams(
        schedule, rank_of, [j.stage for j in jobs], [j.kind.is_comm for j in jobs],
        [j.kind in (_SF, _RB) for j in jobs],
    )
    chunk_of = [schedule.chunk_of(job.stage) for job in jobs]
    get = index.get

    def backward_of(stage: int, mb: int) -> int | None:
        b = get(Job(stage, _I, mb))
        return b if b is not None else get(Job(stage, _B, mb))

    has_comm = any(job.kind.is_comm for job in jobs)

    def producer(j: int, stage: int, kind: JobKind, mb: int, recv: JobKind) -> int | None:
        """The job whose output job ``j`` consumes from neighbour ``stage``, or None
        (and a note in ``missing``) when it is not scheduled."""
        r = get(Job(jobs[j].stage, recv, mb))
        if r is not None:
            return r
        if has_comm and stage_rank[stage] != stage_rank[jobs[j].stage]:
            missing.append((j, f"{jobs[j].stage}{recv.value}{mb}"))
            return None
        found = get(Job(stage, kind, mb)) if kind is _F else backward_of(stage, mb)
        if found is None:
            missing.append((j, f"{stage}F{mb}" if kind is _F else f"{stage}B{mb} (or {stage}I{mb})"))
        return found

    deps: list[tuple[int, ...]] = [()] * n
    start_deps: list[tuple[int, ...]] = [()] * n
    missing: list[tuple[int, str]] = []
    opt_deps: dict[int, list[int]] = {}
    for j, (k, kind, mb_opt) in enumerate(jobs):
        mb = -1 if mb_opt is None else mb_opt  # only OPT has none, and it reads no micro-batch
        d: list[int | None] = []
        if kind is _F:
            if has_prev[k]:
                d.append(producer(j, k - 1, _F, mb, _RF))
        elif kind is _B or kind is _I:
            d.append(get(Job(k, _F, mb)))
            if has_next[k]:
                d.append(producer(j, k + 1, _B, mb, _RB))
            if kind is _B:
                opt_deps.setdefault(k, []).append(j)
        elif kind is _W:
            d.append(get(Job(k, _I, mb)))
            opt_deps.setdefault(k, []).append(j)
        elif kind is _SF:
            f = get(Job(k, _F, mb))
            if f is None:
                missing.append((j, f"{k}F{mb}"))
            d.append(f)
        elif kind is _SB:
            b = backward_of(k, mb)
            if b is None:
                missing.append((j, f"{k}B{mb} (or {k}I{mb})"))
            d.append(b)
        elif kind is _RF or kind is _RB:
            src = Job(k - 1, _SF, mb) if kind is _RF else Job(k + 1, _SB, mb)
            s = get(src)
            if s is None:
                missing.append((j, str(src)))
            else:
                start_deps[j] = (s,)
        deps[j] = tuple(x for x in d if x is not None)
    for j, job in enumerate(jobs):
        if job.kind is _OPT:
            deps[j] = tuple(opt_deps.get(job.stage, ()))
    if missing:
        marks = {(rank_of[j], step_of[j]): f"{jobs[j]} needs {need}, which is not in the schedule" for j, need in missing[:12]}
        raise ScheduleError(
            f"schedule {schedule.name!r}: {len(missing)} job(s) depend on jobs that are not scheduled\n" + schedule.format_grid(marks),
            tuple(str(jobs[j]) for j, _ in missing),
        )
    _check_listed_first(schedule, jobs, rank_of, step_of, deps)
    # Same-stream dependencies stay in the graph for validation; the plan keeps
    # only cross-stream ones, since stream order already covers the rest.
    order = _readiness_order(schedule, jobs, rank_of, step_of, stream_of, deps, start_deps)
    import numpy as np

    cross = tuple(tuple(d for d in ds if stream_of[d] != stream_of[j]) for j, ds in enumerate(deps))
    deps_ptr, deps_idx = _csr(cross)
    start_ptr, start_idx = _csr(start_deps)
    arrays = PlanArrays(
        stage=np.array([job.stage for job in jobs], np.int64),
        kind=_kind_codes(jobs),
        microbatch=np.array([-1 if job.microbatch is None else job.microbatch for job in jobs], np.int64),
        rank=np.array(rank_of, np.int64),
        step=np.array(step_of, np.int64),
        stream=np.array(stream_of, np.int64),
        chunk=np.array(chunk_of, np.int64),
        deps_ptr=deps_ptr,
        deps_idx=deps_idx,
        start_ptr=start_ptr,
        start_idx=start_idx,
    )
    plan = Plan(schedule, arrays, stream_names, stream_rank, order)
    plan.__dict__.update(jobs=tuple(jobs), deps=cross, start_deps=tuple(start_deps))
    return plan


_MAX_MARKS = 12
"""At most this many jobs are marked in an error's grid (all are named in ``ScheduleError.jobs``)."""


def _check_peers(schedule: Schedule, jobs: list[Job], rank_of: list[int], step_of: list[int]) -> None:
    """Refuse send/receive jobs whose peer stage does not exist or shares their rank.

    ``SEND_F(k,i)`` and ``RECV_B(k,i)`` talk to stage ``k+1``, ``SEND_B(k,i)`` and
    ``RECV_F(k,i)`` to stage ``k-1``; that stage must be in the pipeline, in the stage's
    chain (:mod:`harness.schedule.chains`), and on another rank (adjacent stages on one rank, as at a V placement's turn,
    exchange nothing: :func:`~harness.schedule.passes.add_communication` inserts
    no job there).

    Raises:
        ScheduleError: names each such job and its peer stage, marks them in the grid.
    """
    from harness.schedule.chains import links

    last = schedule.num_stages - 1
    st_rank = schedule.stage_to_rank
    has_prev, has_next = links(schedule)
    problems: list[tuple[int, str]] = []
    for j, job in enumerate(jobs):
        kind = job.kind
        if not kind.is_comm:
            continue
        k = job.stage
        nb = k + 1 if kind is _SF or kind is _RB else k - 1
        verb = "sends to" if kind is _SF or kind is _SB else "receives from"
        if nb < 0:
            why = "the pipeline's first stage is 0"
        elif nb > last:
            why = f"the pipeline's last stage is {last}"
        elif not (has_next[k] if nb > k else has_prev[k]):
            why = f"stage {k} {'ends' if nb > k else 'starts'} its chain (schedule.params['chains'])"
        elif st_rank[nb] == rank_of[j]:
            why = f"stages {min(k, nb)} and {max(k, nb)} share rank {rank_of[j]}; send/receive jobs connect stages on different ranks"
        else:
            continue
        problems.append((j, f"{job} {verb} stage {nb}, but {why}"))
    if problems:
        marks = {(rank_of[j], step_of[j]): note for j, note in problems[:_MAX_MARKS]}
        raise ScheduleError(
            f"schedule {schedule.name!r} is invalid: {len(problems)} send/receive job(s) with no peer stage on another rank: "
            f"{problems[0][1]}\n" + schedule.format_grid(marks),
            tuple(str(jobs[j]) for j, _ in problems),
        )


def _check_listed_first(
    schedule: Schedule, jobs: list[Job], rank_of: list[int], step_of: list[int], deps: list[tuple[int, ...]]
) -> None:
    """Refuse a job listed before a job it needs on its own rank, whatever the
    streams: a rank issues its jobs in list order (PyTorch's runtime refuses to
    compute before receiving the input, or to send before computing the
    output), so a consumer comes after its receive and a send after the job
    whose output it sends. ``jobs`` are rank by rank in listed order, so ``d``
    is listed later on ``j``'s rank exactly when ``d > j`` on the same rank.
    (Start dependencies, a receive's send, are always on another rank.)

    Raises:
        ScheduleError: names each such pair, marks both jobs in the grid.
    """
    late = [(j, d) for j, ds in enumerate(deps) for d in ds if d > j and rank_of[d] == rank_of[j]]
    if not late:
        return
    notes = [
        f"{jobs[j]} is listed before {jobs[d]}, which it needs, on rank {rank_of[j]} (step {step_of[j]} before step {step_of[d]})"
        for j, d in late
    ]
    marks: dict[tuple[int, int], str] = {}
    for (j, d), note in zip(late[:_MAX_MARKS], notes):
        marks.setdefault((rank_of[j], step_of[j]), note)
        marks.setdefault((rank_of[d], step_of[d]), f"{jobs[d]} must come before {jobs[j]}")
    raise ScheduleError(
        f"schedule {schedule.name!r} is invalid: {len(late)} job(s) out of order on their rank: {notes[0]}\n"
        "(each rank issues its jobs in list order, whatever their stream, so a job comes after the jobs it needs on its rank: "
        "a receive before the job that uses it, a send after the job whose output it sends)\n" + schedule.format_grid(marks),
        tuple(chain.from_iterable((str(jobs[j]), str(jobs[d])) for j, d in late)),
    )


def _readiness_order(
    schedule: Schedule,
    jobs: list[Job],
    rank_of: list[int],
    step_of: list[int],
    stream_of: list[int],
    deps: list[tuple[int, ...]],
    start_deps: list[tuple[int, ...]],
) -> tuple[int, ...]:
    """Kahn's algorithm where each stream only offers its head job.

    A job is ready when it heads its stream and all its dependencies are done
    (start dependencies: started, which for ordering purposes is the same as
    being enqueued). Returns the order in which jobs became ready.
    """
    n = len(jobs)
    queues: dict[int, deque[int]] = {}
    for j in range(n):
        queues.setdefault(stream_of[j], deque()).append(j)
    pending = [len(deps[j]) + len(start_deps[j]) for j in range(n)]
    consumers: list[list[int]] = [[] for _ in range(n)]
    for j in range(n):
        for d in deps[j]:
            consumers[d].append(j)
        for d in start_deps[j]:
            consumers[d].append(j)
    order: list[int] = []
    ready = deque(s for s, q in queues.items() if pending[q[0]] == 0)
    while ready:
        s = ready.popleft()
        q = queues[s]
        while q and pending[q[0]] == 0:
            j = q.popleft()
            order.append(j)
            for c in consumers[j]:
                pending[c] -= 1
                if pending[c] == 0:
                    cs = stream_of[c]
                    if queues[cs][0] == c and cs != s:
                        ready.append(cs)
    if len(order) == n:
        return tuple(order)
    # Deadlock: report each stalled stream head and what it waits for.
    done = bytearray(n)
    for j in order:
        done[j] = 1
    position = {j: i for q in queues.values() for i, j in enumerate(q)}
    marks: dict[tuple[int, int], str] = {}
    names: list[str] = []
    for s in sorted(queues):
        q = queues[s]
        if not q:
            continue
        head = q[0]
        waits = [d for d in deps[head] + start_deps[head] if not done[d]]
        why = []
        for d in waits:
            if stream_of[d] == s and d in position:
                why.append(f"{jobs[d]} (listed after it on rank {rank_of[d]})")
            else:
                why.append(f"{jobs[d]} (rank {rank_of[d]}, step {step_of[d]})")
        marks[(rank_of[head], step_of[head])] = f"{jobs[head]} waits for " + " and ".join(why)
        names.append(str(jobs[head]))
    raise ScheduleError(
        f"schedule {schedule.name!r} deadlocks: {n - len(order)} of {n} jobs can never run; "
        f"stalled at {', '.join(names)}\n" + schedule.format_grid(marks),
        tuple(names),
    )


# --- fast path ------------------------------------------------------------------
