"""Run records: every timed job of a run, on one time base, in ns.

A :class:`RunRecords` is what a backend run returns and what analysis and
reports read; it does not refer back to the plan, so results files are
self-contained. Times are integers in ns relative to the run's time base, the
reference event of the first recorded step.

The jobs are kept in one of two forms and converted on demand, once:

* :class:`JobColumns`, numpy columns (one entry per job): what the ``sim`` replay
  makes and what metrics, memory, critical path and the results writer read, with
  no Python object per job;
* a list of :class:`JobRecord` (``records.jobs``): what the op-by-op executor,
  the importers and the rank merge build, and the per-job view users iterate over.

Records built from columns make the list only when ``.jobs`` is read; records
built from a list make the columns when ``.columns`` is read, and again after
the list changed (it is a :class:`JobList`, which counts its changes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, SupportsIndex

from harness.window import WindowOutcome

if TYPE_CHECKING:
    import numpy as np

__all__ = ["KINDS", "JobColumns", "JobList", "JobRecord", "RunRecords"]


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One timed job.

    Attributes:
        rank: pipeline rank (device) that ran it.
        stream: stream name, ``"rank{r}/compute"`` or ``"rank{r}/comm↔{q}"``.
        stage: global stage index.
        kind: job kind token (``"F"``, ``"B"``, ``"I"``, ``"W"``, ``"SEND_F"``, ...).
        microbatch: micro-batch index, or ``None`` for ``OPT``.
        chunk: chunk (virtual stage) index on its rank.
        step: training step the job belongs to.
        start_ns, end_ns: start and end on the run's time base, in ns.
        enqueue_ns: host time spent enqueueing the job (its waits, two event
            records and the launch), in ns.
    """

    rank: int
    stream: str
    stage: int
    kind: str
    microbatch: int | None
    chunk: int
    step: int
    start_ns: int
    end_ns: int
    enqueue_ns: int = 0

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def label(self) -> str:
        """The job's compact text form, ``"2F0"``."""
        return f"{self.stage}{self.kind}{'' if self.microbatch is None else self.microbatch}"


def _kinds() -> tuple[str, ...]:
    from harness.schedule.model import JobKind

    return tuple(k.value for k in JobKind)


KINDS: tuple[str, ...] = _kinds()
"""The kind tokens in the order of :data:`harness.schedule.model.KIND_CODE`: a :class:`JobColumns`
``kind`` code below ``len(KINDS)`` means the same kind as in a plan's columns."""


_NUMBER_COLUMNS = ("rank", "stream", "stage", "kind", "microbatch", "chunk", "step", "start_ns", "end_ns", "enqueue_ns")


