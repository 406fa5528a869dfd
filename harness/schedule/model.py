"""The schedule model: jobs, job kinds, stage placement and per-rank job lists.

A *job* is one unit of pipeline work: ``(stage, kind, micro-batch)``. Its chunk
(virtual stage index on its rank) follows from the schedule's placement, so a
job's text form is PyTorch pipelining's compact notation: ``"2F0"`` is stage 2,
forward, micro-batch 0; ``"1SEND_F3"`` sends stage 1's forward output for
micro-batch 3; ``"0OPT"`` is stage 0's optimizer step (no micro-batch).

A *schedule* is one ordered job list per pipeline rank plus the placement of
stages on ranks. Lists may contain ``None`` for an idle slot, which keeps the
step x rank grid of a CSV schedule intact; executors skip idle slots.

Stages are global: with ``p`` ranks and ``v`` chunks per rank there are
``p * v`` stages. Under the *loop* placement stage ``k`` is on rank ``k % p``
(Megatron-LM interleaving); under the *V* placement rank ``r`` holds stages
``r`` and ``2p - 1 - r`` (ZB-V, DualPipeV).
"""

from __future__ import annotations

import enum
import numbers
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, NamedTuple

from harness._gcpause import gc_paused
from harness.errors import ScheduleError

__all__ = [
    "COMM_KINDS",
    "COMPUTE_KINDS",
    "DATA_PARALLEL_KINDS",
    "KIND_CODE",
    "Job",
    "JobKind",
    "Schedule",
    "loop_placement",
    "parse_job",
    "v_placement",
]


class JobKind(str, enum.Enum):
    """What a job does. Values are the tokens of the text form."""

    F = "F"
    """Forward pass of one micro-batch through one stage."""
    B = "B"
    """Full backward (inputs and weights) of one micro-batch."""
    I = "I"
    """Backward for inputs only (ZB's "B"; PyTorch's "I")."""
    W = "W"
    """Backward for weights only."""
    SEND_F = "SEND_F"
    RECV_F = "RECV_F"
    SEND_B = "SEND_B"
    RECV_B = "RECV_B"
    OPT = "OPT"
    """Optimizer step of one stage (no micro-batch)."""
    UNSHARD = "UNSHARD"
    """PyTorch's ``UNSHARD``: gather a stage's sharded parameters (FSDP all-gather) before its compute (no micro-batch)."""
    RESHARD = "RESHARD"
    """PyTorch's ``RESHARD``: free a stage's gathered parameters after its compute (no micro-batch)."""
    REDUCE_GRAD = "REDUCE_GRAD"
    """PyTorch's ``REDUCE_GRAD``: reduce a stage's gradients across data-parallel ranks after its last backward (no micro-batch)."""

    @property
    def is_comm(self) -> bool:
        return self in COMM_KINDS

    @property
    def is_backward(self) -> bool:
        return self in (JobKind.B, JobKind.I, JobKind.W)

    @property
    def is_data_parallel(self) -> bool:
        """An ``UNSHARD``, ``RESHARD`` or ``REDUCE_GRAD`` (:data:`DATA_PARALLEL_KINDS`)."""
        return self in DATA_PARALLEL_KINDS

    @property
    def takes_microbatch(self) -> bool:
        """Whether a job of this kind names a micro-batch (all but ``OPT`` and the data-parallel kinds)."""
        return self not in _PER_STAGE


COMPUTE_KINDS = frozenset({JobKind.F, JobKind.B, JobKind.I, JobKind.W, JobKind.OPT})
COMM_KINDS = frozenset({JobKind.SEND_F, JobKind.RECV_F, JobKind.SEND_B, JobKind.RECV_B})
DATA_PARALLEL_KINDS = frozenset({JobKind.UNSHARD, JobKind.RESHARD, JobKind.REDUCE_GRAD})
"""PyTorch's FSDP/DDP actions (``torch.distributed.pipelining.schedules``: ``_add_unshard_reshard``,
``_add_reduce_grad``): one per stage, no micro-batch, no pipeline data. They run on the rank's
compute stream in list order; their duration is the cost model's (0 unless it gives one,
:meth:`harness.model.cost.FixedCost.duration_ns`), and they are not compute: a rank's busy time and
the bubble leave them out."""
_PER_STAGE = frozenset({JobKind.OPT}) | DATA_PARALLEL_KINDS

