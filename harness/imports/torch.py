"""Import the ``torch.profiler`` traces of one ``torch.distributed.pipelining`` run.

:func:`read_torch_traces` reads a folder of per-rank traces
(:mod:`harness.imports.torch_trace` says what is read from each file) and returns a
:class:`TorchImport`: the same :class:`~harness.records.RunRecords` the executor
returns, the schedule recovered from the ranks' action orders (validated like any
schedule), the clock alignment (:mod:`harness.imports.clocks`) and the run beside
its schedule (:mod:`harness.imports.replay`). :func:`torch_case` serializes it as a
results-document case (through :func:`harness.report.results.case_to_dict`, as a
harness run is), and :func:`import_torch_traces` renders the reports.

Checks, each a clear error or warning naming the file: a file without
``distributedInfo``; two files claiming one rank; a world size that differs between
files or ranks missing; a truncated or invalid file; no pipeline actions (with the
schedule classes that mark them); actions of one thread that overlap; files of two
runs (each file's marking named); an unknown schedule class (the known ones listed)
and one whose stages per rank differ from the trace's (a note); a step in which a
rank recorded no pipeline action, left out of the figures with a note (kept, with the
note, where every step lacks some rank's). Clock offsets fitted
across hosts, or given ones that break causality, are a note and flag the case
``clocks`` (:attr:`harness.imports.clocks.ClockFit.needs_flag`).
"""

from __future__ import annotations

import statistics
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import InputFormatError, ScheduleError
from harness.imports.clocks import ClockFit, SendRecvPair, fit_offsets
from harness.imports.torch_action import TorchAction
from harness.imports.torch_trace import MARKING_SCHEDULES, TorchRank, TorchTraceWarning, find_trace_files, read_rank_trace
from harness.records import JobRecord, RunRecords

__all__ = ["TorchImport", "TorchTraceWarning", "import_torch_traces", "read_torch_traces", "torch_case"]

#: Schedule classes by stage placement (pytorch ``generate_stage_to_rank_mapping``).
LOOP_CLASSES = frozenset({"ScheduleInterleaved1F1B", "ScheduleInterleavedZeroBubble", "ScheduleLoopedBFS"})
V_CLASSES = frozenset({"ScheduleZBVZeroBubble", "ScheduleDualPipeV"})
SINGLE_CLASSES = frozenset({"Schedule1F1B", "ScheduleGPipe"})
#: Every class ``schedule_class`` may name.
KNOWN_CLASSES = LOOP_CLASSES | V_CLASSES | SINGLE_CLASSES
_COMPUTE = frozenset({"F", "B", "I", "W"})
_COMM = frozenset({"SEND_F", "RECV_F", "SEND_B", "RECV_B"})


@dataclass
class TorchImport:
    """One imported run.

    Attributes:
        trace_dir: what was read.
        ranks: per rank, its file as read (rank order).
        actions: every action of the imported steps, times on the merged time base (ns,
            relative to ``time_base_epoch_ns``), host actions included.
        records: the run records (compute jobs from their first operator; send/receive
            jobs are their posting ranges).
        schedule: the recovered schedule (one step's per-rank order; validated).
        clock: how the ranks' clocks were aligned.
        time_base_epoch_ns: epoch ns of time 0 of ``records``.
        marking: ``"PP"``, ``"GPipe"`` or ``"inferred"`` (Schedule1F1B rebuilt from operators).
        warnings: notes naming file, rank, step.
        replay: measured beside simulated (:class:`harness.imports.replay.Replay`), or ``None``.
    """

    trace_dir: Path
    ranks: list[TorchRank]
    actions: list[TorchAction]
    records: RunRecords
    schedule: Any
    clock: ClockFit
    time_base_epoch_ns: int
    marking: str
    warnings: list[str] = field(default_factory=list)
    replay: Any = None


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