@dataclass(frozen=True, eq=False)
class JobColumns:
    """The jobs of a run as numpy columns, one entry per job, in the records' job order.

    Attributes:
        rank, stage, chunk, step: ``int64`` arrays, shape ``(n,)``.
        stream: ``int64``, an index into ``streams``.
        kind: ``int64``, an index into ``kinds``.
        microbatch: ``int64``, -1 for a job without one (``OPT``, data-parallel jobs).
        start_ns, end_ns, enqueue_ns: ``int64``, ns (see :class:`JobRecord`).

    The arrays are made read-only (``writeable=False``): change jobs through ``records.jobs``.
        streams: the stream names ``stream`` indexes (the records' ``streams``, then any other
            name a job carries, in order of first appearance).
        kinds: the kind tokens ``kind`` indexes: :data:`KINDS`, then any other token a job
            carries (an import's), in order of first appearance.
    """

    rank: np.ndarray
    stream: np.ndarray
    stage: np.ndarray
    kind: np.ndarray
    microbatch: np.ndarray
    chunk: np.ndarray
    step: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    enqueue_ns: np.ndarray
    streams: tuple[str, ...]
    kinds: tuple[str, ...] = KINDS

    def __post_init__(self) -> None:
        for name in _NUMBER_COLUMNS:  # read-only, as a plan's columns: the list made from them would no longer agree
            getattr(self, name).setflags(write=False)

    def __len__(self) -> int:
        return len(self.rank)

    @classmethod
    def from_jobs(cls, jobs: list[JobRecord], streams: list[str]) -> JobColumns:
        """The columns of ``jobs`` (``streams``: the records' stream names, indexed first)."""
        import numpy as np

        stream_index = {name: i for i, name in enumerate(streams)}
        kind_index = {k: i for i, k in enumerate(KINDS)}
        names, kinds = list(streams), list(KINDS)

        def code(table: dict[str, int], out: list[str], key: str) -> int:
            got = table.get(key)
            if got is None:
                got = table[key] = len(out)
                out.append(key)
            return got

        n = len(jobs)
        as_array = lambda values: np.fromiter(values, np.int64, n)  # noqa: E731
        try:  # (keyword arguments are evaluated in order: the tables are complete when they are passed)
            return cls(
                rank=as_array(j.rank for j in jobs),
                stream=as_array(stream_index[j.stream] if j.stream in stream_index else code(stream_index, names, j.stream) for j in jobs),
                stage=as_array(j.stage for j in jobs),
                kind=as_array(kind_index[j.kind] if j.kind in kind_index else code(kind_index, kinds, j.kind) for j in jobs),
                microbatch=as_array(-1 if j.microbatch is None else j.microbatch for j in jobs),
                chunk=as_array(j.chunk for j in jobs),
                step=as_array(j.step for j in jobs),
                start_ns=as_array(j.start_ns for j in jobs),
                end_ns=as_array(j.end_ns for j in jobs),
                enqueue_ns=as_array(j.enqueue_ns for j in jobs),
                streams=tuple(names),
                kinds=tuple(kinds),
            )
        except (OverflowError, TypeError):
            raise _bad_job(jobs) from None

    def kind_mask(self, tokens: Any) -> np.ndarray:
        """Boolean array, shape ``(n,)``: the jobs whose kind is one of ``tokens``."""
        import numpy as np

        want = np.array([k in tokens for k in self.kinds], dtype=bool)
        return want[self.kind]  # type: ignore[no-any-return]

    def kind_tokens(self) -> np.ndarray:
        """The kind tokens, an object array of ``str``, shape ``(n,)``."""
        import numpy as np

        return np.array(self.kinds, dtype=object)[self.kind]  # type: ignore[no-any-return]

    def microbatch_list(self) -> list[int | None]:
        """The micro-batches as a list, ``None`` where the column holds -1."""

        out = self.microbatch.astype(object)
        out[self.microbatch < 0] = None
        return out.tolist()  # type: ignore[no-any-return]

    def to_jobs(self) -> list[JobRecord]:
        """One :class:`JobRecord` per entry, in order."""
        import numpy as np

        names = np.array(self.streams, dtype=object)[self.stream].tolist()
        return list(map(JobRecord, self.rank.tolist(), names, self.stage.tolist(), self.kind_tokens().tolist(),
                        self.microbatch_list(), self.chunk.tolist(), self.step.tolist(), self.start_ns.tolist(),
                        self.end_ns.tolist(), self.enqueue_ns.tolist()))

    def select(self, mask: np.ndarray) -> JobColumns:
        """The entries where ``mask`` (boolean, shape ``(n,)``) holds, or those at the indices given."""
        return JobColumns(self.rank[mask], self.stream[mask], self.stage[mask], self.kind[mask], self.microbatch[mask],
                          self.chunk[mask], self.step[mask], self.start_ns[mask], self.end_ns[mask], self.enqueue_ns[mask],
                          self.streams, self.kinds)


_INT64 = (-(1 << 63), (1 << 63) - 1)


