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

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, SupportsIndex

from harness.schedule.model import JobKind
from harness.stats import Z95 as _Z95

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


#: The least coverage of the median's interval that can reach the target: five steps' ``[min, max]``
#: (``1 - 2**-4``, 93.75 %); fewer steps give less (two: 50 %), and none below six reaches 95 %.
MIN_TARGET_STEPS = 5

MIN_TARGET_COVERAGE = 1 - 2 ** (1 - MIN_TARGET_STEPS)

#: Why a window stopped recording.
REASONS = {
    "fixed": "the fixed window --profile-steps asked for",
    "exact": "the sim backend is exact: one recorded step is the answer",
    "target": "the relative standard error of the median step time reached the target, and its 95% confidence interval 1.96 times it",
    "budget": "the time budget ran out before the target was reached",
    "max_steps": "the step cap was reached before the target",
}

@dataclass(frozen=True)
class WindowOutcome:
    """How a run's profiling window ended.

    Attributes:
        reason: a key of :data:`REASONS` (``fixed``, ``exact``, ``target``,
            ``budget``, ``max_steps``).
        warmup_steps: steps run before the first recorded one.
        recorded_steps: steps recorded.
        rel_err: the relative standard error of the median step time at the end
            (McKean-Schrader, :func:`harness.stats.median_rel_se`); ``None``
            when fewer than two steps were recorded.
        target: the adaptive window's target relative error, ``None`` for a
            fixed window.
        ci_reach: how far the median's 95 % confidence interval reached at the end,
            relative to the median (:func:`harness.stats.median_ci_reach`); ``None``
            when fewer than two steps were recorded.
        min_steps, max_steps, max_time_ns: the adaptive window's limits
            (``None`` for a fixed window); ``max_time_ns`` in ns of host time.
        elapsed_ns: host time the window took, warm-up included (ns).
    """

    reason: str
    warmup_steps: int
    recorded_steps: int
    rel_err: float | None = None
    target: float | None = None
    min_steps: int | None = None
    max_steps: int | None = None
    max_time_ns: int | None = None
    elapsed_ns: int = 0
    ci_reach: float | None = None

    @property
    def target_missed(self) -> bool:
        """An adaptive window that stopped before its target was reached."""
        return self.reason in ("budget", "max_steps")

    def describe(self) -> str:
        """One line for people: ``"12 steps after 1 warm-up: target 1% reached (0.8%)"``."""
        steps = f"{self.recorded_steps} step{'s' if self.recorded_steps != 1 else ''} after {self.warmup_steps} warm-up"
        err = "" if self.rel_err is None else f" ({100 * self.rel_err:.2f}% rel. error of the median)"
        if (self.target_missed and self.rel_err is not None and self.target and self.rel_err <= self.target
                and self.recorded_steps < MIN_TARGET_STEPS):
            err = (f" ({100 * self.rel_err:.2f}% rel. error of the median, but {self.recorded_steps} steps give its interval "
                   f"only {100 * (1 - 2.0 ** (1 - self.recorded_steps)):g}% coverage; the target needs {MIN_TARGET_STEPS} or more)")
        elif self.target_missed and self.rel_err is not None and self.target and self.rel_err <= self.target and self.ci_reach is not None:
            # the standard error was small enough, the interval the report shows was not
            err = (f" ({100 * self.rel_err:.2f}% rel. error of the median, but its 95% CI reaches "
                   f"±{100 * self.ci_reach:.2f}%, above {100 * _Z95 * self.target:.2f}%)")
        if self.reason == "target":
            return f"{steps}: target {100 * (self.target or 0):g}% reached{err}"
        if self.reason == "budget":
            past = ""
            if self.recorded_steps == self.min_steps and self.max_time_ns is not None and self.elapsed_ns > self.max_time_ns:
                # the budget had run out before the minimum was recorded: the minimum wins, and says so
                past = (f"; the minimum of {self.min_steps} recorded steps wins over it "
                        f"(they took {self.elapsed_ns / 1e9:.3g} s with the warm-up)")
            return f"{steps}: time budget {(self.max_time_ns or 0) / 1e9:g} s ran out before the {100 * (self.target or 0):g}% target{err}{past}"
        if self.reason == "max_steps":
            return f"{steps}: step cap {self.max_steps} reached before the {100 * (self.target or 0):g}% target{err}"
        if self.reason == "exact":
            return f"{steps}: sim is exact, one step is the answer"
        return f"{steps}: fixed window{err}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "description": self.describe()}