def read_torch_traces(trace_dir: Path, *, steps: list[int] | None = None, schedule_class: str | None = None,
                      clock_offsets_ns: list[int] | None = None, replay: bool = True) -> TorchImport:
    """Read the per-rank traces of one run (see module doc).

    Args:
        trace_dir: a folder of ``rank*.json``/``*.json.gz`` (or one file).
        steps: the ``ProfilerStep#N`` numbers to import (default: every step all ranks recorded).
        schedule_class: the PyTorch schedule class that ran, when known (one of
            :data:`KNOWN_CLASSES`; checks the placement and the stages per rank, a mismatch is a
            note; named in reports).
        clock_offsets_ns: per rank, ns to add to its times (for ranks on several hosts whose
            skew is known); default: fitted (:func:`~harness.imports.clocks.fit_offsets`).
        replay: also simulate the recovered schedule with the fitted costs.

    Raises:
        InputFormatError: see the module doc; also a step asked for that a rank lacks, an
            order that does not validate as a schedule (names the rank and action), and an
            unknown ``schedule_class`` (lists the known ones).
    """
    trace_dir = Path(trace_dir)
    if schedule_class is not None and schedule_class not in KNOWN_CLASSES:
        raise InputFormatError(f"--schedule {schedule_class!r}: not a torch.distributed.pipelining schedule class this "
                               f"importer knows; known: {', '.join(sorted(KNOWN_CLASSES))} (or leave --schedule out: "
                               "the placement is then read from the trace)")
    files = find_trace_files(trace_dir)
    notes: list[str] = []
    by_rank: dict[int, TorchRank] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TorchTraceWarning)
        named = any(f.name.startswith("rank") for f in files)
        for f in files:
            try:
                tr = read_rank_trace(f)
            except InputFormatError as exc:
                if trace_dir.is_file():
                    raise InputFormatError(f"{exc} (TRACE_DIR takes the folder of one run's per-rank traces, or one "
                                           f"trace file: pass its folder, {trace_dir.parent}?)") from None
                # a folder without rank*.json: any *.json with distributedInfo is a trace, other JSON is skipped
                if named or len(files) == 1 or ("no 'distributedInfo'" not in str(exc) and "not a Chrome trace" not in str(exc)):
                    raise
                notes.append(f"{exc}; skipped")
                continue
            if tr.rank in by_rank:
                raise InputFormatError(f"{f} and {by_rank[tr.rank].path} both claim rank {tr.rank} "
                                       "(distributedInfo.rank): two runs in one folder? keep one run's files")
            by_rank[tr.rank] = tr
    notes += [str(w.message) for w in caught]
    ranks = [by_rank[r] for r in sorted(by_rank)]
    if not ranks:
        raise InputFormatError(f"{trace_dir}: none of its {len(files)} JSON file(s) is a torch.distributed trace "
                               "(none holds 'distributedInfo')")
    world = ranks[0].world_size
    for tr in ranks:
        if tr.world_size != world:
            raise InputFormatError(f"{tr.path}: world_size {tr.world_size}, but {ranks[0].path} says {world}: "
                                   "files of different runs")
    missing = [r for r in range(world) if r not in by_rank]
    if missing:
        raise InputFormatError(f"{trace_dir}: world_size is {world}, but no file holds rank(s) "
                               f"{', '.join(map(str, missing))}")
    for tr in ranks:
        if not tr.actions:
            raise InputFormatError(
                f"{tr.path}: rank {tr.rank}: no pipeline actions in this trace. {MARKING_SCHEDULES}; "
                "was the profiler active during the schedule's step()?"
            )
    markings = {tr.marking for tr in ranks}
    if len(markings) > 1:
        raise InputFormatError(f"{trace_dir}: the files mark actions differently "
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
        raise InputFormatError(f"{trace_dir}: no ProfilerStep#N recorded by every rank holds pipeline actions")
    chosen = _steps_every_rank_ran(ranks, chosen, notes)
    acts = [a for tr in ranks for a in tr.actions if a.step in chosen]
    stage_rank: dict[int, int] = {}
    for a in acts:
        if a.stage in stage_rank and stage_rank[a.stage] != a.rank:
            raise InputFormatError(f"{by_rank[a.rank].path}: rank {a.rank} runs {a.name!r}, but stage {a.stage} also "
                                   f"runs on rank {stage_rank[a.stage]}: a stage lives on one rank")
        stage_rank.setdefault(a.stage, a.rank)
    placement = _placement(stage_rank, world, schedule_class, str(trace_dir), notes)
    recv_end = {k: v for tr in ranks for k, v in tr.recv_end.items()}
    clock = fit_offsets(world, [tr.host for tr in ranks], _pairs(acts, placement, recv_end), clock_offsets_ns,
                        str(trace_dir))
    if clock.needs_flag:
        notes.append(f"{trace_dir}: {clock.note}")
    off = clock.offsets_ns
    base = min(a.start_ns + off[a.rank] for a in acts)
    shifted = [TorchAction(a.rank, a.step, a.name, a.stage, a.kind, a.microbatch, a.start_ns + off[a.rank] - base,
                           a.end_ns + off[a.rank] - base, a.compute_start_ns + off[a.rank] - base, a.enqueue_ns,
                           a.inferred, a.group) for a in acts]
    schedule = _recover_schedule(shifted, placement, world, chosen, schedule_class or f"torch ({marking})", ranks, notes)
    from harness.plan.build import build_plan

    plan = build_plan(schedule)
    stream_of = {(j.stage, j.kind.value, j.microbatch): plan.stream_names[plan.stream[i]] for i, j in enumerate(plan.jobs)}
    jobs: list[JobRecord] = []
    for a in sorted(shifted, key=lambda a: (a.step, a.rank, a.start_ns)):
        if a.kind in _HOST_KINDS:
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
        "backend": "torch-trace",
        "clock": "host wall clock (Kineto baseTimeNanoseconds + ts); " + clock.note,
        "time_base_epoch_ns": base,
        "trace_dir": str(trace_dir),
        "files": [str(tr.path) for tr in ranks],
        "hosts": [tr.host for tr in ranks],
        "device_properties": [tr.device_properties for tr in ranks],
        "marking": marking,
        "gpu": any(tr.gpu for tr in ranks),
    }
    records = RunRecords("torch-trace", device, world, list(plan.stream_names), list(chosen), step_start, step_end, jobs,
                         [sum(j.enqueue_ns for j in of_step[s]) for s in chosen])
    if marking == "inferred":
        notes.append(f"{trace_dir}: no action ranges (Schedule1F1B marks none): F and B were rebuilt from operator "
                     "events (harness.imports.torch_infer); their times are inferred, and no wait is known")
    out = TorchImport(trace_dir, ranks, shifted, records, schedule, clock, base, marking, notes)
    if replay:
        from harness.imports.replay import replay as run_replay

        out.replay = run_replay(out, plan)
    return out


