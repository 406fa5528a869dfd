"""Checks of a schedule's contents before anything runs.

:func:`check_counts` looks at what each stage holds: every micro-batch has
exactly one forward and one complete backward (a full ``B``, or an ``I`` and a
``W``), micro-batch indices are in range, and nothing is listed twice.
:func:`check_order` checks each rank's own order: a forward before its
backward, an ``I`` before its ``W``. Each stage lives on exactly one rank by
construction (:class:`~harness.schedule.model.Schedule` rejects a job on a rank
that does not hold its stage; the CSV reader rejects a stage on two rows).
Dependencies between ranks and deadlocks are checked by the plan
(:func:`harness.plan.build.build_plan`), which simulates readiness over the
dependency graph; :func:`harness.plan.build.validate` runs everything. Both raise
:class:`~harness.errors.ScheduleError` with the step x rank grid, faulty cells
marked. Linear in the number of jobs.
"""

from __future__ import annotations

from harness.errors import ScheduleError
from harness.schedule.model import KIND_CODE, Job, JobKind, Schedule, _job_arrays

__all__ = ["check_counts", "check_order"]

_MAX_REPORTED = 12


def _fail(
    schedule: Schedule, problems: list[tuple[int, int, str]], summary: str, missing: list[str], n_missing: int | None = None
) -> None:
    """Raise the :class:`ScheduleError` for ``problems`` and ``missing`` jobs
    (``n_missing`` of them in all, when only the first are listed)."""
    n_missing = len(missing) if n_missing is None else n_missing
    marks = {(rank, step): note for rank, step, note in problems[:_MAX_REPORTED]}
    lines = [f"schedule {schedule.name!r} is invalid: {summary}"]
    if missing:
        shown = ", ".join(missing[:_MAX_REPORTED])
        more = f" (and {n_missing - _MAX_REPORTED} more)" if n_missing > _MAX_REPORTED else ""
        lines.append(f"missing jobs: {shown}{more}")
    lines.append(schedule.format_grid(marks))
    jobs = tuple(note.split(" ", 1)[0] for _, _, note in problems) + tuple(missing)
    raise ScheduleError("\n".join(lines), jobs)


def check_counts(schedule: Schedule) -> None:
    """Check every stage has one forward and one complete backward per micro-batch (of its
    chain, :mod:`harness.schedule.chains`: all of them in a schedule of one chain).

    A backward is complete as a full ``B``, or as an ``I`` followed (anywhere)
    by a ``W``; mixing ``B`` with ``I``/``W`` for one micro-batch is an error.
    At most one ``OPT``, ``UNSHARD``, ``RESHARD`` and ``REDUCE_GRAD`` per stage
    (a file that gathers a stage's parameters twice is refused as a job listed twice).
    Send/receive jobs are checked by the plan.

    Raises:
        ScheduleError: names the duplicate, out-of-range and missing jobs and
            shows the grid with the listed ones marked.
    """
    m = schedule.num_microbatches
    if m < 1:
        raise ScheduleError(f"schedule {schedule.name!r}: the number of micro-batches must be at least 1, got {m}")
    from harness.schedule.chains import CHAINS_PARAM, stage_microbatches

    runs = stage_microbatches(schedule)  # per stage, its chain's micro-batches (harness.schedule.chains)
    chained = bool(schedule.params.get(CHAINS_PARAM))
    seen: dict[Job, tuple[int, int]] = {}
    problems: list[tuple[int, int, str]] = []
    for rank, step, job in schedule.jobs():
        if job.microbatch is not None and not 0 <= job.microbatch < m:
            problems.append((rank, step, f"{job} names micro-batch {job.microbatch}, valid are 0..{m - 1}"))
            continue
        if chained and job.microbatch is not None and 0 <= job.stage < len(runs) and job.microbatch not in runs[job.stage]:
            own = runs[job.stage]
            problems.append((rank, step, f"{job} names micro-batch {job.microbatch}, but stage {job.stage}'s chain runs "
                                         f"micro-batches {own.start}..{own.stop - 1}"))
            continue
        if job.microbatch is None and job.kind.takes_microbatch:
            problems.append((rank, step, f"{job} names no micro-batch; only OPT, UNSHARD, RESHARD and REDUCE_GRAD jobs go without one"))
            continue
        if job in seen:
            r0, s0 = seen[job]
            problems.append((rank, step, f"{job} is listed twice (first at rank {r0}, step {s0})"))
            continue
        seen[job] = (rank, step)
    # Missing jobs, stage by stage in micro-batch order. Only micro-batches that
    # some job of the stage names are checked one by one; the others miss F and B
    # both and are counted (a huge micro-batch id must not cost time or memory).
    named: list[set[int]] = [set() for _ in range(schedule.num_stages)]
    for job in seen:
        if job.microbatch is not None and 0 <= job.stage < len(named):
            named[job.stage].add(job.microbatch)
    missing: list[str] = []  # the first _MAX_REPORTED, in order
    n_missing = 0

    def lack(name: str) -> None:
        nonlocal n_missing
        n_missing += 1
        if len(missing) < _MAX_REPORTED:
            missing.append(name)

    for stage in range(schedule.num_stages):
        prev = runs[stage].start - 1
        stop = runs[stage].stop
        for mb in [*sorted(named[stage]), stop]:
            for gap in range(prev + 1, min(mb, prev + 1 + _MAX_REPORTED)):
                lack(f"{stage}F{gap}")
                lack(f"{stage}B{gap}")
            n_missing += 2 * max(0, mb - prev - 1 - _MAX_REPORTED)
            prev = mb
            if mb == stop:
                break
            if Job(stage, JobKind.F, mb) not in seen:
                lack(f"{stage}F{mb}")
            b = Job(stage, JobKind.B, mb) in seen
            i = Job(stage, JobKind.I, mb) in seen
            w = Job(stage, JobKind.W, mb) in seen
            if b and (i or w):
                rank, step = seen[Job(stage, JobKind.B, mb)]
                other = f"{stage}{'I' if i else 'W'}{mb}"
                problems.append((rank, step, f"{stage}B{mb} is a full backward, but {other} is also listed"))
            elif i and not w:
                lack(f"{stage}W{mb}")
            elif w and not i:
                lack(f"{stage}I{mb}")
            elif not (b or i or w):
                lack(f"{stage}B{mb}")
    if problems or n_missing:
        what = []
        if problems:
            what.append(f"{len(problems)} misplaced or duplicate job(s)")
        if n_missing:
            which = "its chain's micro-batches" if chained else f"micro-batches 0..{m - 1}"
            what.append(f"{n_missing} missing job(s) (each stage needs F and B, or F, I and W, for {which})")
        _fail(schedule, problems, "; ".join(what), missing, n_missing)


