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

:func:`build_plan` takes the fast path (:mod:`harness.plan_fast`: numpy over
integer job keys); whatever looks wrong there is judged again, and reported, by
the reference path (:mod:`harness.plan_reference`: over ``Job`` keys, job by
job), which draws the step x rank grid of the jobs at fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import chain, pairwise
from typing import Any, NamedTuple

from harness._gcpause import gc_paused
from harness.schedule.model import Job, Schedule, _read_only

__all__ = ["Plan", "PlanArrays", "build_plan", "validate"]


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
    from harness.plan_fast import _build_plan
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
