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
from harness.schedule.validate import check_counts

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
        stream_names: per stream, ``"rank{r}/compute"`` or ``"rank{r}/comm"``;
            stream ``2r`` is rank ``r``'s compute stream, ``2r+1`` its comm stream.
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

    @property
    def num_jobs(self) -> int:
        return len(self.jobs)

    def streams_used(self) -> list[int]:
        """Indices of streams that carry at least one job, ascending."""
        return sorted(set(self.stream))


def _stream_name(index: int) -> str:
    return f"rank{index // 2}/{'comm' if index % 2 else 'compute'}"


def build_plan(schedule: Schedule) -> Plan:
    """Validate ``schedule`` and turn it into a :class:`Plan`.

    Raises:
        ScheduleError: wrong counts (see :func:`check_counts`), a job whose
            producer is missing, or a deadlock - a job that can never become
            ready; the message names the jobs and draws the grid with them marked.
    """
    check_counts(schedule)
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
    stream_of = [2 * rank_of[j] + (1 if jobs[j].kind.is_comm else 0) for j in range(n)]
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
    for j, (k, kind, mb) in enumerate(jobs):
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
            f"schedule {schedule.name!r}: {len(missing)} job(s) depend on jobs that are not scheduled\n"
            + schedule.format_grid(marks),
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
        stream_names=tuple(_stream_name(s) for s in range(2 * schedule.num_ranks)),
        deps=tuple(tuple(d for d in ds if stream_of[d] != stream_of[j]) for j, ds in enumerate(deps)),
        start_deps=tuple(start_deps),
        order=order,
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
