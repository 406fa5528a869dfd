"""From a schedule to a validated dependency graph and an enqueue order.

Dependencies (Narayanan et al., SC'21, §2.2; PyTorch pipelining's
``_validate_schedule``), for stage ``k`` and micro-batch ``i``:

* ``F(k,i)`` needs ``F(k-1,i)`` - or, in a schedule with communication jobs,
  ``RECV_F(k,i)`` when stage ``k-1`` sits on another rank;
* a backward ``B(k,i)``/``I(k,i)`` needs ``F(k,i)`` and the backward of
  ``(k+1,i)`` (``B`` or ``I``) - or ``RECV_B(k,i)``;
* ``W(k,i)`` needs ``I(k,i)``; ``OPT(k)`` needs every ``B``/``W`` of stage ``k``;
* ``SEND_F(k,i)`` needs ``F(k,i)``; ``SEND_B(k,i)`` needs the backward of ``(k,i)``;
  ``RECV_F(k,i)`` starts with ``SEND_F(k-1,i)`` and ``RECV_B(k,i)`` with
  ``SEND_B(k+1,i)`` (a transfer occupies both comm streams at once, like an
  NCCL send/receive pair): these are *start* dependencies;
* jobs of one stream run in their listed order. Each rank has a compute stream
  and, when the schedule has send/receive jobs, a comm stream.

:func:`build_plan` checks counts, builds the graph and simulates readiness
(Kahn's algorithm driven stream by stream) to find an enqueue order that is a
topological order - which CUDA's "wait on the latest record" semantics need -
or to report a deadlock with the step x rank grid. Everything is linear in the
number of jobs.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from harness.errors import ScheduleError
from harness.schedule.model import Job, JobKind, Schedule
from harness.schedule.validate import check_counts, check_order

__all__ = ["Plan", "build_plan"]

_F, _B, _I, _W = JobKind.F, JobKind.B, JobKind.I, JobKind.W
_SF, _RF, _SB, _RB, _OPT = JobKind.SEND_F, JobKind.RECV_F, JobKind.SEND_B, JobKind.RECV_B, JobKind.OPT


@dataclass(frozen=True, eq=False)
class Plan:
    """A validated schedule as a dependency graph over flat per-job arrays.

    Job ``j`` (``0 <= j < len(jobs)``) is ``jobs[j]`` on rank ``rank[j]``, at grid
    step ``step[j]`` of that rank's list, on stream ``stream[j]``.

    Attributes:
        schedule: the schedule this plan was built from.
        jobs: every non-idle job, rank by rank in listed order.
        rank, step, stream, chunk: per-job integers.
        stream_names: per stream, ``"rank{r}/compute"`` or ``"rank{r}/comm↔{q}"``
            (one comm stream per pair of ranks ``r``, ``q`` that exchange data).
        stream_rank: per stream, its rank.
        deps: per job, the jobs whose *end* it waits for (data dependencies,
            excluding the previous job on its own stream).
        start_deps: per job, the jobs whose *start* it waits for (a receive
            waits for its send to begin).
        order: the enqueue order, a topological order of the graph including
            stream order.
    """

    schedule: Schedule
    jobs: tuple[Job, ...]
    rank: tuple[int, ...]
    step: tuple[int, ...]
    stream: tuple[int, ...]
    chunk: tuple[int, ...]
    stream_names: tuple[str, ...]
    deps: tuple[tuple[int, ...], ...]
    start_deps: tuple[tuple[int, ...], ...]
    order: tuple[int, ...]
    stream_rank: tuple[int, ...] = ()

    @property
    def num_jobs(self) -> int:
        return len(self.jobs)

    def streams_used(self) -> list[int]:
        """Indices of streams that carry at least one job, ascending."""
        return sorted(set(self.stream))


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
        ScheduleError: wrong counts (see :func:`check_counts`), a job whose
            producer is missing, or a deadlock - a job that can never become
            ready; the message names the jobs and draws the grid with them marked.
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
    n = len(jobs)
    last_stage = schedule.num_stages - 1
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
            if k > 0:
                d.append(producer(j, k - 1, _F, mb, _RF))
        elif kind is _B or kind is _I:
            d.append(get(Job(k, _F, mb)))
            if k < last_stage:
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
    # Same-stream dependencies stay in the graph for validation; the plan keeps
    # only cross-stream ones, since stream order already covers the rest.
    order = _readiness_order(schedule, jobs, rank_of, step_of, stream_of, deps, start_deps)
    return Plan(
        schedule=schedule,
        jobs=tuple(jobs),
        rank=tuple(rank_of),
        step=tuple(step_of),
        stream=tuple(stream_of),
        chunk=tuple(chunk_of),
        stream_names=stream_names,
        deps=tuple(tuple(d for d in ds if stream_of[d] != stream_of[j]) for j, ds in enumerate(deps)),
        start_deps=tuple(start_deps),
        order=order,
        stream_rank=stream_rank,
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
# Kind codes follow JobKind's declaration order; ids avoid Enum.__hash__ (a
# Python-level call) on the hot path.
_KINDS = tuple(JobKind)
_CODE = {id(k): i for i, k in enumerate(_KINDS)}
_CF, _CB, _CI, _CW = _CODE[id(_F)], _CODE[id(_B)], _CODE[id(_I)], _CODE[id(_W)]
_CSF, _CRF, _CSB, _CRB, _COPT = _CODE[id(_SF)], _CODE[id(_RF)], _CODE[id(_SB)], _CODE[id(_RB)], _CODE[id(_OPT)]


def build_plan(schedule: Schedule) -> Plan:
    """Validate ``schedule`` and turn it into a :class:`Plan`.

    Checks, in order: counts (every stage has one forward and one complete
    backward per micro-batch, nothing twice, micro-batches in range), order on
    each rank (``F`` before its ``I``/``B``, ``I`` before its ``W``), every
    dependency scheduled (including the receive a cross-rank consumer needs in
    a schedule with communication jobs), and no deadlock (readiness
    simulation). Linear in the number of jobs: jobs are keyed by integers
    ``(kind, stage, micro-batch)`` in one flat table.

    Raises:
        ScheduleError: the first problem found; the message names the jobs and
            draws the step x rank grid with them marked.
    """
    ranks = schedule.ranks
    m = schedule.num_microbatches
    n_stages = schedule.num_stages
    m1 = m + 1
    width = n_stages * m1  # one block of keys per kind
    code = _CODE
    jobs: list[Job] = []
    rank_of: list[int] = []
    step_of: list[int] = []
    for r, row in enumerate(ranks):
        steps = [s for s, job in enumerate(row) if job is not None]
        if len(steps) == len(row):
            jobs.extend(row)  # type: ignore[arg-type]
        else:
            jobs.extend(row[s] for s in steps)  # type: ignore[misc]
        step_of.extend(steps)
        rank_of.extend([r] * len(steps))
    n = len(jobs)
    stage = [j[0] for j in jobs]
    kc = [code[id(j[1])] for j in jobs]
    mbs = [j[2] for j in jobs]
    mb_max = max((b for b in mbs if b is not None), default=0)
    if m < 1 or mb_max >= m or min((b for b in mbs if b is not None), default=0) < 0:
        return _build_plan_checked(schedule)
    mb = [m if b is None else b for b in mbs]
    keys = [k * width + s * m1 + b for k, s, b in zip(kc, stage, mb)]
    pos = [-1] * (len(_KINDS) * width)
    for j, key in enumerate(keys):
        pos[key] = j
    if len(set(keys)) != n:
        return _build_plan_checked(schedule)
    # Counts: per stage, F for every micro-batch and B xor (I and W).
    for s in range(n_stages):
        lo = s * m1
        hi = lo + m
        f_at = pos[_CF * width + lo : _CF * width + hi]
        b_at = pos[_CB * width + lo : _CB * width + hi]
        i_at = pos[_CI * width + lo : _CI * width + hi]
        w_at = pos[_CW * width + lo : _CW * width + hi]
        if min(f_at) < 0:
            return _build_plan_checked(schedule)
        if max(i_at) < 0 and max(w_at) < 0:
            if min(b_at) < 0:
                return _build_plan_checked(schedule)
        elif max(b_at) < 0:
            if min(i_at) < 0 or min(w_at) < 0:
                return _build_plan_checked(schedule)
        else:
            for x, y, z in zip(b_at, i_at, w_at):
                if (x >= 0) == (y >= 0) or (y >= 0) != (z >= 0):
                    return _build_plan_checked(schedule)
    if sum(1 for k in kc if k == _COPT) != len({s for s, k in zip(stage, kc) if k == _COPT}):
        return _build_plan_checked(schedule)
    has_comm = any(k in (_CSF, _CRF, _CSB, _CRB) for k in set(kc))
    if has_comm:
        stream, stream_names, stream_rank = _assign_streams(
            schedule, rank_of, stage, [_CSF <= k <= _CRB for k in kc], [k == _CSF or k == _CRB for k in kc]
        )
    else:
        used_ranks = sorted(set(rank_of))
        rank_stream = {r: i for i, r in enumerate(used_ranks)}
        stream = [rank_stream[r] for r in rank_of]
        stream_names = tuple(f"rank{r}/compute" for r in used_ranks)
        stream_rank = tuple(used_ranks)
    st_rank = schedule.stage_to_rank
    last = n_stages - 1
    off_f, off_b, off_i = _CF * width, _CB * width, _CI * width
    off_sf, off_rf, off_sb, off_rb = _CSF * width, _CRF * width, _CSB * width, _CRB * width
    deps: list[tuple[int, ...]] = [()] * n
    cross: list[tuple[int, ...]] = [()] * n
    start_deps: list[tuple[int, ...]] = [()] * n
    opt_jobs: list[int] = []
    bad = False
    for j in range(n):
        k = kc[j]
        s = stage[j]
        b = mb[j]
        if k == _CF:
            if s == 0:
                continue
            if has_comm and st_rank[s - 1] != st_rank[s]:
                d = pos[off_rf + s * m1 + b]
            else:
                d = pos[off_f + (s - 1) * m1 + b]
            if d < 0:
                bad = True
                break
            deps[j] = (d,)
            if stream[d] != stream[j]:
                cross[j] = (d,)
        elif k == _CB or k == _CI:
            f = pos[off_f + s * m1 + b]
            if s == last:
                deps[j] = (f,)
                if stream[f] != stream[j]:
                    cross[j] = (f,)
                continue
            if has_comm and st_rank[s + 1] != st_rank[s]:
                d = pos[off_rb + s * m1 + b]
            else:
                key = (s + 1) * m1 + b
                d = pos[off_i + key]
                if d < 0:
                    d = pos[off_b + key]
            if d < 0:
                bad = True
                break
            deps[j] = (f, d)
            sj = stream[j]
            if stream[f] != sj:
                cross[j] = (f, d) if stream[d] != sj else (f,)
            elif stream[d] != sj:
                cross[j] = (d,)
        elif k == _CW:
            d = pos[off_i + s * m1 + b]
            deps[j] = (d,)
        elif k == _CSF:
            d = pos[off_f + s * m1 + b]
            if d < 0:
                bad = True
                break
            deps[j] = cross[j] = (d,)
        elif k == _CSB:
            d = pos[off_i + s * m1 + b]
            if d < 0:
                d = pos[off_b + s * m1 + b]
            if d < 0:
                bad = True
                break
            deps[j] = cross[j] = (d,)
        elif k == _CRF or k == _CRB:
            d = pos[(off_sf + (s - 1) * m1 if k == _CRF else off_sb + (s + 1) * m1) + b] if 0 <= (s - 1 if k == _CRF else s + 1) <= last else -1
            if d < 0:
                bad = True
                break
            start_deps[j] = (d,)
        else:  # OPT
            opt_jobs.append(j)
    if bad:
        return _build_plan_checked(schedule)
    for j in opt_jobs:
        s = stage[j]
        ds = tuple(x for x in (pos[off_b + s * m1 + b] for b in range(m)) if x >= 0) + tuple(
            x for x in (pos[_CW * width + s * m1 + b] for b in range(m)) if x >= 0
        )
        deps[j] = ds
        cross[j] = tuple(x for x in ds if stream[x] != stream[j])
    order = _fast_order(n, stream, deps, start_deps, len(stream_names))
    if order is None:
        return _build_plan_checked(schedule)
    chunk = schedule._chunk_of
    return Plan(
        schedule=schedule,
        jobs=tuple(jobs),
        rank=tuple(rank_of),
        step=tuple(step_of),
        stream=tuple(stream),
        chunk=tuple(chunk[s] for s in stage),
        stream_names=stream_names,
        deps=tuple(cross),
        start_deps=tuple(start_deps),
        order=tuple(order),
        stream_rank=stream_rank,
    )


def _fast_order(n: int, stream: list[int], deps: list[tuple[int, ...]], start_deps: list[tuple[int, ...]], n_streams: int) -> list[int] | None:
    """Readiness simulation: each stream offers its head job; a head whose
    dependencies are not all enqueued parks its stream on the first missing one
    until that job is enqueued. Each job is looked at once per dependency that
    wakes its stream, so this is linear. Returns the enqueue order, or ``None``
    on a deadlock (the caller rebuilds the detailed error)."""
    queues: list[list[int]] = [[] for _ in range(n_streams)]
    for j, s in enumerate(stream):
        queues[s].append(j)
    head = [0] * n_streams
    done = bytearray(n)
    waiters: dict[int, list[int]] = {}
    order: list[int] = []
    append = order.append
    ready = [s for s in range(n_streams) if queues[s]]
    while ready:
        s = ready.pop()
        q = queues[s]
        h = head[s]
        end = len(q)
        while h < end:
            j = q[h]
            blocked = -1
            for d in deps[j]:
                if not done[d]:
                    blocked = d
                    break
            if blocked < 0:
                for d in start_deps[j]:
                    if not done[d]:
                        blocked = d
                        break
            if blocked >= 0:
                waiters.setdefault(blocked, []).append(s)
                break
            done[j] = 1
            append(j)
            h += 1
            if waiters:
                w = waiters.pop(j, None)
                if w:
                    ready.extend(w)
        head[s] = h
    return order if len(order) == n else None
