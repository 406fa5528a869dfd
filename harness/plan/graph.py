"""The plan as data: a validated dependency graph over a schedule's jobs, its streams and its
enqueue order, held as flat numpy columns (:class:`PlanArrays`) with tuple views made on demand.

Built by :func:`harness.plan.build.build_plan` (fast path :mod:`harness.plan.fast`, reference path
:mod:`harness.plan.reference`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import chain, pairwise
from typing import Any, NamedTuple

from harness._gcpause import gc_paused
from harness.schedule.model import Job, Schedule, _read_only

__all__ = ["Plan", "PlanArrays"]


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