def check_order(schedule: Schedule) -> None:
    """Check each rank's order: ``F`` before its ``B``/``I``, ``I`` before its ``W``.

    Only pairs listed on the same rank are compared (a stage's jobs all are);
    missing partners are :func:`check_counts`'s business.

    Raises:
        ScheduleError: names each job listed before the job it needs (e.g.
            ``"0W3 is listed before its 0I3"``) and marks both in the grid.
    """
    pos: dict[tuple[int, JobKind, int | None], tuple[int, int]] = {}
    for rank, step, job in schedule.jobs():
        pos[(job.stage, job.kind, job.microbatch)] = (rank, step)
    problems: list[tuple[int, int, str]] = []
    needs = ((JobKind.B, JobKind.F), (JobKind.I, JobKind.F), (JobKind.W, JobKind.I))
    for (stage, kind, mb), (rank, step) in pos.items():
        for later, earlier in needs:
            if kind is not later:
                continue
            before = pos.get((stage, earlier, mb))
            if before is not None and before[0] == rank and before[1] > step:
                problems.append((rank, step, f"{stage}{kind.value}{mb} is listed before its {stage}{earlier.value}{mb} (step {before[1]})"))
                problems.append((rank, before[1], f"{stage}{earlier.value}{mb} must come before {stage}{kind.value}{mb}"))
    problems += _data_parallel_order(schedule)
    if problems:
        first = problems[0][2]
        _fail(schedule, problems, f"{len(problems) // 2} job(s) out of order on their rank: {first}", [])


#: Which compute kinds a data-parallel job of a stage must precede (``True``) or follow (``False``):
#: PyTorch's runtime waits for ``UNSHARD`` before a stage's compute, ``RESHARD`` frees the
#: parameters after it, and ``REDUCE_GRAD`` follows the last ``B``/``W`` (``_add_reduce_grad``).
_DP_RULES: dict[JobKind, tuple[bool, frozenset[JobKind]]] = {
    JobKind.UNSHARD: (True, frozenset({JobKind.F, JobKind.B, JobKind.I, JobKind.W})),
    JobKind.RESHARD: (False, frozenset({JobKind.F, JobKind.B, JobKind.I, JobKind.W})),
    JobKind.REDUCE_GRAD: (False, frozenset({JobKind.B, JobKind.W})),
}


def _data_parallel_order(schedule: Schedule) -> list[tuple[int, int, str]]:
    """Problems (rank, step, note) of data-parallel jobs out of order: an ``UNSHARD`` after
    a compute job of its stage, a ``RESHARD`` before one, a ``REDUCE_GRAD`` before a ``B``/``W``
    of its stage. Pairs of notes (the job, then the other one), as :func:`check_order`'s."""
    arrays = _job_arrays(schedule)
    if arrays is not None:  # the common case, no data-parallel job, found in C
        codes = [KIND_CODE[k] for k in _DP_RULES]
        if not bool(((arrays.kind >= min(codes)) & (arrays.kind <= max(codes))).any()):
            return []
    at: dict[tuple[int, JobKind], tuple[int, int]] = {}
    for rank, step, job in schedule.jobs():
        if job.kind.is_data_parallel:
            at[(job.stage, job.kind)] = (rank, step)
    if not at:
        return []
    conflicts: dict[tuple[int, JobKind], list[tuple[int, int, Job]]] = {}
    for rank, step, job in schedule.jobs():
        for kind, (before, kinds) in _DP_RULES.items():
            where = at.get((job.stage, kind))
            if where is None or job.kind not in kinds or where[0] != rank:
                continue
            if (where[1] > step) if before else (where[1] < step):
                conflicts.setdefault((job.stage, kind), []).append((rank, step, job))
    problems: list[tuple[int, int, str]] = []
    for (stage, kind), jobs in conflicts.items():
        before = _DP_RULES[kind][0]
        where = at[(stage, kind)]
        dp = f"{stage}{kind.value}"
        listed = ", ".join(f"{job} (step {step})" for _, step, job in jobs[:4]) + (f" and {len(jobs) - 4} more" if len(jobs) > 4 else "")
        # One note for the data-parallel job, naming every job it is out of order with (its cell shows one note).
        note = f"{dp} is listed {'after' if before else 'before'} {listed}, which it must {'precede' if before else 'follow'}"
        for rank, step, job in jobs:  # pairs, as check_order counts them: the job, then the other one
            problems.append((where[0], where[1], note))
            problems.append((rank, step, f"{job} must come {'after' if before else 'before'} {dp}"))
    return problems