_KIND_BY_TOKEN = {k.value: k for k in JobKind}
KIND_CODE: dict[JobKind, int] = {k: i for i, k in enumerate(JobKind)}
"""Each kind's code, its index in ``tuple(JobKind)``: the ``kind`` column of job
arrays (:class:`harness.plan.graph.PlanArrays`). The one table every module uses."""
_COMM_CODES = (KIND_CODE[JobKind.SEND_F], KIND_CODE[JobKind.RECV_B])  # a contiguous range:
assert [KIND_CODE[k] for k in (JobKind.SEND_F, JobKind.RECV_F, JobKind.SEND_B, JobKind.RECV_B)] == list(
    range(_COMM_CODES[0], _COMM_CODES[1] + 1)
), "the send/receive kinds must be declared together (code ranges test them)"
_JOB_RE = re.compile(  # 0-9 only, not '０'
    r"^\s*(\d+)\s*(SEND_F|RECV_F|SEND_B|RECV_B|OPT|UNSHARD|RESHARD|REDUCE_GRAD|F|B|I|W)\s*(\d+)?\s*$", re.ASCII
)


class Job(NamedTuple):
    """One job: ``stage`` (global stage index), ``kind``, ``microbatch``.

    ``microbatch`` is ``None`` only for :attr:`JobKind.OPT` and the
    :data:`DATA_PARALLEL_KINDS` (``"0UNSHARD"``). ``str(job)`` is
    the compact text form (``"2F0"``); :func:`parse_job` reads it back.
    """

    stage: int
    kind: JobKind
    microbatch: int | None

    def __str__(self) -> str:
        if self.microbatch is None:
            return f"{self.stage}{self.kind.value}"
        return f"{self.stage}{self.kind.value}{self.microbatch}"

    def __repr__(self) -> str:
        return f"Job({self})"


_KIND_IDS: list[Any] = []  # numpy arrays, made on first use: sorted id() of the kinds, their codes


def _kind_codes(jobs: Sequence[Job]) -> Any:
    """Per job its kind's index in ``tuple(JobKind)`` as a numpy int64 array;
    ``-1`` where the kind is not a :class:`JobKind` member. Looks kinds up by
    ``id`` in C: hashing an Enum member is a Python-level call."""
    import numpy as np

    if not _KIND_IDS:
        pairs = sorted((id(k), code) for k, code in KIND_CODE.items())
        _KIND_IDS.extend((np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64)))
    ids, codes = _KIND_IDS
    found = np.fromiter(map(id, map(_KIND_FIELD, jobs)), np.int64, len(jobs))
    at = np.searchsorted(ids, found).clip(0, len(ids) - 1)
    return np.where(ids[at] == found, codes[at], -1)


_KIND_FIELD = itemgetter(1)
_MB_FIELD = itemgetter(2)
_INT_OR_NONE = frozenset({int, type(None)})


class _JobArrays(NamedTuple):
    """A schedule's non-idle jobs, rank by rank, as numpy int64 arrays: stage,
    kind code (index in ``tuple(JobKind)``) and micro-batch (-1 for ``None``);
    ``counts`` is the number of non-idle jobs per rank."""

    stage: Any
    kind: Any
    mb: Any
    counts: list[int]


