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
  and, when the schedule has send/receive jobs, a comm stream per peer rank.

Send/receive jobs must be able to happen, as PyTorch's runtime would run them:

* a send/receive connects two stages on different ranks: ``SEND_F(k,i)`` and
  ``RECV_B(k,i)`` talk to stage ``k+1``, ``SEND_B(k,i)`` and ``RECV_F(k,i)`` to
  stage ``k-1``; that stage must exist (no ``SEND_F`` from the last stage, no
  ``SEND_B`` from the first) and sit on another rank (adjacent stages on one
  rank, as at a V placement's turn, exchange nothing, as
  :func:`~harness.schedule.passes.add_communication` has it);
* every ``SEND_F(k,i)`` has its ``RECV_F(k+1,i)`` and every ``SEND_B(k,i)`` its
  ``RECV_B(k-1,i)``, and the other way round. With the rule above this follows
  from the dependencies: the consumer on the other rank must be scheduled, and
  it needs the receive;
* each rank issues its jobs in listed order, whatever their stream (PyTorch
  refuses to compute before receiving the input): every dependency on the
  job's own rank - a consumer's receive, the job whose output a send sends,
  a same-rank producer - must be listed earlier in that rank's list.

:func:`build_plan` checks counts, these rules, builds the graph and simulates
readiness (Kahn's algorithm driven stream by stream) to find an enqueue order
that is a topological order - which CUDA's "wait on the latest record"
semantics need - or to report a deadlock with the step x rank grid. Everything
is linear in the number of jobs.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import cached_property
from itertools import chain, pairwise
from typing import Any, NamedTuple

from harness._gcpause import gc_paused
from harness.errors import ScheduleError
from harness.schedule.model import KIND_CODE, Job, JobKind, Schedule, _job_arrays, _kind_codes, _read_only
from harness.schedule.validate import check_counts, check_order

__all__ = ["Plan", "PlanArrays", "build_plan", "validate"]

_F, _B, _I, _W = JobKind.F, JobKind.B, JobKind.I, JobKind.W
_SF, _RF, _SB, _RB, _OPT = JobKind.SEND_F, JobKind.RECV_F, JobKind.SEND_B, JobKind.RECV_B, JobKind.OPT


class PlanArrays(NamedTuple):
    """A plan's jobs as columns: per job ``j`` (``0 <= j < n``) numpy int64 arrays
    of shape ``(n,)``, and its dependency graph in CSR form.

    Attributes:
        stage, kind, microbatch: the job (``kind`` is the index of its
            :class:`JobKind` in ``tuple(JobKind)``; ``microbatch`` is ``-1`` where
            the job has none, as ``OPT``).
        rank, step, stream, chunk: where it runs (see :class:`Plan`).
        deps_ptr, deps_idx: ``Plan.deps[j]`` is ``deps_idx[deps_ptr[j]:deps_ptr[j + 1]]``;
            ``deps_ptr`` has shape ``(n + 1,)``.
        start_ptr, start_idx: the same for ``Plan.start_deps``.

    The arrays are read-only (``writeable=False``): a plan, like its schedule,
    does not change.
    """

    stage: Any
    kind: Any
    microbatch: Any
    rank: Any
    step: Any
    stream: Any
    chunk: Any
    deps_ptr: Any
    deps_idx: Any
    start_ptr: Any
    start_idx: Any


@dataclass(frozen=True, eq=False)
class Plan:
    """A validated schedule as a dependency graph over flat per-job arrays.

    Job ``j`` (``0 <= j < num_jobs``) is ``jobs[j]`` on rank ``rank[j]``, at grid
    step ``step[j]`` of that rank's list, on stream ``stream[j]``. The plan
    holds its jobs as columns (:attr:`arrays`); the per-job tuples below are made
    from them on first access, so code that only needs the arrays (simulation,
    analysis of large schedules) never creates per-job Python objects. Plans
    compare by identity.

    Attributes:
        schedule: the schedule this plan was built from.
        arrays: the jobs and the graph as numpy columns (:class:`PlanArrays`).
        stream_names: per stream, ``"rank{r}/compute"`` or ``"rank{r}/comm↔{q}"``
            (one comm stream per pair of ranks ``r``, ``q`` that exchange data).
        stream_rank: per stream, its rank.
        order: the enqueue order, a topological order of the graph including
            stream order.
        jobs: every non-idle job, rank by rank in listed order.
        rank, step, stream, chunk: per-job integers (tuples of length ``num_jobs``).
        deps: per job, the jobs whose *end* it waits for (data dependencies,
            excluding the previous job on its own stream).
        start_deps: per job, the jobs whose *start* it waits for (a receive
            waits for its send to begin).
    """

    schedule: Schedule
    arrays: PlanArrays
    stream_names: tuple[str, ...]
    stream_rank: tuple[int, ...]
    order: tuple[int, ...]

    @property
    def num_jobs(self) -> int:
        return len(self.arrays.stage)

    @cached_property
    def jobs(self) -> tuple[Job, ...]:
        rows = self.schedule.ranks
        flat = chain.from_iterable(rows)
        return tuple(flat if sum(map(len, rows)) == self.num_jobs else filter(None, flat))  # type: ignore[arg-type]

    @cached_property
    def rank(self) -> tuple[int, ...]:
        return tuple(self.arrays.rank.tolist())

    @cached_property
    def step(self) -> tuple[int, ...]:
        return tuple(self.arrays.step.tolist())

    @cached_property
    def stream(self) -> tuple[int, ...]:
        return tuple(self.arrays.stream.tolist())

    @cached_property
    def chunk(self) -> tuple[int, ...]:
        return tuple(self.arrays.chunk.tolist())

    @cached_property
    def deps(self) -> tuple[tuple[int, ...], ...]:
        return _csr_tuples(self.arrays.deps_ptr, self.arrays.deps_idx)

    @cached_property
    def start_deps(self) -> tuple[tuple[int, ...], ...]:
        return _csr_tuples(self.arrays.start_ptr, self.arrays.start_idx)

    def __post_init__(self) -> None:
        _read_only(self.arrays)  # shared with the schedule's arrays; a plan is immutable

    def __getstate__(self) -> dict[str, Any]:
        # pickle and copy.deepcopy carry the columns only; the per-job views are made again on first access
        return {k: v for k, v in self.__dict__.items() if k not in _VIEWS}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # pickle and copy.deepcopy make new, writable arrays: keep them read-only
        self.__dict__.update(state)
        _read_only(self.arrays)

    def streams_used(self) -> list[int]:
        """Indices of streams that carry at least one job, ascending."""
        import numpy as np

        return np.unique(self.arrays.stream).tolist()  # type: ignore[no-any-return]


_VIEWS = frozenset(("jobs", "rank", "step", "stream", "chunk", "deps", "start_deps"))
"""The :class:`Plan` attributes made from its columns on first access (cached in the instance)."""


@gc_paused
def _csr_tuples(ptr: Any, idx: Any) -> tuple[tuple[int, ...], ...]:
    """Per row of a CSR graph (``ptr`` of shape ``(n + 1,)``), its indices as a tuple."""
    import numpy as np

    n = len(ptr) - 1
    counts = np.diff(ptr)
    if n and int(counts.max()) <= 2:
        out = np.empty(n, object)
        out.fill(())
        at = ptr[:-1]
        for width in (1, 2):
            rows = np.flatnonzero(counts == width)
            if len(rows):
                cols = [idx[at[rows] + k].tolist() for k in range(width)]
                out[rows] = np.fromiter(zip(*cols), object, len(rows))
        return tuple(out.tolist())
    flat = idx.tolist()
    bounds = ptr.tolist()
    return tuple(tuple(flat[a:b]) for a, b in pairwise(bounds))


def _csr(rows: list[tuple[int, ...]] | tuple[tuple[int, ...], ...]) -> tuple[Any, Any]:
    """CSR form (``ptr``, ``idx``) of per-row index tuples."""
    import numpy as np

    ptr = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, rows), np.int64, len(rows)), out=ptr[1:])
    return ptr, np.fromiter(chain.from_iterable(rows), np.int64, int(ptr[-1]))


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
    ``RECV_F(k,i)`` to stage ``k-1``; that stage must be in the pipeline and on
    another rank (adjacent stages on one rank, as at a V placement's turn,
    exchange nothing: :func:`~harness.schedule.passes.add_communication` inserts
    no job there).

    Raises:
        ScheduleError: names each such job and its peer stage, marks them in the grid.
    """
    last = schedule.num_stages - 1
    st_rank = schedule.stage_to_rank
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
# Kind codes follow JobKind's declaration order; ids avoid Enum.__hash__ (a
# Python-level call) on the hot path.
_KINDS = tuple(JobKind)
_CODE = {id(k): code for k, code in KIND_CODE.items()}  # by id: hashing an Enum member is a Python-level call
_CF, _CB, _CI, _CW = _CODE[id(_F)], _CODE[id(_B)], _CODE[id(_I)], _CODE[id(_W)]
_CSF, _CRF, _CSB, _CRB, _COPT = _CODE[id(_SF)], _CODE[id(_RF)], _CODE[id(_SB)], _CODE[id(_RB)], _CODE[id(_OPT)]
_CUN, _CRS, _CRG = KIND_CODE[JobKind.UNSHARD], KIND_CODE[JobKind.RESHARD], KIND_CODE[JobKind.REDUCE_GRAD]
assert (_CUN, _CRS, _CRG) == (_CUN, _CUN + 1, _CUN + 2), "the data-parallel kinds must be declared together (code ranges test them)"


def _data_parallel_in_order(np: Any, kc: Any, stage: Any, jidx: Any, n_stages: int) -> bool:
    """Whether every ``UNSHARD`` comes before its stage's compute jobs, every ``RESHARD`` after
    them and every ``REDUCE_GRAD`` after its stage's ``B``/``W`` (the rule of
    :func:`~harness.schedule.validate.check_order`). Jobs are rank by rank in listed order and a
    stage's jobs share a rank, so list order is index order. No data-parallel job: ``True``."""
    dp = (kc >= _CUN) & (kc <= _CRG)
    if not dp.any():
        return True
    compute = (kc == _CF) | (kc == _CB) | (kc == _CI) | (kc == _CW)
    bw = (kc == _CB) | (kc == _CW)
    lo = np.full(n_stages, len(kc), np.int64)
    np.minimum.at(lo, stage[compute], jidx[compute])
    hi = np.full(n_stages, -1, np.int64)
    np.maximum.at(hi, stage[compute], jidx[compute])
    hi_bw = np.full(n_stages, -1, np.int64)
    np.maximum.at(hi_bw, stage[bw], jidx[bw])
    un, rs, rg = (jidx[kc == c] for c in (_CUN, _CRS, _CRG))
    return not (bool((un > lo[stage[un]]).any()) or bool((rs < hi[stage[rs]]).any()) or bool((rg < hi_bw[stage[rg]]).any()))