# --- checks of recorded jobs against themselves and their steps ---------------------------------
# Checks of recorded jobs against themselves and their steps: a job listed twice, a job outside its step.
#
# Every recorded step runs each job of the schedule once on its rank, so ``(rank, step, kind, stage,
# micro-batch)`` names one job; a second job with the same five is a damaged or hand-edited file (two
# merged part files of one run, a line pasted twice), and the figures computed from it (busy time,
# bubble, in-flight peak) would count that job twice. A step's span, ``[step_start_ns, step_end_ns]``,
# is where the step's jobs ran: the executor takes the step's reference event before any job and its
# latest job end (:func:`harness.run.executor.execute`), the importers the earliest start and latest end of
# the step's jobs, and :func:`harness.distributed.rank_merge.merge_parts` shifts each rank's jobs and its step
# bounds by the same (monotone) map onto rank 0's time base. A job outside its step's span therefore
# never comes from the harness; the step time (the span) would not contain the work it is said to hold.
#
# Both checks are vectorized over numpy columns (a sort for the duplicates), so they cost little at
# 1,000,000 jobs. :mod:`harness.report.fields` runs them on every results-document case (``report``,
# and each case a run writes), :mod:`harness.distributed.rank_merge` on every part file (``merge-ranks``).


def first_duplicate(*columns: np.ndarray) -> tuple[int, int] | None:
    """The first job (in list order) whose key equals an earlier job's, as ``(earlier, later)`` indices.

    Args:
        columns: the key columns, integer arrays of one shape ``(n,)`` (e.g. rank, step, kind code,
            stage, micro-batch with -1 for none).

    Returns:
        ``None`` when every key is distinct; else the indices of the repeated job's earlier
        occurrence and of the first later job that repeats a key.
    """
    import numpy as np

    n = len(columns[0]) if columns else 0
    if n < 2:
        return None
    order = np.lexsort(columns[::-1])  # stable: equal keys keep their list order
    same = np.ones(n - 1, dtype=bool)
    for col in columns:
        ranked = col[order]
        same &= ranked[1:] == ranked[:-1]
    hits = np.flatnonzero(same)
    if not len(hits):
        return None
    later = order[hits + 1]
    k = int(np.argmin(later))
    return int(order[hits[k]]), int(later[k])


def first_outside_step(step: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray, steps: Sequence[int],
                       step_start_ns: Sequence[int], step_end_ns: Sequence[int], slack_ns: int = 0) -> tuple[int, int] | None:
    """The first job that starts before its step's start or ends after its step's end.

    Args:
        step, start_ns, end_ns: the jobs' step numbers and times (ns), int64 arrays of shape ``(n,)``.
        steps, step_start_ns, step_end_ns: the recorded steps and their spans (ns), one entry per step;
            every job's step must be among ``steps``.
        slack_ns: how far (ns) outside its span a job may lie and still pass (0: exactly within).

    Returns:
        ``None`` when every job lies within its step; else ``(job index, step index)``.
    """
    import numpy as np

    if not len(step):
        return None
    numbers = np.asarray(steps, dtype=np.int64)
    if len(numbers) > 1 and not bool((numbers[1:] > numbers[:-1]).all()):  # unsorted steps (refused elsewhere): by lookup
        index_of = {int(s): i for i, s in enumerate(steps)}
        where = np.fromiter((index_of[int(s)] for s in step), dtype=np.int64, count=len(step))
    else:
        where = np.searchsorted(numbers, step)
    lo = np.asarray(step_start_ns, dtype=np.int64)[where] - slack_ns
    hi = np.asarray(step_end_ns, dtype=np.int64)[where] + slack_ns
    hits = np.flatnonzero((start_ns < lo) | (end_ns > hi))
    if not len(hits):
        return None
    return int(hits[0]), int(where[hits[0]])