_HOST_KINDS = frozenset({"UNSHARD", "RESHARD", "REDUCE_GRAD"})


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

    from harness.imports.step_text import steps_text

    ran = Counter((a.rank, a.step) for tr in ranks for a in tr.actions if a.kind not in _HOST_KINDS)
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
                      ranks: list[TorchRank], notes: list[str]) -> Any:
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
        if a.kind not in _HOST_KINDS:
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
        schedule = Schedule(name, m, tuple(placement), rows, {"source": "torch.profiler trace"})
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


def torch_case(imp: TorchImport, name: str | None = None) -> dict[str, Any]:
    """``imp`` as one results-document case: serialized by :func:`harness.report.results.case_to_dict`
    from a :class:`~harness.analysis.result.CaseResult` (metrics, critical path and idle split computed by
    the same code as for runs), plus ``torch_import`` (per action: range, wait, compute; host
    actions; clock; marking) and ``replay`` (measured beside simulated)."""
    from harness.analysis.critical_path import critical_path, waiting
    from harness.analysis.metrics import compute_metrics
    from harness.analysis.result import CaseResult
    from harness.plan.build import build_plan
    from harness.report.results import case_to_dict

    plan = build_plan(imp.schedule)
    case_id = name or f"torch:{imp.trace_dir.name}"
    result = CaseResult(
        case_id=case_id, label=case_id, schedule=imp.schedule, records=imp.records,
        metrics=compute_metrics(imp.records), cost={"model": "measured (imported)"},
        backend_reason=f"imported from torch.profiler traces in {imp.trace_dir}", plan=plan,
        warnings=list(imp.warnings), critical_path=critical_path(imp.records, plan), waiting=waiting(imp.records, plan),
    )
    case = case_to_dict(result)
    waits = [a.wait_ns for a in imp.actions if a.kind in _COMPUTE]
    case["rank_labels"] = [f"rank {t.rank} ({t.host})" if t.host else f"rank {t.rank}" for t in imp.ranks]
    case["torch_import"] = {
        "marking": imp.marking,
        "inferred": imp.marking == "inferred",
        "clock": imp.clock.to_dict(),
        "files": [str(t.path) for t in imp.ranks],
        "events": sum(t.events for t in imp.ranks),
        "actions": {
            "name": [a.name for a in imp.actions], "rank": [a.rank for a in imp.actions],
            "step": [a.step for a in imp.actions], "stage": [a.stage for a in imp.actions],
            "kind": [a.kind for a in imp.actions], "microbatch": [a.microbatch for a in imp.actions],
            "start_ns": [a.start_ns for a in imp.actions], "compute_start_ns": [a.compute_start_ns for a in imp.actions],
            "end_ns": [a.end_ns for a in imp.actions],
        },
        "wait_ns_per_rank": [sum(a.wait_ns for a in imp.actions if a.rank == r and a.kind in _COMPUTE)
                             for r in range(imp.records.num_ranks)],
        "wait_ns_median": float(statistics.median(waits)) if waits else 0.0,
    }
    if imp.replay is not None:
        case["replay"] = imp.replay.to_dict()
        case["comm_model"] = imp.replay.comm_model  # the model the replay used: the overview says the same
    if imp.clock.needs_flag:
        case["flags"] = [*case.get("flags", []), {"kind": "clocks", "reason": imp.clock.note}]
    return case


def import_torch_traces(trace_dir: Path, out_dir: Path, *, name: str | None = None, steps: list[int] | None = None,
                        schedule_class: str | None = None, clock_offsets_ns: list[int] | None = None,
                        hta: bool = True, progress: Any = None) -> tuple[Any, dict[str, Any]]:
    """Read ``trace_dir`` and render results.json, traces, HTA files and the page into ``out_dir``.

    Returns:
        ``(ReportFiles, case)``.

    Raises:
        InputFormatError: see :func:`read_torch_traces`.
        ConfigError: ``out_dir`` is not writable or holds another tool's files.
    """
    from harness.report.render import write_report
    from harness.report.results import results_document

    imp = read_torch_traces(trace_dir, steps=steps, schedule_class=schedule_class, clock_offsets_ns=clock_offsets_ns)
    case = torch_case(imp, name)
    doc = results_document([case], {"source": f"torch.profiler traces in {trace_dir}"})
    files = write_report(Path(out_dir), doc, hta=hta, progress=progress, source=str(trace_dir))
    return files, case