@gc_paused
def build_plan(schedule: Schedule) -> Plan:
    """Validate ``schedule`` and turn it into a :class:`Plan`.

    Checks, in order: counts (every stage has one forward and one complete
    backward per micro-batch, nothing twice, micro-batches in range), order on
    each rank (``F`` before its ``I``/``B``, ``I`` before its ``W``), that each
    send/receive connects its stage with an existing stage on another rank
    (``SEND_F``/``RECV_B`` with ``k+1``, ``SEND_B``/``RECV_F`` with ``k-1``), every
    dependency scheduled (including the receive a cross-rank consumer needs in
    a schedule with communication jobs, so every send has its receive and
    every receive its send), every dependency on a job's own rank listed
    before it whatever its stream (a consumer after its receive, a send after
    its producer: a rank issues its jobs in list order), and no deadlock
    (readiness simulation). Linear in the number of jobs: jobs are keyed by
    integers ``(kind, stage, micro-batch)`` in one flat table, built with
    numpy; whatever looks wrong is judged again, and reported, by the
    reference path.

    A schedule's overlapped job groups (``OVERLAP_F_B``, :mod:`harness.overlap`)
    then run concurrently: later members on sibling streams ``rank{r}/overlap``.

    Raises:
        ScheduleError: the first problem found; the message names the jobs and
            draws the step x rank grid with them marked; or a malformed overlapped group.
        ResourceError: memory ran out (names the jobs and the memory they need).
    """
    from harness import overlap
    from harness.schedule.builders import memory_guard

    with memory_guard(schedule.num_jobs, f"schedule {schedule.name!r}: building its plan"):
        return overlap.apply(_build_plan(schedule))