def _job_arrays(schedule: Schedule) -> _JobArrays | None:
    """The schedule's :class:`_JobArrays`, cached on it (attribute ``_arrays``,
    not a field: a schedule is immutable). ``None`` when a job's fields are not
    plain (a kind that is not a :class:`JobKind`, a stage that is not an
    ``int``, a micro-batch that is neither ``None`` nor an ``int >= 0``)."""
    cache = schedule.__dict__
    if "_arrays" in cache:
        return cache["_arrays"]  # type: ignore[no-any-return]
    import numpy as np

    rows = schedule.ranks
    jobs: list[Job] = list(chain.from_iterable(row if None not in row else filter(None, row) for row in rows))  # type: ignore[misc]
    counts = [len(row) - row.count(None) if None in row else len(row) for row in rows]
    found: _JobArrays | None = None
    kind = _kind_codes(jobs)
    stages = list(map(_STAGE_FIELD, jobs))
    mbs = list(map(_MB_FIELD, jobs))
    if (not jobs or int(kind.min()) >= 0) and set(map(type, stages)) <= {int} and set(map(type, mbs)) <= _INT_OR_NONE:
        n_none = mbs.count(None)
        mb = np.array([-1 if b is None else b for b in mbs] if n_none else mbs, np.int64)
        if int((mb < 0).sum()) == n_none:
            found = _JobArrays(np.array(stages, np.int64), kind, mb, counts)
            _read_only(found)
    object.__setattr__(schedule, "_arrays", found)
    return found


def _read_only(columns: Iterable[Any]) -> None:
    """Make the numpy arrays among ``columns`` read-only (job arrays and plan
    columns are shared between schedules and plans, which never change)."""
    for column in columns:
        if hasattr(column, "setflags"):
            column.setflags(write=False)


@gc_paused
def _rows_of(arrays: _JobArrays) -> tuple[tuple[Job, ...], ...]:
    """Per rank, the :class:`Job` objects of ``arrays`` (a schedule without idle
    slots): the rows of a schedule made by :meth:`Schedule._from_arrays`."""
    if not _KIND_OBJECTS:
        import numpy as np

        table = np.empty(len(JobKind), object)
        table[:] = tuple(JobKind)
        _KIND_OBJECTS.append(table)
    stage, kind, mb, counts = arrays
    mbs = mb.tolist()
    if len(mbs) and min(mbs) < 0:
        mbs = [None if b < 0 else b for b in mbs]
    flat = list(map(_NEW_TUPLE, repeat(Job), zip(stage.tolist(), _KIND_OBJECTS[0][kind].tolist(), mbs)))
    rows = []
    lo = 0
    for c in counts:
        rows.append(tuple(flat[lo : lo + c]))
        lo += c
    return tuple(rows)


_KIND_OBJECTS: list[Any] = []  # the JobKind members in a numpy object array, made on first use
_NEW_TUPLE = tuple.__new__
_STAGE_FIELD = itemgetter(0)
_JOB_OR_NONE = frozenset({Job, type(None)})
_INT_TYPE = frozenset({int})
_KIND_TYPE = frozenset({JobKind})
_JOBS_CHECKED: ContextVar[bool] = ContextVar("_JOBS_CHECKED", default=False)


def parse_job(text: str) -> Job:
    """Parse the compact text form of a job (``"2F0"``, ``"0SEND_B3"``, ``"1OPT"``, ``"1UNSHARD"``).

    Raises:
        ScheduleError: the text is not a job; the message shows the expected form.
    """
    match = _JOB_RE.match(text)
    if match is None:
        raise ScheduleError(
            f"cannot read job {text!r}: expected <stage><kind><micro-batch> such as '2F0', "
            f"with kind one of {', '.join(k.value for k in JobKind)} (OPT, UNSHARD, RESHARD and REDUCE_GRAD take no micro-batch)",
            (text,),
        )
    stage, token, mb = match.groups()
    kind = _KIND_BY_TOKEN[token]
    if not kind.takes_microbatch:
        if mb is not None:
            raise ScheduleError(f"cannot read job {text!r}: {token} takes no micro-batch (write '{stage}{token}')", (text,))
        return Job(int(stage), kind, None)
    if mb is None:
        raise ScheduleError(f"cannot read job {text!r}: a {token} job needs a micro-batch, e.g. '{stage}{token}0'", (text,))
    return Job(int(stage), kind, int(mb))