def _bad_job(jobs: list[JobRecord]) -> Exception:
    """The error for the first job whose number fields are not whole numbers within int64 (ns)."""
    from harness.errors import InputFormatError

    for k, j in enumerate(jobs):
        for name in ("rank", "stage", "chunk", "step", "start_ns", "end_ns", "enqueue_ns", "microbatch"):
            value = getattr(j, name)
            if name == "microbatch" and value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or not _INT64[0] <= value <= _INT64[1]:
                return InputFormatError(f"job {k} ({j.label} on {j.stream}, step {j.step}): {name} is {value!r}, not a whole "
                                        "number within 64 bits (ns for times: under about 292 years)")
    return InputFormatError("a job's number fields are not whole numbers within 64 bits")


class JobList(list):  # type: ignore[type-arg]
    """A list of :class:`JobRecord` that counts its changes (``version``), so that columns made
    from it are made again after it changed."""

    version = 0

    def _changed(self) -> None:
        self.version += 1

    def __setitem__(self, i: Any, v: Any) -> None:
        self._changed()
        super().__setitem__(i, v)

    def __delitem__(self, i: Any) -> None:
        self._changed()
        super().__delitem__(i)

    def __iadd__(self, other: Any) -> JobList:  # type: ignore[override,misc]
        self._changed()
        return super().__iadd__(other)  # type: ignore[return-value]

    def append(self, v: Any) -> None:
        self._changed()
        super().append(v)

    def extend(self, v: Any) -> None:
        self._changed()
        super().extend(v)

    def insert(self, i: SupportsIndex, v: Any) -> None:
        self._changed()
        super().insert(i, v)

    def pop(self, i: SupportsIndex = -1) -> Any:
        self._changed()
        return super().pop(i)

    def remove(self, v: Any) -> None:
        self._changed()
        super().remove(v)

    def clear(self) -> None:
        self._changed()
        super().clear()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._changed()
        super().sort(*args, **kwargs)

    def reverse(self) -> None:
        self._changed()
        super().reverse()


_FIELDS = ("backend", "device", "num_ranks", "streams", "steps", "step_start_ns", "step_end_ns", "jobs", "enqueue_ns",
           "warmup_steps", "window")


def _same_jobs(a: JobColumns, b: JobColumns) -> bool:
    """Whether two column sets hold the same jobs in the same order (their tables may differ)."""
    import numpy as np

    numbers = ("rank", "stage", "microbatch", "chunk", "step", "start_ns", "end_ns", "enqueue_ns")
    if not all(np.array_equal(getattr(a, f), getattr(b, f)) for f in numbers):
        return False
    names_a, names_b = np.array(a.streams, dtype=object), np.array(b.streams, dtype=object)
    return bool(np.array_equal(a.kind_tokens(), b.kind_tokens()) and np.array_equal(names_a[a.stream], names_b[b.stream]))


