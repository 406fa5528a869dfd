"""A ``torch.distributed.pipelining`` run's ranks (:class:`~harness.actions.torch_rank.TorchRank`) as run records.

One records path for two sources: ``import-torch`` reads each rank's ``torch.profiler`` trace
(:func:`harness.imports.torch_trace.read_rank_trace`) and the ``torch`` backend times each rank
with hooks (:mod:`harness.distributed.torch_records`); both hand their ranks to :func:`assemble`,
which returns a :class:`TorchRun`: the same :class:`~harness.records.RunRecords` the executor
returns, the schedule recovered from the ranks' action orders (validated like any schedule), and
the clock alignment (:mod:`harness.actions.clocks`).

The records, whatever the source:

* one job per compute action (``F``, ``B``, ``I``, ``W``, and ``OPT`` where the ``torch`` backend
  marks a stage's optimizer step), from its compute start (the first operator; the stage call's
  entry) to its range's end, on stream ``rank{r}/compute``; the wait for its input before that
  is kept beside it (:attr:`~harness.actions.torch_action.TorchAction.wait_ns`);
* ``SEND_*``/``RECV_*`` jobs are their *posting* ranges (PyTorch's runtime only posts them), on
  stream ``rank{r}/comm↔{q}``;
* ``UNSHARD``, ``RESHARD`` and ``REDUCE_GRAD`` are host actions: listed in :attr:`TorchRun.actions`,
  not jobs;
* a step spans its jobs (earliest start to latest end over the ranks).

Checks, each a clear error or note naming the file (or rank): a world size that differs between
ranks or ranks missing; files of two runs (each file's marking named); an unknown schedule class
(the known ones listed) and one whose stages per rank differ from the trace's (a note); a stage
run on two ranks; a step in which a rank recorded no pipeline action, left out of the figures
with a note (kept, with the note, where every step lacks some rank's). Clock offsets fitted
across hosts, or given ones that break causality, are a note and flag the case ``clocks``
(:attr:`harness.actions.clocks.ClockFit.needs_flag`).

Imports :mod:`harness.plan` (to build and validate the recovered schedule) and the layers below.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.actions.clocks import ClockFit, SendRecvPair, fit_offsets
from harness.actions.torch_action import TorchAction
from harness.actions.torch_rank import TorchRank
from harness.errors import InputFormatError, ScheduleError
from harness.records import JobRecord, RunRecords

__all__ = ["HOST_KINDS", "KNOWN_CLASSES", "LOOP_CLASSES", "SINGLE_CLASSES", "V_CLASSES", "TorchRun", "assemble",
           "check_schedule_class"]

#: Schedule classes by stage placement (pytorch ``generate_stage_to_rank_mapping``).
LOOP_CLASSES = frozenset({"ScheduleInterleaved1F1B", "ScheduleInterleavedZeroBubble", "ScheduleLoopedBFS"})
V_CLASSES = frozenset({"ScheduleZBVZeroBubble", "ScheduleDualPipeV"})
SINGLE_CLASSES = frozenset({"Schedule1F1B", "ScheduleGPipe"})
#: Every class ``schedule_class`` may name.
KNOWN_CLASSES = LOOP_CLASSES | V_CLASSES | SINGLE_CLASSES
_COMPUTE = frozenset({"F", "B", "I", "W", "OPT"})
#: The host actions PyTorch's runtime adds: listed, never jobs.
HOST_KINDS = frozenset({"UNSHARD", "RESHARD", "REDUCE_GRAD"})


@dataclass
class TorchRun:
    """One run of PyTorch's pipelining runtime, assembled.

    Attributes:
        source: what was read (a trace folder), or what stands for the run (``<torch backend>``).
        ranks: per rank, as given (rank order).
        actions: every action of the assembled steps, times on the merged time base (ns,
            relative to ``time_base_epoch_ns``), host actions included.
        records: the run records (module doc).
        schedule: the recovered schedule (one step's per-rank order; validated).
        clock: how the ranks' clocks were aligned.
        time_base_epoch_ns: epoch ns of time 0 of ``records``.
        marking: ``"PP"``, ``"GPipe"`` or ``"inferred"`` (Schedule1F1B rebuilt from operators).
        warnings: notes naming file, rank, step.
        replay: measured beside simulated (:class:`harness.imports.replay.Replay`), or ``None``
            (set by the importer).
        plan: the plan of :attr:`schedule` (:func:`harness.plan.build.build_plan`).
    """

    source: Path
    ranks: list[TorchRank]
    actions: list[TorchAction]
    records: RunRecords
    schedule: Any
    clock: ClockFit
    time_base_epoch_ns: int
    marking: str
    warnings: list[str] = field(default_factory=list)
    replay: Any = None
    plan: Any = None

    @property
    def trace_dir(self) -> Path:
        """:attr:`source` (the name the importer's callers know)."""
        return self.source


def check_schedule_class(schedule_class: str | None) -> None:
    """Refuse a ``schedule_class`` that is none of :data:`KNOWN_CLASSES`.

    Raises:
        InputFormatError: names it and lists the known ones.
    """
    if schedule_class is not None and schedule_class not in KNOWN_CLASSES:
        raise InputFormatError(f"--schedule {schedule_class!r}: not a torch.distributed.pipelining schedule class this "
                               f"importer knows; known: {', '.join(sorted(KNOWN_CLASSES))} (or leave --schedule out: "
                               "the placement is then read from the trace)")


def _placement(stage_rank: dict[int, int], world: int, schedule_class: str | None, where: str,
               notes: list[str]) -> list[int]:
    """Stage -> rank from the actions, checked against ``schedule_class``'s placement when given."""
    n = max(stage_rank) + 1
    missing = [s for s in range(n) if s not in stage_rank]
    if missing:
        raise InputFormatError(f"{where}: no rank ran stage(s) {', '.join(map(str, missing))} of stages 0..{n - 1}")
    found = [stage_rank[s] for s in range(n)]
    per_rank = n / world
    if schedule_class in SINGLE_CLASSES and n != world:
        notes.append(f"{where}: {schedule_class} runs one stage per rank, but the trace's actions run {n} stages on "
                     f"{world} ranks ({per_rank:g} per rank): is --schedule the class that ran? (multi-stage classes: "
                     f"{', '.join(sorted(LOOP_CLASSES | V_CLASSES))})")
    elif schedule_class in (LOOP_CLASSES | V_CLASSES) and n == world:
        notes.append(f"{where}: {schedule_class} runs several stages per rank, but the trace's actions run one stage "
                     f"per rank: is --schedule the class that ran? (single-stage classes: {', '.join(sorted(SINGLE_CLASSES))})")
    elif schedule_class in V_CLASSES and n != 2 * world:
        notes.append(f"{where}: {schedule_class} runs two stages per rank, but the trace's actions run {per_rank:g}")
    expected: list[int] | None = None
    if schedule_class in LOOP_CLASSES or schedule_class in SINGLE_CLASSES:
        expected = [s % world for s in range(n)]
    elif schedule_class in V_CLASSES:
        expected = [s if s < world else 2 * world - 1 - s for s in range(n)]
    if expected is not None and expected != found:
        notes.append(f"{where}: {schedule_class} places stages on ranks {expected}, but the trace's actions ran them "
                     f"on {found}; the trace's placement is used")
    return found


def _pairs(actions: list[TorchAction], stage_rank: list[int], recv_end: dict[tuple[int, str, int, int], int]) -> list[SendRecvPair]:
    """Matched transfers on the files' own clocks: a cross-rank producer -> consumer edge, from
    the SEND range's start (else the producer's end) to the ``gloo:recv`` end inside the RECV
    range (else the consumer's compute start)."""
    by = {(a.step, a.stage, a.kind, a.microbatch): a for a in actions}
    n = len(stage_rank)
    out = []
    for a in actions:
        if a.kind not in ("F", "B", "I") or a.microbatch is None:
            continue
        src_kinds: tuple[str, ...]
        if a.kind == "F":
            src_stage, src_kinds, recv_kind, send_kind = a.stage - 1, ("F",), "RECV_F", "SEND_F"
        else:
            src_stage, src_kinds, recv_kind, send_kind = a.stage + 1, ("B", "I"), "RECV_B", "SEND_B"
        if not 0 <= src_stage < n or stage_rank[src_stage] == a.rank:
            continue
        prod = next((by[k] for kd in src_kinds if (k := (a.step, src_stage, kd, a.microbatch)) in by), None)
        if prod is None:
            continue
        send = by.get((a.step, src_stage, send_kind, a.microbatch))
        got = recv_end.get((a.stage, recv_kind, a.microbatch, a.step))
        out.append(SendRecvPair(prod.rank, send.start_ns if send else prod.end_ns, a.rank,
                                got if got is not None else a.compute_start_ns,
                                f"{prod.label} -> {a.label} (step {a.step})"))
    return out


def assemble(ranks: list[TorchRank], source: Path, *, steps: list[int] | None = None, schedule_class: str | None = None,
             clock_offsets_ns: list[int] | None = None, notes: list[str] | None = None, backend: str = "torch-trace",
             clock_text: str = "host wall clock (Kineto baseTimeNanoseconds + ts)",
             device_extra: dict[str, Any] | None = None, origin: str = "torch.profiler trace", empty_hint: str = "",
             offsets_by: str = "clock offsets given by the user") -> TorchRun:
    """The run of ``ranks`` as records and a recovered schedule (module doc).

    Args:
        ranks: one per rank, rank order (each with at least one pipeline action).
        source: what they came from (named in notes and errors).
        steps: the step numbers to assemble (default: every step all ranks recorded).
        schedule_class: the PyTorch schedule class that ran, when known (one of
            :data:`KNOWN_CLASSES`; checks the placement and the stages per rank, a mismatch is a
            note; named in reports).
        clock_offsets_ns: per rank, ns to add to its times (``[0] * p`` for times already on one
            clock); default: fitted (:func:`~harness.actions.clocks.fit_offsets`).
        notes: notes gathered so far (the list is extended and kept as :attr:`TorchRun.warnings`).
        backend: the records' backend (``"torch-trace"`` for an import, ``"torch"`` for the backend).
        clock_text: how the ranks' times were taken, for ``records.device["clock"]``.
        device_extra: more ``records.device`` entries, placed after ``time_base_epoch_ns``.
        origin: the recovered schedule's ``params["source"]``.
        empty_hint: what the error for a rank without pipeline actions adds (the reader: which
            schedule classes mark actions).
        offsets_by: how the clock note names the origin of ``clock_offsets_ns``.

    Raises:
        InputFormatError: world sizes that differ or ranks missing, a rank without pipeline actions, ranks marked differently, a
            step asked for that a rank lacks, no step every rank holds actions in, a stage on two
            ranks, an order that does not validate as a schedule (names the rank and action), an
            unknown ``schedule_class`` (lists the known ones).
    """
    check_schedule_class(schedule_class)
    notes = [] if notes is None else notes
    if not ranks:
        raise InputFormatError(f"{source}: no ranks to assemble")
    by_rank = {tr.rank: tr for tr in ranks}
    world = ranks[0].world_size
    for tr in ranks:
        if tr.world_size != world:
            raise InputFormatError(f"{tr.path}: world_size {tr.world_size}, but {ranks[0].path} says {world}: "
                                   "files of different runs")
    missing = [r for r in range(world) if r not in by_rank]
    if missing:
        raise InputFormatError(f"{source}: world_size is {world}, but no file holds rank(s) "
                               f"{', '.join(map(str, missing))}")
    for tr in ranks:
        if not tr.actions:
            raise InputFormatError(f"{tr.path}: rank {tr.rank}: no pipeline actions{empty_hint}")
    markings = {tr.marking for tr in ranks}
    if len(markings) > 1:
        raise InputFormatError(f"{source}: the files mark actions differently "
                               f"({', '.join(f'rank {t.rank}: {t.marking} ({t.path.name})' for t in ranks)}): "
                               "files of different runs? keep one run's files")
    marking = markings.pop()
    common = set.intersection(*(set(tr.steps) for tr in ranks))
    if steps is None:
        chosen = sorted(s for s in common if any(a.step == s for tr in ranks for a in tr.actions))
        for tr in ranks:
            extra = sorted(set(tr.steps) - common)
            if extra:
                notes.append(f"{tr.path}: rank {tr.rank} recorded step(s) {extra} that other ranks did not; left out")
    else:
        chosen = sorted(set(steps))
        for tr in ranks:
            lack = [s for s in chosen if s not in tr.steps]
            if lack:
                raise InputFormatError(f"{tr.path}: rank {tr.rank} has no ProfilerStep#{lack[0]} "
                                       f"(its steps: {', '.join(map(str, sorted(tr.steps)))})")
    if not chosen:
        raise InputFormatError(f"{source}: no ProfilerStep#N recorded by every rank holds pipeline actions")
    chosen = _steps_every_rank_ran(ranks, chosen, notes)
    acts = [a for tr in ranks for a in tr.actions if a.step in chosen]
    stage_rank: dict[int, int] = {}
    for a in acts:
        if a.stage in stage_rank and stage_rank[a.stage] != a.rank:
            raise InputFormatError(f"{by_rank[a.rank].path}: rank {a.rank} runs {a.name!r}, but stage {a.stage} also "
                                   f"runs on rank {stage_rank[a.stage]}: a stage lives on one rank")
        stage_rank.setdefault(a.stage, a.rank)
    placement = _placement(stage_rank, world, schedule_class, str(source), notes)
    recv_end = {k: v for tr in ranks for k, v in tr.recv_end.items()}
    clock = fit_offsets(world, [tr.host for tr in ranks], _pairs(acts, placement, recv_end), clock_offsets_ns,
                        str(source), offsets_by)
    if clock.needs_flag:
        notes.append(f"{source}: {clock.note}")
    off = clock.offsets_ns
    base = min(a.start_ns + off[a.rank] for a in acts)
    shifted = [TorchAction(a.rank, a.step, a.name, a.stage, a.kind, a.microbatch, a.start_ns + off[a.rank] - base,
                           a.end_ns + off[a.rank] - base, a.compute_start_ns + off[a.rank] - base, a.enqueue_ns,
                           a.inferred, a.group) for a in acts]
    schedule = _recover_schedule(shifted, placement, world, chosen, schedule_class or f"torch ({marking})", ranks, notes,
                                 origin)
    from harness.plan.build import build_plan

    plan = build_plan(schedule)
    stream_of = {(j.stage, j.kind.value, j.microbatch): plan.stream_names[plan.stream[i]] for i, j in enumerate(plan.jobs)}
    jobs: list[JobRecord] = []
    for a in sorted(shifted, key=lambda a: (a.step, a.rank, a.start_ns)):
        if a.kind in HOST_KINDS:
            continue
        start = a.compute_start_ns if a.kind in _COMPUTE else a.start_ns
        jobs.append(JobRecord(a.rank, stream_of[(a.stage, a.kind, a.microbatch)], a.stage, a.kind, a.microbatch,
                              schedule.chunk_of(a.stage), a.step, start, a.end_ns, a.enqueue_ns))
    of_step: dict[int, list[JobRecord]] = defaultdict(list)
    for j in jobs:
        of_step[j.step].append(j)
    step_start = [min(j.start_ns for j in of_step[s]) for s in chosen]
    step_end = [max(j.end_ns for j in of_step[s]) for s in chosen]
    device = {
        "backend": backend,
        "clock": f"{clock_text}; {clock.note}",
        "time_base_epoch_ns": base,
        **(device_extra or {}),
        "hosts": [tr.host for tr in ranks],
        "device_properties": [tr.device_properties for tr in ranks],
        "marking": marking,
        "gpu": any(tr.gpu for tr in ranks),
    }
    records = RunRecords(backend, device, world, list(plan.stream_names), list(chosen), step_start, step_end, jobs,
                         [sum(j.enqueue_ns for j in of_step[s]) for s in chosen])
    if marking == "inferred":
        notes.append(f"{source}: no action ranges (Schedule1F1B marks none): F and B were rebuilt from operator "
                     "events (harness.imports.torch_infer); their times are inferred, and no wait is known")
    return TorchRun(source, ranks, shifted, records, schedule, clock, base, marking, notes, plan=plan)


def _steps_every_rank_ran(ranks: list[TorchRank], chosen: list[int], notes: list[str]) -> list[int]:
    """``chosen`` without the steps some rank recorded no pipeline action in (a ``ProfilerStep#N``
    range that holds none of its ``PP:`` ranges: a profiler stopped early, actions filtered out),
    or fewer than its other steps commonly hold (a trace cut inside the step: every step of a
    schedule runs the same actions).

    Counted, such a rank would be idle for the whole step: its bubble far too high, the case's
    too. So the step is left out of the figures, with one note per rank naming its file and the
    steps. Where every step lacks some rank's actions, all are kept (their figures count that
    rank as idle) and the notes say so.

    Args:
        ranks: the ranks' traces (:func:`~harness.imports.torch_trace.read_rank_trace`).
        chosen: the step numbers to import, ascending.
        notes: receives the notes.

    Returns:
        the steps to import.

    Raises:
        InputFormatError: a rank holds no pipeline action in any of ``chosen``: its order, and so
            the schedule, is unknown (names the file, rank and steps).
    """
    from collections import Counter

    from harness.actions.step_text import steps_text

    ran = Counter((a.rank, a.step) for tr in ranks for a in tr.actions if a.kind not in HOST_KINDS)
    lacking = {tr.rank: [s for s in chosen if (tr.rank, s) not in ran] for tr in ranks}
    # a step holding fewer of a rank's actions than its other steps (a trace cut inside it): every step of a
    # schedule runs the same actions, so the rest of that rank's step is missing, and it would count as idle
    partial: dict[int, list[int]] = {}
    for tr in ranks:
        counts = Counter(ran[(tr.rank, s)] for s in chosen if (tr.rank, s) in ran)
        usual = max(counts, key=lambda n: (counts[n], n)) if counts else 0  # the commonest count (ties: the larger)
        partial[tr.rank] = [s for s in chosen if 0 < ran.get((tr.rank, s), 0) < usual]
        if partial[tr.rank] and len(partial[tr.rank]) < len(chosen):
            notes.append(f"{tr.path}: rank {tr.rank}'s ProfilerStep#{', #'.join(map(str, partial[tr.rank]))} "
                         f"hold{'s' if len(partial[tr.rank]) == 1 else ''} fewer pipeline actions than its other steps' "
                         f"{usual} ({', '.join(str(ran[(tr.rank, s)]) for s in partial[tr.rank])}): the trace misses part of "
                         f"{'that step' if len(partial[tr.rank]) == 1 else 'those steps'}, which "
                         f"{'is' if len(partial[tr.rank]) == 1 else 'are'} left out of the figures")
    keep = [s for s in chosen if all(s not in lack for lack in lacking.values())
            and all(s not in cut for cut in partial.values())]
    for tr in ranks:
        lack = lacking[tr.rank]
        if not lack:
            continue
        held = f"rank {tr.rank}'s ProfilerStep#{', #'.join(map(str, lack))} hold{'s' if len(lack) == 1 else ''} no pipeline action"
        if len(lack) == len(chosen):
            raise InputFormatError(f"{tr.path}: {held}: with none in the imported {steps_text(chosen)}, its action order "
                                   "is unknown (was the profiler active on this rank during the schedule's step()?)")
        if keep:
            others = [t.rank for t in ranks if t.rank != tr.rank and not set(lack) & set(lacking[t.rank])]
            them = "it" if len(lack) == 1 else "them"
            who = (f"the other ranks ran {them}" if len(others) == len(ranks) - 1
                   else f"rank{'s' if len(others) > 1 else ''} {' and '.join(map(str, others))} ran {them}" if others else "")
            notes.append(f"{tr.path}: {held}; {steps_text(lack)} {'is' if len(lack) == 1 else 'are'} left out of the "
                         "figures" + (f" ({who})" if who else ""))
        else:
            notes.append(f"{tr.path}: {held}: no step holds every rank's actions, so every step is kept, and rank "
                         f"{tr.rank} counts as idle in {steps_text(lack)}: their step times and bubble are not the run's")
    return keep or chosen


def _recover_schedule(actions: list[TorchAction], placement: list[int], world: int, steps: list[int], name: str,
                      ranks: list[TorchRank], notes: list[str], origin: str = "torch.profiler trace") -> Any:
    """The schedule the ranks ran: each rank's order of pipeline jobs in the first imported step
    (host actions left out), validated (:func:`harness.plan.build.validate`).

    Raises:
        InputFormatError: the order does not validate (names the rank and action), or a
            micro-batch is missing.
    """
    from harness.plan.build import validate
    from harness.schedule.model import Job, JobKind, Schedule, parse_job

    orders: dict[tuple[int, int], list[TorchAction]] = defaultdict(list)
    for a in sorted(actions, key=lambda a: (a.start_ns, a.kind != "F")):
        if a.kind not in HOST_KINDS:
            orders[(a.rank, a.step)].append(a)
    # Each rank's order is that of the first step it ran actions in (a step it recorded none in is noted
    # by _steps_every_rank_ran, and kept only where every step lacks some rank's actions).
    first_of = [next((s for s in steps if orders[(r, s)]), steps[0]) for r in range(world)]
    first = steps[0]
    differ = 0
    for r in range(world):
        ref = [a.label for a in orders[(r, first_of[r])]]
        for s in steps:
            other = [a.label for a in orders[(r, s)]]
            if s == first_of[r] or not other:
                continue
            if other != ref:
                differ += 1
                if differ > 10:
                    continue
                k = next((i for i, (x, y) in enumerate(zip(ref, other)) if x != y), min(len(ref), len(other)))
                notes.append(f"{ranks[r].path}: rank {r}: step {s} runs its actions in another order than step {first_of[r]} "
                             f"(from action {k}: {other[k] if k < len(other) else 'end'} vs "
                             f"{ref[k] if k < len(ref) else 'end'}); the schedule is step {first_of[r]}'s")
    if differ > 10:
        notes.append(f"... and {differ - 10} more (rank, step) pairs whose order differs from step {first}'s")
    m = 1 + max(a.microbatch for a in actions if a.microbatch is not None)
    rows = tuple(tuple(Job(a.stage, JobKind(a.kind), a.microbatch) for a in orders[(r, first_of[r])]) for r in range(world))
    try:
        schedule = Schedule(name, m, tuple(placement), rows, {"source": origin})
        validate(schedule)
    except ScheduleError as exc:
        at = []
        for text in exc.jobs:
            try:
                stage = parse_job(text).stage
                at.append(f"{text} (stage {stage}: rank {placement[stage]}, {ranks[placement[stage]].path.name})")
            except (ScheduleError, IndexError):
                at.append(text)
        raise InputFormatError(f"the action order recovered from the traces ({ranks[0].path.parent}, step {first}) "
                               f"is not a valid schedule" + (f" at {', '.join(at)}" if at else "") + f": {exc}") from None
    return schedule