def validate(schedule: Schedule) -> None:
    """Run every check of ``schedule``: counts, per-rank order, dependencies and deadlocks
    (:func:`~harness.schedule.validate.check_counts`, :func:`~harness.schedule.validate.check_order`
    and :func:`build_plan`), building and dropping its plan.

    Raises:
        ScheduleError: the first problem found.
    """
    build_plan(schedule)


def _build_plan(schedule: Schedule) -> Plan:
    """:func:`build_plan` inside its memory guard, before overlapped groups are applied."""
    import numpy as np

    m = schedule.num_microbatches
    n_stages = schedule.num_stages
    m1 = m + 1
    width = n_stages * m1  # one block of keys per kind
    arrays = _job_arrays(schedule)
    if arrays is None:
        jobs = list(filter(None, chain.from_iterable(schedule.ranks)))
        if jobs:
            kc = _kind_codes(jobs)
            if int(kc.min()) < 0:
                raise KeyError(id(jobs[int(np.flatnonzero(kc < 0)[0])][1]))  # as a lookup of an unknown kind always did
        return _build_plan_checked(schedule)  # not integers: let the reference path judge
    stage, kc, mb, counts = arrays
    n = len(stage)
    if n == 0 or m < 1:
        return _build_plan_checked(schedule)
    mb_given = mb
    n_ranks = len(counts)
    jidx = np.arange(n, dtype=np.int64)
    rank = np.repeat(np.arange(n_ranks, dtype=np.int64), counts)
    if schedule._lazy_arrays() is not None or all(len(row) == c for row, c in zip(schedule.ranks, counts)):
        row_start = np.zeros(n_ranks, np.int64)
        np.cumsum(counts[:-1], out=row_start[1:])
        step = row_start[rank]
        np.subtract(jidx, step, out=step)  # no idle slots: a job's step is its place in its row
    else:
        step = np.fromiter(
            chain.from_iterable((s for s, job in enumerate(row) if job is not None) for row in schedule.ranks), np.int64, n
        )
    no_mb = mb < 0  # None (OPT, UNSHARD, RESHARD, REDUCE_GRAD): key slot m
    if no_mb.any():
        given = mb[~no_mb]
        per_stage = (kc == _COPT) | ((kc >= _CUN) & (kc <= _CRG))
        if (len(given) and int(given.max()) >= m) or bool((no_mb & ~per_stage).any()):  # only these have no micro-batch
            return _build_plan_checked(schedule)
        mb = mb.copy()
        mb[no_mb] = m
        if not _data_parallel_in_order(np, kc, stage, jidx, n_stages):
            return _build_plan_checked(schedule)
    elif int(mb.max()) >= m:
        return _build_plan_checked(schedule)
    # In place where it can be: at 10 M jobs each temporary column is 80 MB of fresh memory.
    keys = np.multiply(stage, m1)
    keys += mb
    keys += kc * width
    pos = np.full(len(_KINDS) * width, -1, np.int64)
    pos[keys] = jidx
    if not (pos[keys] == jidx).all():  # a key listed twice
        return _build_plan_checked(schedule)
    # Counts: per stage and micro-batch, an F, and B xor (I and W).
    table = pos.reshape(len(_KINDS), n_stages, m1)[:, :, :m] >= 0
    has_b, has_i, has_w = table[_CB], table[_CI], table[_CW]
    if not table[_CF].all() or not ((has_b != has_i) & (has_i == has_w)).all():
        return _build_plan_checked(schedule)
    is_opt = kc == _COPT
    n_opt = int(is_opt.sum())
    if n_opt and n_opt != len(np.unique(stage[is_opt])):
        return _build_plan_checked(schedule)
    has_comm = bool(((kc >= _CSF) & (kc <= _CRB)).any())
    # Streams: key rank * (p + 1) for compute, + 1 + peer rank for comm.
    st_rank = np.array(schedule.stage_to_rank, np.int64)
    p1 = n_ranks + 1
    skey = rank * p1
    if has_comm:
        comm = (kc >= _CSF) & (kc <= _CRB)
        nb = stage - 1
        nb[(kc == _CSF) | (kc == _CRB)] += 2  # SEND_F/RECV_B talk to stage + 1, SEND_B/RECV_F to stage - 1
        outside = (nb < 0) | (nb >= n_stages)
        np.clip(nb, 0, n_stages - 1, out=nb)
        peer = st_rank[nb]
        del nb
        np.copyto(peer, rank, where=outside)
        if bool((comm & (peer == rank)).any()):  # a peer stage outside the pipeline or on the job's own rank
            return _build_plan_checked(schedule)
        peer += 1
        np.add(skey, peer, out=skey, where=comm)
        del peer
    if n_ranks * p1 <= max(1 << 20, 4 * n):  # a lookup table over all keys: linear
        used = np.flatnonzero(np.bincount(skey, minlength=n_ranks * p1))
        lut = np.zeros(n_ranks * p1, np.int64)
        lut[used] = np.arange(len(used))
        stream = lut[skey]
    else:  # very many ranks, few jobs each: the (p + 1)^2 table would not fit; sort instead
        used, stream = np.unique(skey, return_inverse=True)
        stream = stream.reshape(-1)
    used_l = used.tolist()
    stream_names = tuple(f"rank{key // p1}/compute" if key % p1 == 0 else f"rank{key // p1}/comm↔{key % p1 - 1}" for key in used_l)
    stream_rank = tuple(key // p1 for key in used_l)
    # Dependencies: d1 (and d2 for B/I) end dependencies, sd a start dependency; -1 none.
    # Each kind's jobs are looked up on their own (index arrays), not the whole list.
    last = n_stages - 1
    d1 = np.full(n, -1, np.int64)
    d2 = np.full(n, -1, np.int64)
    sd = np.full(n, -1, np.int64)
    bad = False
    rank_of_stage = st_rank if has_comm else np.zeros(n_stages, np.int64)  # no comm: never "another rank"
    kc8 = kc.astype(np.uint8)
    by_kind = np.argsort(kc8, kind="stable")  # radix sort: linear
    bounds = np.searchsorted(kc8[by_kind], np.arange(len(_KINDS) + 1)).tolist()
    del kc8

    def of_kind(*codes: int) -> np.ndarray:
        parts = [by_kind[bounds[c] : bounds[c + 1]] for c in codes]
        return parts[0] if len(parts) == 1 else np.sort(np.concatenate(parts))

    def at_key(code: int, stg: np.ndarray, b: np.ndarray) -> np.ndarray:
        return pos[code * width + stg * m1 + b]  # type: ignore[no-any-return]

    def backward(stg: np.ndarray, b: np.ndarray) -> np.ndarray:
        i = at_key(_CI, stg, b)
        return np.where(i >= 0, i, at_key(_CB, stg, b))  # type: ignore[no-any-return]

    j = of_kind(_CF)
    j = j[stage[j] > 0]
    s, b = stage[j], mb[j]
    d = np.where(rank_of_stage[s - 1] != rank_of_stage[s], at_key(_CRF, s, b), at_key(_CF, s - 1, b))
    d1[j] = d
    bad |= bool((d < 0).any())
    j = of_kind(_CB, _CI)
    s, b = stage[j], mb[j]
    d1[j] = at_key(_CF, s, b)
    j = j[s < last]
    s, b = stage[j], mb[j]
    d = np.where(rank_of_stage[s + 1] != rank_of_stage[s], at_key(_CRB, s, b), backward(s + 1, b))
    d2[j] = d
    bad |= bool((d < 0).any())
    j = of_kind(_CW)
    d1[j] = at_key(_CI, stage[j], mb[j])
    j = of_kind(_CSF)
    d = at_key(_CF, stage[j], mb[j])
    d1[j] = d
    bad |= bool((d < 0).any())
    j = of_kind(_CSB)
    d = backward(stage[j], mb[j])
    d1[j] = d
    bad |= bool((d < 0).any())
    j = of_kind(_CRF)
    s = stage[j]
    d = np.where(s > 0, at_key(_CSF, np.maximum(s - 1, 0), mb[j]), -1)
    sd[j] = d
    bad |= bool((d < 0).any())
    j = of_kind(_CRB)
    s = stage[j]
    d = np.where(s < last, at_key(_CSB, np.minimum(s + 1, last), mb[j]), -1)
    sd[j] = d
    bad |= bool((d < 0).any())
    if bad:
        return _build_plan_checked(schedule)
    # Every dependency on the job's own rank, whatever its stream, must be listed
    # earlier: jobs are rank by rank in listed order, so one listed later lies
    # in (j, end of j's row). Start dependencies (a receive's send) are on
    # another rank, as the peer check above ensures. Dependencies on the job's
    # own stream are then met by stream order; the others gate the readiness order.
    row_end = np.cumsum(counts)
    later = False
    for d in (d1, d2):
        ahead = np.flatnonzero(d > jidx)  # in a valid schedule, only dependencies on a later rank
        later = later or bool((d[ahead] < row_end[rank[ahead]]).any())

    def crosses(d: np.ndarray) -> np.ndarray:
        out = stream[d] != stream  # (d = -1, no dependency, reads the last job's stream: masked next)
        out &= d >= 0
        return out  # type: ignore[no-any-return]

    cross1, cross2, cross_s = crosses(d1), crosses(d2), crosses(sd)
    opt_l = np.flatnonzero(is_opt).tolist()
    stream_l = stream.tolist()
    opt_deps: dict[int, tuple[int, ...]] = {}
    opt_cross: dict[int, tuple[int, ...]] = {}
    for j in opt_l:
        s = int(stage[j])
        row_b = pos[_CB * width + s * m1 : _CB * width + s * m1 + m]
        row_w = pos[_CW * width + s * m1 : _CW * width + s * m1 + m]
        ds = tuple(row_b[row_b >= 0].tolist()) + tuple(row_w[row_w >= 0].tolist())
        opt_deps[j] = ds
        opt_cross[j] = tuple(x for x in ds if stream_l[x] != stream_l[j])
        if any(x > j for x in ds if stream_l[x] == stream_l[j]):
            return _build_plan_checked(schedule)
    if later:
        return _build_plan_checked(schedule)
    # Plan.deps: the cross-stream end dependencies, in (d1, d2) order (CSR).
    c1 = np.full(n, -1, np.int64)
    np.copyto(c1, d2, where=cross2)
    np.copyto(c1, d1, where=cross1)
    c2 = np.full(n, -1, np.int64)
    np.copyto(c2, d2, where=cross1 & cross2)
    one = c1 >= 0
    two = c2 >= 0
    n_deps = one.astype(np.int32)  # (an OPT waits for up to 2m jobs)
    n_deps += two
    for j in opt_l:
        n_deps[j] = len(opt_cross[j])
    deps_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(n_deps, out=deps_ptr[1:])
    deps_idx = np.empty(int(deps_ptr[-1]), np.int64)
    at = deps_ptr[:-1]
    deps_idx[at[one]] = c1[one]
    deps_idx[at[two] + 1] = c2[two]
    for j in opt_l:
        deps_idx[deps_ptr[j] : deps_ptr[j + 1]] = opt_cross[j]
    has_sd = sd >= 0
    start_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(has_sd, out=start_ptr[1:])
    start_idx = sd[has_sd]
    n_gates = cross1.astype(np.int8) + cross2 + cross_s
    for j in opt_l:
        n_gates[j] = min(len(opt_cross[j]), 2)  # only whether it exceeds 1 matters (int8)
    if int(n_gates.max()) <= 1:
        gate = np.full(n, n, np.int64)
        np.copyto(gate, sd, where=cross_s)
        np.copyto(gate, d2, where=cross2)
        np.copyto(gate, d1, where=cross1)
        order = _gated_order(np, n, stream, gate, len(used_l))
    else:  # several cross-stream waits on one job: the general simulation
        full = [tuple(x for x in pair if x >= 0) for pair in zip(d1.tolist(), d2.tolist())]
        for j in opt_l:
            full[j] = opt_deps[j]
        start_deps: list[tuple[int, ...]] = [(x,) if x >= 0 else () for x in sd.tolist()]
        order = _fast_order(n, stream.tolist(), full, start_deps, len(used_l))
    if order is None:
        return _build_plan_checked(schedule)
    # For simulate: per job the one time it waits for, in a list of ends (j) and
    # starts (n + j), 2n for none; only when no job waits for more than one.
    wait = None
    if not two.any() and not (one & has_sd).any() and not any(opt_cross.values()):
        wait = sd + n
        wait[~has_sd] = 2 * n
        np.copyto(wait, c1, where=one)
    columns = PlanArrays(
        stage=stage,
        kind=kc,
        microbatch=mb_given,
        rank=rank,
        step=step,
        stream=stream,
        chunk=np.array(schedule._chunk_of, np.int64)[stage],
        deps_ptr=deps_ptr,
        deps_idx=deps_idx,
        start_ptr=start_ptr,
        start_idx=start_idx,
    )
    plan = Plan(schedule, columns, stream_names, stream_rank, tuple(order))
    object.__setattr__(plan, "_wait", wait)
    return plan


def _gated_order(np: Any, n: int, stream: Any, gate: Any, n_streams: int) -> list[int] | None:
    """:func:`_fast_order` for graphs where each job waits on at most one job of
    another stream (``gate[j]``; ``n`` for none) and its other dependencies
    are listed earlier on its own stream, so they are met when it heads it.

    Same stream-stack discipline and so the same order as :func:`_fast_order`,
    walked job by job: the stack holds the head jobs of woken streams (their
    gate is enqueued, which is what woke them); the first heads come after it
    empties, as they lay below it.
    ``nxt[j]`` is the next job on ``j``'s stream, or ``n``, an end job whose
    gate never opens.
    """
    narrow = stream.astype(np.uint16) if n_streams <= 1 << 16 else stream
    by_stream = np.argsort(narrow, kind="stable")  # radix sort
    ss = narrow[by_stream]
    del narrow
    first = np.concatenate(([True], ss[1:] != ss[:-1]))
    last = np.concatenate((first[1:], [True]))
    nxt_np = np.empty(n + 1, np.int64)
    nxt_np[by_stream[:-1]] = by_stream[1:]
    nxt_np[by_stream[last]] = n  # a stream's end: job n, whose gate never opens
    nxt = nxt_np.tolist()
    gates_np = np.empty(n + 1, np.int64)
    gates_np[:n] = gate
    gates_np[:n][gate >= n] = n + 1
    gates_np[n] = n + 2
    gates = gates_np.tolist()
    del gates_np
    # state: -2 not enqueued, -1 enqueued, c >= 0 while the stream headed by job c waits on it
    state = [-2] * (n + 3)
    state[n + 1] = -1  # the gate of jobs that wait for nothing
    state[n + 2] = -3  # the end job's gate
    more: dict[int, list[int]] = {}  # further streams parked on one job
    order: list[int] = []
    append = order.append
    stack: list[int] = []  # heads of woken streams, older ones; the newest is in ``top``
    pop = stack.pop
    push = stack.append
    for j in reversed(by_stream[first].tolist()):
        g = gates[j]
        w = state[g]
        if w != -1:  # a stream's first job waits: park it
            if w >= 0:
                more.setdefault(g, []).append(j)
            else:
                state[g] = j
            continue
        top = -1
        while True:  # j heads its stream and its gate is enqueued
            w = state[j]
            state[j] = -1
            append(j)
            if w >= 0:  # wake the stream parked on j
                if top >= 0:
                    push(top)
                top = w
                if more:
                    extra = more.pop(j, None)
                    if extra:
                        push(top)
                        stack.extend(extra)
                        top = pop()
            j = nxt[j]
            g = gates[j]
            w = state[g]
            if w != -1:  # j waits (or its stream ended): park it, take the newest woken head
                if w >= 0:
                    more.setdefault(g, []).append(j)
                elif w == -2:
                    state[g] = j
                if top >= 0:
                    j = top
                    top = -1
                elif stack:
                    j = pop()
                else:
                    break
    return order if len(order) == n else None


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
