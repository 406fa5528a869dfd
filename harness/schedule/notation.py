"""Text forms of schedules: PyTorch pipeline CSV and PaddlePaddle job names.

**PyTorch pipeline CSV** (``torch.distributed.pipelining.schedules``,
``_PipelineScheduleRuntime._dump_csv`` / ``_load_csv``): one row per rank, one
action per cell in PyTorch's compact notation (``2F0``, ``3SEND_F1``), an empty
cell is an idle slot. Both the compute-only form and the form with
``SEND_F``/``RECV_F``/``SEND_B``/``RECV_B`` are read and written; writing then
reading gives back the same schedule (idle slots included).

How cells are read:

* ``F``, ``I``, ``W``, ``B`` and the four send/receive kinds keep their meaning;
  ``OPT`` (this harness's optimizer step) is accepted too.
* ``B`` is PyTorch's *full* backward. Some files in the wild write ``B``
  together with ``W`` for the split form (``B`` meaning backward-for-inputs, as
  in the zero-bubble paper). Rule: when the file holds a ``W`` for the same stage
  and micro-batch, that ``B`` is read as ``I``; otherwise it stays a full ``B``.
* ``UNSHARD``, ``RESHARD`` and ``REDUCE_GRAD`` (FSDP and gradient-reduction
  actions, no pipeline data) are read as idle slots.
* A composite cell ``(0F3;5B1)OVERLAP_F_B`` (PyTorch's DualPipeV writes them) is
  read as its sub-actions in the written order, kept as one overlapped job
  group (:mod:`harness.overlap`: they run at the same time). Its jobs take
  consecutive steps, so a row's later steps no longer match its cell numbers;
  it is written back as one composite cell.
* Stage placement is taken from where the stages appear: every stage must
  appear on exactly one rank, and the stages must be ``0..S-1``.
* ``m`` is the largest micro-batch index plus one unless given.

**PaddlePaddle job names** (``paddle.distributed.passes.pipeline_scheduler_pass``):
``forward``, ``backward``, ``backward_b``, ``backward_w``, ``optimizer``, with an
optional chunk suffix in VPP/ZB-VPP (``forward0``, ``backward_w1``). A job list
is one ``(type, micro_batch_id)`` sequence per rank.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from harness.errors import InputFormatError, ScheduleError
from harness.schedule.model import Job, JobKind, Schedule, loop_placement, parse_job, v_placement
from harness.schedule.validate import check_counts, check_order

__all__ = [
    "dump_csv",
    "dumps_csv",
    "from_paddle_jobs",
    "load_csv",
    "load_schedule_file",
    "loads_csv",
    "paddle_type",
    "parse_paddle_type",
    "to_paddle_jobs",
]

_IGNORED = re.compile(r"^\s*\d*\s*(UNSHARD|RESHARD|REDUCE_GRAD)\s*\d*\s*$", re.ASCII)
#: PyTorch's composite action, ``(0F3;5B1)OVERLAP_F_B`` (``_Action.sub_actions``): its sub-actions, in order.
_OVERLAP = re.compile(r"^\s*\((.*)\)\s*OVERLAP_F_B\s*$")


# --- PyTorch CSV ------------------------------------------------------------------
def dumps_csv(schedule: Schedule) -> str:
    """The schedule as PyTorch pipeline CSV text: one row per rank, ``""`` for idle slots.

    Trailing idle slots are not written (PyTorch's ``_dump_csv`` writes lists as they are).
    """
    from harness.overlap import groups_of

    first_of = {g[0]: g for g in groups_of(schedule)}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for jobs in schedule.ranks:
        row: list[str] = []
        i = 0
        while i < len(jobs):
            job = jobs[i]
            group = first_of.get(job) if job is not None else None
            if group is not None and tuple(jobs[i : i + len(group)]) == group:  # written as PyTorch's composite cell
                row.append("(" + ";".join(map(str, group)) + ")OVERLAP_F_B")
                i += len(group)
                continue
            row.append("" if job is None else str(job))
            i += 1
        while row and not row[-1]:
            row.pop()
        writer.writerow(row)
    return out.getvalue()


def dump_csv(schedule: Schedule, path: str | Path) -> None:
    """Write ``schedule`` to ``path`` as PyTorch pipeline CSV (see :func:`dumps_csv`)."""
    Path(path).write_text(dumps_csv(schedule), encoding="utf-8")


def loads_csv(text: str, name: str = "<csv>", num_microbatches: int | None = None) -> Schedule:
    """Read PyTorch pipeline CSV text into a :class:`Schedule` (rules in the module doc).

    Args:
        text: the CSV content.
        name: the schedule's name, used in messages (the file name for files).
        num_microbatches: ``m``; inferred (largest micro-batch + 1) when ``None``.

    Raises:
        ScheduleError: a cell is not an action, a stage appears on two ranks,
            a stage is missing, or jobs are missing or listed twice; the message
            names the file (``name``), the row (rank) and the cell (step).
        InputFormatError: the text has no rows.
    """
    rows = list(csv.reader(io.StringIO(text)))
    while rows and not any(c.strip() for c in rows[-1]):
        rows.pop()
    if not rows:
        raise InputFormatError(f"{name}: empty schedule file (expected one row per rank)")
    parsed: list[list[Job | None]] = []
    where: dict[int, tuple[int, int]] = {}  # stage -> first (row, cell) seen
    overlapped: list[tuple[int, int, int]] = []  # (row, first position, jobs) of each OVERLAP_F_B cell
    for r, row in enumerate(rows):
        jobs: list[Job | None] = []
        for c, cell in enumerate(row):
            if not cell.strip() or _IGNORED.match(cell):
                jobs.append(None)
                continue
            overlap = _OVERLAP.match(cell)
            if overlap:
                overlapped.append((r, len(jobs), overlap.group(1).count(";") + 1))
            for text in overlap.group(1).split(";") if overlap else (cell,):
                try:
                    job = parse_job(text.strip() if overlap else text)
                except ScheduleError as exc:
                    inside = f"in {cell.strip()!r}: " if overlap else ""
                    raise ScheduleError(f"{name}: row {r + 1} (rank {r}), cell {c + 1} (step {len(jobs)}): {inside}{exc}", exc.jobs) from None
                first = where.setdefault(job.stage, (r, c))
                if first[0] != r:
                    raise ScheduleError(
                        f"{name}: row {r + 1} (rank {r}), cell {c + 1} (step {len(jobs)}): {job} puts stage {job.stage} on rank {r}, "
                        f"but row {first[0] + 1} cell {first[1] + 1} already put it on rank {first[0]}; "
                        "each stage must live on exactly one rank",
                        (str(job),),
                    )
                jobs.append(job)
        parsed.append(jobs)
    if not where:
        raise InputFormatError(f"{name}: no actions in the file")
    n_stages = max(where) + 1
    n_absent = n_stages - len(where)
    if n_absent:
        absent = []  # the first few, found without walking a huge range
        for k in range(n_stages):
            if k not in where:
                absent.append(str(k))
                if len(absent) == 12:
                    break
        more = f" (and {n_absent - len(absent)} more)" if n_absent > len(absent) else ""
        raise ScheduleError(
            f"{name}: stage(s) {', '.join(absent)}{more} appear on no row, but stage {n_stages - 1} does; stages must be numbered 0..S-1"
        )
    placement = tuple(where[k][0] for k in range(n_stages))
    empty = sorted(set(range(len(rows))) - set(placement))
    if empty:
        r = empty[0]
        raise ScheduleError(
            f"{name}: row {r + 1} (rank {r}) has no jobs; every row is a rank that holds at least one stage "
            "(a blank line inside the file?)"
        )
    rewritten = _read_b_as_i(parsed)
    m = num_microbatches
    if m is None:
        m = 1 + max((j.microbatch for row in parsed for j in row if j is not None and j.microbatch is not None), default=0)
        _check_size(name, parsed, m, n_stages)
    params: dict[str, object] = {"source": name}
    if overlapped:  # after the B-as-I rule, so the groups name the jobs as read
        params["overlap"] = tuple(tuple(parsed[r][i : i + n]) for r, i, n in overlapped)
    sched = Schedule(name, m, placement, tuple(tuple(r) for r in parsed), params)
    try:  # the messages name the schedule, i.e. the file
        check_counts(sched)
        check_order(sched)
    except ScheduleError as exc:
        if not rewritten:
            raise
        was = {b.replace("B", "I", 1): b for b in rewritten}
        shown = [was[j] for j in exc.jobs if j in was] or rewritten[:1]  # the jobs in the order the message names them
        raise ScheduleError(
            f"{exc}\n(this file writes backward-for-inputs as B: a B whose stage and micro-batch also have a W "
            f"is read as I, so the file's {shown[0]} is {shown[0].replace('B', 'I', 1)} above)",
            exc.jobs,
        ) from None
    return sched


def _check_size(name: str, parsed: list[list[Job | None]], m: int, n_stages: int) -> None:
    """Refuse an inferred ``m`` whose schedule would have more than
    :data:`~harness.schedule.builders.MAX_JOBS` jobs: a micro-batch id far too large for
    the file, named with its row and step (rather than counting billions of missing jobs)."""
    from harness.schedule.builders import MAX_JOBS

    if 2 * n_stages * m <= MAX_JOBS:
        return
    r, step, job = max(((r, k, j) for r, row in enumerate(parsed) for k, j in enumerate(row) if j is not None and j.microbatch is not None),
                       key=lambda t: t[2].microbatch)
    raise ScheduleError(
        f"{name}: row {r + 1} (rank {r}), step {step}: {job} names micro-batch {job.microbatch}, so the file would need "
        f"{m:,} micro-batches ({2 * n_stages * m:,} jobs, more than the {MAX_JOBS:,} this harness builds); is the id a typo?",
        (str(job),),
    )


def _read_b_as_i(rows: list[list[Job | None]]) -> list[str]:
    """Apply the ``B``-with-``W`` rule in place: a ``B`` whose ``W`` is listed becomes ``I``.
    Returns the text of the rewritten jobs as the file has them (``"0B3"``)."""
    has_w = {(j.stage, j.microbatch) for row in rows for j in row if j is not None and j.kind is JobKind.W}
    done: list[str] = []
    if not has_w:
        return done
    for row in rows:
        for c, j in enumerate(row):
            if j is not None and j.kind is JobKind.B and (j.stage, j.microbatch) in has_w:
                row[c] = Job(j.stage, JobKind.I, j.microbatch)
                done.append(str(j))
    return done


def load_csv(path: str | Path, num_microbatches: int | None = None) -> Schedule:
    """Read a PyTorch pipeline CSV file (see :func:`loads_csv`).

    Raises:
        InputFormatError: the file cannot be read or is empty.
        ScheduleError: see :func:`loads_csv`; messages start with the file path.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFormatError(f"{p}: cannot read schedule file: {exc}") from None
    return loads_csv(text, name=str(p), num_microbatches=num_microbatches)


def load_schedule_file(path: str | Path, num_microbatches: int | None = None) -> Schedule:
    """Load a schedule file; the format follows the suffix.

    ``.csv``: PyTorch pipeline CSV (:func:`load_csv`). The schedule's name is the
    file name. ``m`` is inferred from the file when ``num_microbatches`` is ``None``.

    Raises:
        InputFormatError: unknown suffix, unreadable or empty file.
        ScheduleError: a malformed cell, a stage on two ranks, missing or
            duplicate jobs (message names file, row and cell).
    """
    p = Path(path)
    if p.is_dir():
        raise InputFormatError(f"{p}: is a directory, not a schedule file (a PyTorch pipeline .csv)")
    if p.suffix.lower() != ".csv":
        raise InputFormatError(f"{p}: unknown schedule file type {p.suffix!r}; expected a PyTorch pipeline .csv")
    sched = load_csv(p, num_microbatches)
    return Schedule(p.name, sched.num_microbatches, sched.stage_to_rank, sched.ranks, {"source": str(p)})


# --- PaddlePaddle job names -------------------------------------------------------
_PADDLE_KIND = {
    "forward": JobKind.F,
    "backward": JobKind.B,
    "backward_b": JobKind.I,
    "backward_w": JobKind.W,
    "optimizer": JobKind.OPT,
}
_PADDLE_NAME = {v: k for k, v in _PADDLE_KIND.items()}
_PADDLE_RE = re.compile(r"^(forward|backward_b|backward_w|backward|optimizer)(\d*)$", re.ASCII)


def parse_paddle_type(name: str) -> tuple[JobKind, int | None]:
    """Read a PaddlePaddle job type (``"backward_w1"``) as ``(kind, chunk)``;
    ``chunk`` is ``None`` without a suffix.

    Raises:
        ScheduleError: not one of ``forward``, ``backward``, ``backward_b``,
            ``backward_w``, ``optimizer`` with an optional number.
    """
    match = _PADDLE_RE.match(name.strip())
    if match is None:
        raise ScheduleError(
            f"cannot read PaddlePaddle job type {name!r}: expected forward, backward, backward_b, backward_w "
            "or optimizer, optionally followed by a chunk number (forward0)",
            (name,),
        )
    kind = _PADDLE_KIND[match.group(1)]
    return kind, int(match.group(2)) if match.group(2) else None


def paddle_type(kind: JobKind, chunk: int | None = None) -> str:
    """PaddlePaddle's job type for ``kind`` (``"backward_b"``), with ``chunk`` appended when given.

    Raises:
        ScheduleError: ``kind`` is a send/receive (PaddlePaddle has no job for it).
    """
    if kind not in _PADDLE_NAME:
        raise ScheduleError(f"PaddlePaddle job lists have no {kind.value} job")
    return _PADDLE_NAME[kind] + ("" if chunk is None else str(chunk))


def to_paddle_jobs(schedule: Schedule, chunk_suffix: bool | None = None) -> list[list[tuple[str, int | None]]]:
    """Per rank, the compute jobs as PaddlePaddle ``(type, micro_batch_id)`` pairs.

    Args:
        schedule: the schedule; idle slots and send/receive jobs are left out.
        chunk_suffix: append the chunk index (``forward0``); default when ranks
            hold more than one chunk.
    """
    suffix = schedule.chunks_per_rank > 1 if chunk_suffix is None else chunk_suffix
    out: list[list[tuple[str, int | None]]] = []
    for jobs in schedule.ranks:
        row = []
        for job in jobs:
            if job is None or job.kind.is_comm:
                continue
            row.append((paddle_type(job.kind, schedule.chunk_of(job.stage) if suffix else None), job.microbatch))
        out.append(row)
    return out


def from_paddle_jobs(
    name: str,
    rows: Sequence[Iterable[tuple[str, int | None]]],
    num_microbatches: int | None = None,
    placement: str = "loop",
) -> Schedule:
    """Build a schedule from per-rank PaddlePaddle ``(type, micro_batch_id)`` lists.

    Args:
        name: schedule name for reports and messages.
        rows: one list per rank.
        num_microbatches: ``m``; inferred (largest id + 1) when ``None``.
        placement: ``"loop"`` (VPP: chunk ``c`` of rank ``r`` is stage ``c p + r``)
            or ``"v"`` (ZB-V: chunks 0 and 1 of rank ``r`` are stages ``r`` and ``2p-1-r``).

    Raises:
        ScheduleError: an unknown type or a micro-batch id that is not an
            integer >= 0 (names rank and position), a chunk that the placement
            does not have, or missing/duplicate jobs.
        ConfigError: unknown ``placement``.
    """
    from harness.errors import ConfigError

    p = len(rows)
    parsed: list[list[tuple[JobKind, int, int | None]]] = []
    top_chunk = 0
    for r, row in enumerate(rows):
        items = []
        for pos, (typ, mb) in enumerate(row):
            try:
                kind, chunk = parse_paddle_type(typ)
            except ScheduleError as exc:
                raise ScheduleError(f"{name}: rank {r}, job {pos}: {exc}", exc.jobs) from None
            if kind is not JobKind.OPT and (not isinstance(mb, int) or isinstance(mb, bool) or mb < 0):
                raise ScheduleError(
                    f"{name}: rank {r}, job {pos} ({typ}): micro_batch_id must be an integer >= 0, got {mb!r}", (f"{typ}({mb!r})",)
                )
            c = chunk or 0
            top_chunk = max(top_chunk, c)
            items.append((kind, c, mb))
        parsed.append(items)
    if placement == "loop":
        stage_to_rank = loop_placement(p, top_chunk + 1)
    elif placement == "v":
        if top_chunk > 1:
            raise ScheduleError(f"{name}: the V placement has chunks 0 and 1, the job list uses chunk {top_chunk}")
        stage_to_rank = v_placement(p)
    else:
        raise ConfigError(f"unknown placement {placement!r}; valid: 'loop', 'v'")
    stages_of: list[list[int]] = [[] for _ in range(p)]
    for k, r in enumerate(stage_to_rank):
        stages_of[r].append(k)
    ranks: list[list[Job | None]] = []
    for r, items in enumerate(parsed):
        jobs: list[Job | None] = []
        for kind, c, mb in items:
            stage = stages_of[r][c]
            jobs.append(Job(stage, kind, None if kind is JobKind.OPT else mb))
        ranks.append(jobs)
    m = num_microbatches
    if m is None:
        m = 1 + max((j.microbatch for row in ranks for j in row if j is not None and j.microbatch is not None), default=0)
    sched = Schedule(name, m, stage_to_rank, tuple(tuple(r) for r in ranks), {"source": name})
    check_counts(sched)
    return sched
