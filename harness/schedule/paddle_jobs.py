"""PaddlePaddle job names: schedules as PaddlePaddle's per-rank job lists.

PaddlePaddle's pipeline passes (``paddle.distributed.passes.pipeline_scheduler_pass``) name
jobs ``forward``, ``backward``, ``backward_b``, ``backward_w``, ``optimizer``, with an
optional chunk suffix in VPP/ZB-VPP (``forward0``, ``backward_w1``). A job list is one
``(type, micro_batch_id)`` sequence per rank. :func:`parse_paddle_type` and
:func:`paddle_type` read and write one type; :func:`to_paddle_jobs` and
:func:`from_paddle_jobs` a whole schedule. All four are importable from
:mod:`harness.schedule.notation` too; the log importer is :mod:`harness.imports.paddle`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from harness.errors import ScheduleError
from harness.schedule.model import Job, JobKind, Schedule, loop_placement, v_placement
from harness.schedule.validate import check_counts

__all__ = ["from_paddle_jobs", "paddle_type", "parse_paddle_type", "to_paddle_jobs"]

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
        schedule: the schedule; idle slots, send/receive and data-parallel
            (``UNSHARD``, ``RESHARD``, ``REDUCE_GRAD``) jobs are left out.
        chunk_suffix: append the chunk index (``forward0``); default when ranks
            hold more than one chunk.
    """
    suffix = schedule.chunks_per_rank > 1 if chunk_suffix is None else chunk_suffix
    out: list[list[tuple[str, int | None]]] = []
    for jobs in schedule.ranks:
        row = []
        for job in jobs:
            if job is None or job.kind.is_comm or job.kind.is_data_parallel:  # PaddlePaddle lists neither
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