def loop_placement(num_ranks: int, chunks: int = 1) -> tuple[int, ...]:
    """Stage-to-rank map of the loop (round-robin) placement: stage ``k`` on rank ``k % p``.

    Returns a tuple of length ``num_ranks * chunks``.
    """
    return tuple(k % num_ranks for k in range(num_ranks * chunks))


def v_placement(num_ranks: int) -> tuple[int, ...]:
    """Stage-to-rank map of the V placement (ZB-V, DualPipeV): rank ``r`` holds stages
    ``r`` and ``2p - 1 - r``. Returns a tuple of length ``2 * num_ranks``."""
    return tuple(k if k < num_ranks else 2 * num_ranks - 1 - k for k in range(2 * num_ranks))


@dataclass(frozen=True)
class Schedule:
    """A pipeline schedule: one ordered job list per rank and the stage placement.

    Attributes:
        name: the schedule's name (builder name or file name), for reports.
        num_microbatches: ``m``, micro-batches per step.
        stage_to_rank: rank of each global stage; its length is the stage count
            ``p * v``. Chunk ``c`` of a rank is its ``c``-th stage in index order.
        ranks: per rank, the jobs in execution order; ``None`` marks an idle slot.
            Schedules from the numpy builders and from
            :func:`~harness.schedule.passes.add_communication` hold their jobs
            as arrays and make these rows on first access (thread-safe, once).
        params: builder parameters worth reporting (e.g. ``{"v": 2}``).

    Raises:
        ScheduleError: on construction, if the shape is inconsistent (a rank
            without a list, a stage index out of range, a job listed on a rank
            that does not hold its stage).
    """

    name: str
    num_microbatches: int
    stage_to_rank: tuple[int, ...]
    ranks: tuple[tuple[Job | None, ...], ...]
    params: dict[str, object] = field(default_factory=dict, compare=False)
    _chunk_of: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        m = self.num_microbatches
        if not isinstance(m, numbers.Integral) or isinstance(m, bool) or m < 1:
            raise ScheduleError(f"schedule {self.name!r}: the number of micro-batches must be a positive integer, got {m!r}")
        object.__setattr__(self, "num_microbatches", int(m))  # a numpy integer becomes a plain one
        object.__setattr__(self, "stage_to_rank", tuple(self.stage_to_rank))
        object.__setattr__(self, "ranks", tuple(tuple(r) for r in self.ranks))
        p = len(self.ranks)
        if p < 1:
            raise ScheduleError(f"schedule {self.name!r} has no ranks")
        if not self.stage_to_rank:
            raise ScheduleError(f"schedule {self.name!r} places no stages")
        counts = [0] * p
        chunk_of = []
        for stage, rank in enumerate(self.stage_to_rank):
            if not 0 <= rank < p:
                raise ScheduleError(f"schedule {self.name!r}: stage {stage} is placed on rank {rank}, but there are {p} ranks")
            chunk_of.append(counts[rank])
            counts[rank] += 1
        object.__setattr__(self, "_chunk_of", tuple(chunk_of))
        if _JOBS_CHECKED.get():
            return
        n_stages = len(self.stage_to_rank)
        held: list[set[int]] = [set() for _ in range(p)]
        for stage, rank in enumerate(self.stage_to_rank):
            held[rank].add(stage)
        for rank, jobs in enumerate(self.ranks):
            # Fast check in C: only Job/None entries, integer stages held by the rank, JobKind kinds,
            # micro-batches int or None.
            if set(map(type, jobs)) <= _JOB_OR_NONE:
                present = list(filter(None, jobs))
                # Types compared as types: a set of values would merge 0.0 into 0 and 'F' into JobKind.F.
                if (
                    set(map(_STAGE_FIELD, present)) <= held[rank]
                    and set(map(type, map(_STAGE_FIELD, present))) <= _INT_TYPE
                    and set(map(type, map(_KIND_FIELD, present))) <= _KIND_TYPE
                    and set(map(type, map(_MB_FIELD, present))) <= _INT_OR_NONE
                    and all(j[2] is None for j in present if j[1] in _PER_STAGE)
                ):
                    continue
            for step, job in enumerate(jobs):
                if job is None:
                    continue
                self._check_job_fields(rank, step, job)
                if not 0 <= job.stage < n_stages:
                    raise ScheduleError(
                        f"schedule {self.name!r}: job {job} on rank {rank} (step {step}) names stage {job.stage}, "
                        f"but the pipeline has stages 0..{n_stages - 1}" + self._grid_note(rank, step, f"stage {job.stage} does not exist"),
                        (str(job),),
                    )
                if self.stage_to_rank[job.stage] != rank:
                    home = self.stage_to_rank[job.stage]
                    raise ScheduleError(
                        f"schedule {self.name!r}: job {job} is listed on rank {rank} (step {step}), "
                        f"but stage {job.stage} is placed on rank {home}"
                        + self._grid_note(rank, step, f"stage {job.stage} lives on rank {home}: a stage's jobs are all on its rank"),
                        (str(job),),
                    )

    def _grid_note(self, rank: int, step: int, note: str) -> str:
        """The grid with ``(rank, step)`` marked, on lines below a message; ``""`` when the rows
        cannot be drawn yet (another entry is not a valid job)."""
        try:
            return "\n" + self.format_grid({(rank, step): note})
        except Exception:  # drawing is a courtesy: the message stands without it
            return ""

    def _check_job_fields(self, rank: int, step: int, job: object) -> None:
        """A row entry is a :class:`Job` of an int stage, a :class:`JobKind` and an int micro-batch
        ``>= 0`` (``None`` for ``OPT`` and the data-parallel kinds only), else a :class:`ScheduleError` naming rank and step."""
        where = f"schedule {self.name!r}: rank {rank}, step {step}:"
        if not isinstance(job, Job):
            raise ScheduleError(f"{where} {job!r} is not a Job; write Job(stage, JobKind.F, microbatch), or None for an idle slot")
        stage, kind, mb = tuple(job)
        shown = f"Job({stage!r}, {f'JobKind.{kind.name}' if isinstance(kind, JobKind) else repr(kind)}, {mb!r})"
        if not isinstance(kind, JobKind):
            raise ScheduleError(f"{where} {shown} has kind {kind!r}, not a JobKind (e.g. JobKind.F)")
        if type(stage) is not int:
            raise ScheduleError(f"{where} {shown} has stage {stage!r}, not an integer")
        if not kind.takes_microbatch:
            if mb is not None:
                raise ScheduleError(
                    f"{where} {shown}: an {kind.value} job takes no micro-batch (write Job({stage}, JobKind.{kind.name}, None))", (str(job),))
        elif type(mb) is not int or mb < 0:
            raise ScheduleError(f"{where} {shown} has micro-batch {mb!r}, not an integer >= 0", (f"{stage}{kind.value}",))

    @classmethod
    def _of_checked_jobs(
        cls, name: str, num_microbatches: int, stage_to_rank: tuple[int, ...], ranks: tuple[tuple[Job | None, ...], ...], params: dict[str, object]
    ) -> Schedule:
        """Construct without the per-job checks, for passes and builders whose
        rows hold only :class:`Job` objects with integer stages on the ranks that
        hold them by construction (the placement checks still run)."""
        token = _JOBS_CHECKED.set(True)
        try:
            return cls(name, num_microbatches, stage_to_rank, ranks, params)
        finally:
            _JOBS_CHECKED.reset(token)

    @classmethod
    def _from_arrays(
        cls, name: str, num_microbatches: int, stage_to_rank: tuple[int, ...], arrays: _JobArrays, params: dict[str, object]
    ) -> Schedule:
        """A schedule held as job arrays (see :class:`_JobArrays`, no idle slots),
        for builders and passes that compute their jobs with numpy. Its ``ranks``
        are made from the arrays on first access (:class:`_RowsFromArrays`), so a
        pipeline that only validates and simulates never creates per-job objects.
        The arrays' jobs must sit on the ranks that hold their stages (as
        :meth:`_of_checked_jobs`); the placement itself is checked."""
        schedule = cls._of_checked_jobs(name, num_microbatches, stage_to_rank, ((),) * len(arrays.counts), params)
        del schedule.__dict__["ranks"]
        _read_only(arrays)  # the only record of the jobs: nobody may change it
        object.__setattr__(schedule, "_arrays", arrays)
        return schedule

    def __getstate__(self) -> dict[str, Any]:
        # rows made from the arrays are not pickled or deep-copied: they are made again on first access
        state = self.__dict__
        if state.get("_rows_made"):
            state = {k: v for k, v in state.items() if k not in ("ranks", "_rows_made")}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # pickle and copy.deepcopy make new, writable arrays: keep them read-only
        self.__dict__.update(state)
        _read_only(state.get("_arrays") or ())

    def _lazy_arrays(self) -> _JobArrays | None:
        """The job arrays of a schedule whose ``ranks`` are not made yet, else ``None``."""
        d = self.__dict__
        return None if "ranks" in d else d.get("_arrays")

    # --- shape -----------------------------------------------------------
    @property
    def num_ranks(self) -> int:
        """``p``: number of pipeline ranks (devices)."""
        arrays = self._lazy_arrays()
        return len(self.ranks) if arrays is None else len(arrays.counts)

    @property
    def num_stages(self) -> int:
        """Number of global stages, ``p * v`` for uniform placements."""
        return len(self.stage_to_rank)

    @property
    def chunks_per_rank(self) -> int:
        """``v``: the largest number of stages (chunks) held by one rank."""
        counts = [0] * self.num_ranks
        for r in self.stage_to_rank:
            counts[r] += 1
        return max(counts)

    def chunk_of(self, stage: int) -> int:
        """Chunk (virtual stage) index of ``stage`` on its rank."""
        return self._chunk_of[stage]

    def rank_of(self, stage: int) -> int:
        """Rank that holds ``stage``."""
        return self.stage_to_rank[stage]

    def stages_of(self, rank: int) -> list[int]:
        """Stages held by ``rank``, in chunk order."""
        return [k for k, r in enumerate(self.stage_to_rank) if r == rank]

    @property
    def has_comm(self) -> bool:
        """Whether the schedule carries explicit send/receive jobs."""
        arrays = _job_arrays(self)  # made from the rows (once, cached), or the rows are made from it
        if arrays is not None:
            return bool(((arrays.kind >= _COMM_CODES[0]) & (arrays.kind <= _COMM_CODES[1])).any())
        return any(j is not None and j.kind.is_comm for jobs in self.ranks for j in jobs)

    def jobs(self) -> Iterator[tuple[int, int, Job]]:
        """Yield ``(rank, step, job)`` for every non-idle slot, rank by rank."""
        for rank, jobs in enumerate(self.ranks):
            for step, job in enumerate(jobs):
                if job is not None:
                    yield rank, step, job

    @property
    def num_jobs(self) -> int:
        """Number of non-idle jobs, all ranks together."""
        arrays = self.__dict__.get("_arrays")
        if arrays is not None:
            return sum(arrays.counts)
        return sum(1 for jobs in self.ranks for j in jobs if j is not None)

    # --- text ------------------------------------------------------------
    def to_text(self) -> list[list[str]]:
        """Per rank, the jobs as text (``""`` for an idle slot)."""
        return [["" if j is None else str(j) for j in jobs] for jobs in self.ranks]

    @classmethod
    def from_text(
        cls,
        name: str,
        rows: Sequence[Iterable[str]],
        num_microbatches: int,
        stage_to_rank: Sequence[int] | None = None,
        params: dict[str, object] | None = None,
    ) -> Schedule:
        """Build a schedule from per-rank lists of job texts (``""`` = idle).

        ``stage_to_rank`` defaults to the loop placement with as many chunks as
        the highest stage index needs.

        Raises:
            ScheduleError: a cell is not a job (names rank and step).
        """
        ranks: list[list[Job | None]] = []
        for rank, row in enumerate(rows):
            jobs: list[Job | None] = []
            for step, cell in enumerate(row):
                if cell is None or not str(cell).strip():
                    jobs.append(None)
                    continue
                try:
                    jobs.append(parse_job(str(cell)))
                except ScheduleError as exc:
                    raise ScheduleError(f"{name}: rank {rank}, step {step}: {exc}", exc.jobs) from None
            ranks.append(jobs)
        if stage_to_rank is None:
            p = len(ranks)
            top = max((j.stage for jobs in ranks for j in jobs if j is not None), default=p - 1)
            chunks = top // p + 1 if p else 1
            stage_to_rank = loop_placement(p, chunks)
        return cls(name, num_microbatches, tuple(stage_to_rank), tuple(tuple(r) for r in ranks), dict(params or {}))

    def format_grid(self, marks: dict[tuple[int, int], str] | None = None, max_steps: int = 200) -> str:
        """Draw the step x rank grid: one row per step, one column per rank.

        ``marks`` maps ``(rank, step)`` to a short note; marked cells get a
        ``>>`` prefix and the notes are listed under the grid. Grids longer than
        ``max_steps`` rows are cut around the marked cells (and the first
        steps); each cut is a line saying how many steps it hides.
        """
        marks = marks or {}
        n_steps = max((len(r) for r in self.ranks), default=0)
        cells = [["" if j is None else str(j) for j in jobs] for jobs in self.ranks]
        width = max([len(c) for col in cells for c in col] + [len(f"rank {self.num_ranks - 1}")]) + 4
        rows_to_show = list(range(n_steps))
        if n_steps > max_steps:
            keep: set[int] = set(range(min(5, n_steps)))
            for _, step in marks:
                keep.update(range(max(0, step - 3), min(n_steps, step + 4)))
            rows_to_show = sorted(keep)
        header = "step  " + "".join(f"rank {r}".ljust(width) for r in range(self.num_ranks))
        lines = [header.rstrip()]
        prev = -1
        for step in rows_to_show:
            if step != prev + 1:
                lines.append(f"  ... ({step - prev - 1} steps not shown)")
            prev = step
            row = []
            for rank in range(self.num_ranks):
                text = cells[rank][step] if step < len(cells[rank]) else ""
                text = text or "."
                if (rank, step) in marks:
                    text = ">>" + text
                row.append(text.ljust(width))
            lines.append(f"{step:<5} " + "".join(row).rstrip())
        if prev < n_steps - 1:
            lines.append(f"  ... ({n_steps - 1 - prev} more steps, {n_steps} in all)")
        for (rank, step), note in sorted(marks.items()):
            lines.append(f">> rank {rank}, step {step}: {note}")
        return "\n".join(lines)


class _RowsFromArrays:
    """``Schedule.ranks`` for a schedule made by :meth:`Schedule._from_arrays`:
    a non-data descriptor, so rows already in the instance's ``__dict__`` (every
    other schedule, and this one after first access) are found before it. Made
    under a lock, once, also when several threads ask at the same time."""

    _lock = threading.Lock()

    def __get__(self, schedule: Schedule | None, owner: type | None = None) -> Any:
        if schedule is None:
            return self
        d = schedule.__dict__
        with self._lock:
            if "ranks" not in d:
                arrays = d.get("_arrays")
                if arrays is None:
                    raise AttributeError("'Schedule' object has no attribute 'ranks'")
                d["ranks"] = _rows_of(arrays)
                d["_rows_made"] = True  # not pickled (Schedule.__getstate__)
        return d["ranks"]


Schedule.ranks = _RowsFromArrays()  # type: ignore[assignment]  # after @dataclass, which saw no default
