"""Import the ``torch.profiler`` traces of one ``torch.distributed.pipelining`` run.

:func:`read_torch_traces` reads a folder of per-rank traces
(:mod:`harness.imports.torch_trace` says what is read from each file), hands the ranks to
the records assembly the ``torch`` backend uses too (:func:`harness.actions.torch_assemble.assemble`),
and returns its :class:`~harness.actions.torch_assemble.TorchRun`: the same
:class:`~harness.records.RunRecords` the executor returns, the schedule recovered from the
ranks' action orders (validated like any schedule), the clock alignment
(:mod:`harness.actions.clocks`) and the run beside its schedule (:mod:`harness.imports.replay`). :func:`torch_case` serializes it as a
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
``clocks`` (:attr:`harness.actions.clocks.ClockFit.needs_flag`).
"""

from __future__ import annotations

import statistics
import warnings
from pathlib import Path
from typing import Any

from harness.actions.torch_assemble import TorchRun, assemble, check_schedule_class
from harness.actions.torch_rank import TorchRank
from harness.errors import InputFormatError
from harness.imports.torch_trace import MARKING_SCHEDULES, TorchTraceWarning, find_trace_files, read_rank_trace

__all__ = ["TorchRun", "TorchTraceWarning", "import_torch_traces", "read_torch_traces", "torch_case"]

_COMPUTE = frozenset({"F", "B", "I", "W"})


def read_torch_traces(trace_dir: Path, *, steps: list[int] | None = None, schedule_class: str | None = None,
                      clock_offsets_ns: list[int] | None = None, replay: bool = True) -> TorchRun:
    """Read the per-rank traces of one run (see module doc).

    Args:
        trace_dir: a folder of ``rank*.json``/``*.json.gz`` (or one file).
        steps: the ``ProfilerStep#N`` numbers to import (default: every step all ranks recorded).
        schedule_class: the PyTorch schedule class that ran, when known (one of
            :data:`KNOWN_CLASSES`; checks the placement and the stages per rank, a mismatch is a
            note; named in reports).
        clock_offsets_ns: per rank, ns to add to its times (for ranks on several hosts whose
            skew is known); default: fitted (:func:`~harness.actions.clocks.fit_offsets`).
        replay: also simulate the recovered schedule with the fitted costs.

    Warns:
        TorchTraceWarning: input left out while reading a file (an event with a field of the wrong type,
            naming the file, the event and the field; a pipeline action outside every step); each is
            also among the run's ``warnings``.

    Raises:
        InputFormatError: see the module doc; also a step asked for that a rank lacks, an
            order that does not validate as a schedule (names the rank and action), and an
            unknown ``schedule_class`` (lists the known ones).
    """
    trace_dir = Path(trace_dir)
    check_schedule_class(schedule_class)
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
    for w in caught:  # input left out (a field of the wrong type, an action outside every step): warned to the caller too
        if issubclass(w.category, TorchTraceWarning):
            warnings.warn(str(w.message), TorchTraceWarning, stacklevel=2)
    ranks = [by_rank[r] for r in sorted(by_rank)]
    if not ranks:
        raise InputFormatError(f"{trace_dir}: none of its {len(files)} JSON file(s) is a torch.distributed trace "
                               "(none holds 'distributedInfo')")
    out = assemble(ranks, trace_dir, steps=steps, schedule_class=schedule_class, clock_offsets_ns=clock_offsets_ns,
                   notes=notes, device_extra={"trace_dir": str(trace_dir), "files": [str(tr.path) for tr in ranks]},
                   empty_hint=f" in this trace. {MARKING_SCHEDULES}; was the profiler active during the schedule's step()?")
    if replay:
        from harness.imports.replay import replay as run_replay

        out.replay = run_replay(out, out.plan)
    return out


def torch_case(imp: TorchRun, name: str | None = None) -> dict[str, Any]:
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