class RunRecords:
    """Everything a run measured.

    Attributes:
        backend: backend name (``sim``, ``cpu``, ``cuda``).
        device: backend metadata (workload, clocks, versions).
        num_ranks: ``p``.
        streams: all stream names, in track order.
        steps: indices of the recorded steps.
        step_start_ns, step_end_ns: per recorded step, its reference time and
            the end of its last job, on the run's time base (ns).
        jobs: every job of every recorded step, a list of :class:`JobRecord` (made from the
            columns the first time it is read, when the records were made from columns).
        columns: the same jobs as :class:`JobColumns` (made from ``jobs`` when read, and again
            after ``jobs`` changed).
        enqueue_ns: per recorded step, host time spent enqueueing the step's
            work (waits, records, launches), in ns.
        warmup_steps: steps run before the first recorded one.
        window: how the profiling window ended (why recording stopped, the
            relative error of the median reached), ``None`` for records not
            made by the executor (imports).

    Give either ``jobs`` or ``columns``, not both. The records keep their own copy of a given
    list (a :class:`JobList`): add jobs later through ``records.jobs``, not the list passed in.

    Raises:
        ValueError: both ``jobs`` and ``columns`` given.
    """

    def __init__(self, backend: str, device: dict[str, Any], num_ranks: int, streams: list[str],
                 steps: list[int] | None = None, step_start_ns: list[int] | None = None, step_end_ns: list[int] | None = None,
                 jobs: list[JobRecord] | None = None, enqueue_ns: list[int] | None = None, warmup_steps: int = 0,
                 window: WindowOutcome | None = None, *, columns: JobColumns | None = None) -> None:
        if jobs is not None and columns is not None:
            raise ValueError("RunRecords takes jobs or columns, not both")
        self.backend = backend
        self.device = device
        self.num_ranks = num_ranks
        self.streams = streams
        self.steps = [] if steps is None else steps
        self.step_start_ns = [] if step_start_ns is None else step_start_ns
        self.step_end_ns = [] if step_end_ns is None else step_end_ns
        self.enqueue_ns = [] if enqueue_ns is None else enqueue_ns
        self.warmup_steps = warmup_steps
        self.window = window
        self._jobs: JobList | None = None
        self._columns: JobColumns | None = columns
        self._columns_of: tuple[int, int] | None = None  # (id, version) of the list the columns were made from
        if columns is None:
            self.jobs = [] if jobs is None else jobs

    @property
    def jobs(self) -> list[JobRecord]:
        """Every job of every recorded step, one :class:`JobRecord` each (see the class doc)."""
        if self._jobs is None:
            assert self._columns is not None
            self._jobs = JobList(self._columns.to_jobs())
            self._columns_of = (id(self._jobs), self._jobs.version)
        return self._jobs

    @jobs.setter
    def jobs(self, jobs: list[JobRecord]) -> None:
        self._jobs = JobList(jobs)  # a copy, even of another records' list: the two must not change together
        self._columns = None
        self._columns_of = None

    @property
    def columns(self) -> JobColumns:
        """The jobs as numpy columns (see the class doc)."""
        jobs = self._jobs
        if jobs is not None and self._columns_of != (id(jobs), jobs.version):
            self._columns = JobColumns.from_jobs(jobs, self.streams)
            self._columns_of = (id(jobs), jobs.version)
        assert self._columns is not None
        return self._columns

    @property
    def num_jobs(self) -> int:
        """How many jobs the records hold (without making the per-job list)."""
        return len(self._jobs) if self._jobs is not None else len(self.columns)

    def jobs_of_step(self, step: int) -> list[JobRecord]:
        """The jobs of ``step``, in the records' order."""
        return [j for j in self.jobs if j.step == step]

    def replace(self, **changes: Any) -> RunRecords:
        """A copy with ``changes`` (any constructor argument), as :func:`dataclasses.replace` makes."""
        args: dict[str, Any] = {name: getattr(self, name) for name in _FIELDS if name != "jobs"}
        if "columns" not in changes and "jobs" not in changes:
            if self._jobs is not None:
                args["jobs"] = list(self._jobs)
            else:
                args["columns"] = self._columns
        args.update(changes)
        return RunRecords(**args)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunRecords):
            return NotImplemented
        if not (all(getattr(self, f) == getattr(other, f) for f in _FIELDS if f != "jobs") and self.num_jobs == other.num_jobs):
            return False
        if self._jobs is not None and other._jobs is not None:
            return list(self._jobs) == list(other._jobs)
        return _same_jobs(self.columns, other.columns)  # without making either list

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"RunRecords(backend={self.backend!r}, num_ranks={self.num_ranks}, steps={self.steps}, "
                f"jobs={self.num_jobs}, streams={len(self.streams)})")

    def __getstate__(self) -> dict[str, Any]:
        # pickled (mpi) as columns when the list was never made: no object per job on the wire
        state = {name: getattr(self, name) for name in _FIELDS if name != "jobs"}
        state["jobs"] = list(self._jobs) if self._jobs is not None else None
        state["columns"] = self._columns if self._jobs is None else None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]
