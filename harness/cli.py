"""The command line: ``python -m harness ...`` or ``pipeline-harness ...``.

Commands::

    report RESULTS_JSON [--out DIR]            re-render index.html and traces from a results file
    compare BASE NEW [--fail step_time:5%]...  per-case changes with CIs; exit 1 past a significant threshold, 2 with no common case
    import-paddle LOG_DIR [--out DIR]          PaddlePaddle worker logs -> the same reports (default ./reports-paddle/)
    export-paddle RESULTS_JSON --out DIR       our runs as PaddlePaddle profiler log lines
    import-torch TRACE_DIR [--out DIR]         torch.profiler traces of a pipelining run -> the same reports (default ./reports-torch/)
    schedules                                  registered schedules and their parameters
    show SCHEDULE -p 4 -m 8 [-v 2]             the slot x rank grid and the schedule's figures (harness.show_command)
    run SCHEDULE -p 4 -m 8 --backend mpi       run one schedule and write its report (under mpirun for mpi; harness.run_command)
    --version                                  the installed version
    --import MODULE COMMAND ...                import your module first (e.g. one registering builders)

Exit status: 0 fine, 1 a ``compare`` threshold was crossed, 2 an error (one
line on stderr, no traceback), 130 interrupted. This module (with the ``run`` and ``show``
subcommands', :mod:`harness.run_command` and :mod:`harness.show_command`) is the only one of the harness that prints.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from harness.compare import (
    Threshold,
    cases_by_id,
    compare_documents,
    parse_threshold,
    parse_thresholds,
    pipeline_mismatches,
    setup_mismatches,
)
from harness.errors import ConfigError, HarnessError, InputFormatError
from harness.report.output import add_trace_arguments, trace_options_of
from harness.show_command import GRID_EDGE, GRID_MAX_STEPS, cmd_show

__all__ = [
    "Threshold",
    "cases_by_id",
    "compare_documents",
    "main",
    "package_version",
    "parse_threshold",
    "parse_thresholds",
    "pipeline_mismatches",
    "setup_mismatches",
]

def package_version() -> str:
    """The installed version of the ``pipeline-harness`` distribution, or ``"unknown"``
    when it is not installed (e.g. run from a source tree without ``pip install``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pipeline-harness")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _err(msg: str) -> None:
    print(msg, file=sys.stderr)


def _check_out(out: str | None, default: str | None = None) -> None:
    """Refuse an empty ``--out`` (it would mean the current folder, unasked)."""
    if out is not None and not out.strip():
        raise ConfigError("--out is empty; give a folder" + (f", or leave it out to {default}" if default else ""))


def _cmd_report(args: argparse.Namespace) -> int:
    from harness.report.render import write_report
    from harness.report.results import load_results

    src = Path(args.results)
    _check_out(args.out, "render beside the results file")
    left_out: list[dict[str, Any]] = []  # damaged cases: named, left out; the others still get their report
    doc = load_results(src, left_out)
    out = Path(args.out) if args.out else src.parent
    other = out / "results.json"
    if not args.out and other.is_file() and not other.samefile(src):  # rendering beside a file: keep the folder's own run
        raise ConfigError(
            f"{out} already holds another results file ({other}), which rendering {src.name} beside it would replace; "
            f"give --out DIR for {src.name}'s report"
        )
    # results.json is published with the page also when re-rendering in place (the file's own
    # folder): under the publish lock, with the page rendered from it, so a render that published
    # into the folder meanwhile cannot leave its results.json beside this render's page. A file
    # with damaged cases is never replaced by one without them.
    in_place = other.is_file() and other.samefile(src)
    files = write_report(out, doc, hta=not args.no_hta, source=str(src), progress=None if args.quiet else _err,
                         notice=_err, trace_options=trace_options_of(args), left_out=left_out,
                         write_results_if_left_out=not in_place)
    for entry in left_out:
        _err(f"error: {entry['message']}; left out of the report")
    print(f"{files.index} ({len(doc['cases'])} case(s); traces in {out / 'traces'}" + ("" if args.no_hta else f", HTA traces in {out / 'hta'}") + ")")
    if left_out:
        kept = "" if in_place else f"; {files.results} lacks them too, {src} still holds them"
        _err(f"{len(left_out)} damaged case(s) of {src} left out of the report (listed on its page{kept})")
        return 1
    return 0


def _said_once(ids: Sequence[str], note: str) -> str:
    """One warning for a note shared by several cases: its count and the first few ids."""
    if len(ids) == 1:
        return f"{ids[0]}: {note}"
    shown = ", ".join(ids[:3]) + (f", ... ({len(ids) - 3} more)" if len(ids) > 3 else "")
    return f"{len(ids)} cases {note.replace('its deltas', 'their deltas')}: {shown}"


def _pct(x: float) -> str:
    return f"{100 * x:+.2f}%" if math.isfinite(x) else "?"


#: Per gate metric, the change below which two runs of one commit on a shared host can land
#: (measured, docs/measurement.md: cases differ significantly by 1-3 % between back-to-back runs;
#: bubbles by about a point), and how the warning says it.
_RUN_DRIFT = {"step_time": (0.03, "1-3 %"), "bubble": (0.015, "up to about 1.5 pp")}


def _cmd_compare(args: argparse.Namespace) -> int:
    from harness.compare import compare_documents, mismatch_groups, parse_confidence
    from harness.report.fields import check_cases
    from harness.report.results import every_case_damaged, load_results

    thresholds = parse_thresholds(args.fail or [])
    confidence = parse_confidence(args.confidence)
    # as `report` checks them: a damaged case (a null bubble, a string step time) is named with file, case and field,
    # and left out; the others are compared (a case left out of NEW is then missing from it, which a gate fails)
    docs = []
    for name in (args.base, args.new):
        left_out: list[dict[str, Any]] = []
        doc = load_results(Path(name), left_out)
        check_cases(doc, str(name), left_out=left_out)
        twice = next((e for e in left_out if e.get("duplicate")), None)
        if twice is not None:  # which of the two is the case to compare cannot be known
            raise InputFormatError(twice["message"])
        if left_out and not doc["cases"]:
            raise every_case_damaged(left_out)
        for entry in sorted(left_out, key=lambda e: e["index"]):
            _err(f"warning: {entry['message']}; left out of the comparison")
        docs.append(doc)
    base, new = docs
    result = compare_documents(base, new, thresholds, str(args.base), str(args.new), confidence=confidence, strict=args.strict)
    deltas, only_base, only_new = result
    if not deltas:
        raise ConfigError(
            f"no case id is in both {args.base} ({len(base['cases'])} case(s)) and {args.new} "
            f"({len(new['cases'])} case(s)); nothing was compared: is one of them the wrong file?"
        )
    for note, ids in mismatch_groups(base, new):
        _err(f"warning: {_said_once(ids, note)}")
    timed = [d for d in deltas if d.step is not None and d.step.method != "exact"]
    for t in thresholds if timed else []:
        drift = _RUN_DRIFT.get(t.metric)
        if drift is not None and t.limit < drift[0]:
            _err(f"warning: the gate {t.describe()} is below what two runs of one commit can differ by on a shared host "
                 f"({drift[1]}, docs/measurement.md): each confidence interval is over one run's own steps and does not "
                 f"hold that drift, so the gate can fail identical code ({len(timed)} timed case(s) compared)")
    zero = [d.case_id for d in deltas if d.step_change is None]
    if zero:
        note = (f"the median step time in {args.base} is 0 ns, so its change cannot be computed "
                "(shown as n/a; a step_time gate fails it if the new step time is above 0)")
        _err(f"warning: {_said_once(zero, note)}")
    out: TextIO = sys.stdout
    w = min(max([len(d.case_id) for d in deltas] + [4]), 70)
    level = f"{100 * confidence:g}% CI"
    print(f"{'case':<{w}}  {'step base':>11} {'step new':>11} {'change':>8} {level:>19}  {'verdict':<32} "
          f"{'bubble base':>11} {'new':>7} {'change':>9}", file=out)
    for d in deltas:
        name = d.case_id if len(d.case_id) <= w else "..." + d.case_id[-(w - 3):]
        flag = "  FAIL " + ",".join(d.failed) if d.failed else ""
        if d.step is None:
            step_change, ci = f"{'n/a':>8}", ""
        else:
            step_change = f"{_pct(d.step.estimate):>8}"
            ci = "exact" if d.step.method == "exact" else f"[{_pct(d.step.ci_low)}, {_pct(d.step.ci_high)}]"
        verdict = d.verdict + (" (flagged)" if d.flags else "")
        print(f"{name:<{w}}  {d.base_step_ns / 1e6:>8.3f} ms {d.new_step_ns / 1e6:>8.3f} ms {step_change} {ci:>19}  {verdict:<32} "
              f"{100 * d.base_bubble:>10.2f}% {100 * d.new_bubble:>6.2f}% {100 * d.bubble_change:>+7.2f}pp{flag}", file=out)
    for d in deltas:
        if d.flags:
            print(f"flagged: {d.case_id}: " + "; ".join(d.flags), file=out)
    for cid in only_base:
        print(f"only in {args.base}: {cid}", file=out)
    for cid in only_new:
        print(f"only in {args.new}: {cid}", file=out)
    failed = result.failed
    gates = ", ".join(t.describe() for t in thresholds) or "none"
    verdicts = {v: sum(1 for d in deltas if d.verdict == v) for v in ("slower", "faster", "no significant change", "not enough samples")}
    counted = ", ".join(f"{n} {v}" for v, n in verdicts.items() if n)
    ungated = result.ungated
    tail = ""
    if ungated and thresholds:
        tail = (f"; {len(ungated)} flagged case(s) not gated (flagged unstable, contended, clocks or steps in either file; --strict gates them)")
    elif result.strict and any(d.flags for d in deltas):
        tail = f"; {sum(1 for d in deltas if d.flags)} flagged case(s) gated (--strict)"
    untested = [d for d in deltas if d.untested and d.gated]
    if untested:
        from harness.stats import MIN_SAMPLES

        tail += (f"; {len(untested)} case(s) with fewer than {MIN_SAMPLES} steps in a file gated on the change alone, "
                 "without a significance test (record more steps: the default adaptive window takes 5 or more)")
    print(f"{len(deltas)} case(s) compared, {len(failed)} past a threshold (gates: {gates})"
          + (f" at {100 * confidence:g}% confidence" if thresholds else "") + f": {counted}{tail}", file=out)
    # a test that fails in NEW and not in BASE is a regression; one that fails in both is no change, which a gate lets by
    failed_before = {c["id"] for c in base["cases"] if c.get("outcome") in ("failed", "error")}
    failing = [c["id"] for c in new["cases"] if c.get("outcome") in ("failed", "error")]
    broken = [cid for cid in failing if cid not in failed_before]
    still = [cid for cid in failing if cid in failed_before]
    if thresholds and only_base:
        print(f"FAIL: {len(only_base)} case(s) of {args.base} missing from {args.new}", file=out)
    if thresholds and broken:
        print(f"FAIL: {len(broken)} case(s) in {args.new} ran but their test failed, as it did not in {args.base}: "
              f"{', '.join(broken)}", file=out)
    if thresholds and still:
        print(f"note: {len(still)} case(s) failed their test in both files (no change, not gated): {', '.join(still)}", file=out)
    return 1 if failed or (thresholds and (only_base or broken)) else 0


def _cmd_import_paddle(args: argparse.Namespace) -> int:
    from harness.imports.paddle import PaddleLogWarning, builtin_schedule_name, import_paddle_logs
    from harness.report.render import write_report
    from harness.report.results import results_document

    _check_out(args.out)
    schedule = "PaddlePaddle log" if args.schedule is None else builtin_schedule_name(args.schedule)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PaddleLogWarning)
        case = import_paddle_logs(Path(args.log_dir), name=args.name, schedule_name=schedule)
    for w in caught:
        if issubclass(w.category, PaddleLogWarning):
            _err(f"warning: {w.message}")
    doc = results_document([case], {"source": f"PaddlePaddle logs in {args.log_dir}"})
    out = Path(args.out)
    files = write_report(out, doc, hta=not args.no_hta, progress=None if args.quiet else _err, source=str(args.log_dir),
                         notice=_err, trace_options=trace_options_of(args))
    n = len(case["jobs"]["kind"])
    print(f"{files.index} ({n} jobs on {case['schedule']['p']} device(s), {len(case['steps'])} step(s), "
          f"{len(case['overlaps'])} overlap(s) flagged)")
    return 0


def _cmd_import_torch(args: argparse.Namespace) -> int:
    from harness.imports.torch import TorchTraceWarning, import_torch_traces

    _check_out(args.out)
    from harness.imports.torch_args import clock_offsets_list, steps_list

    steps = steps_list(args.steps) if args.steps else None
    offsets = clock_offsets_list(args.clock_offsets) if args.clock_offsets else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TorchTraceWarning)
        files, case = import_torch_traces(Path(args.trace_dir), Path(args.out), name=args.name, steps=steps,
                                          schedule_class=args.schedule, clock_offsets_ns=offsets, hta=not args.no_hta,
                                          progress=None if args.quiet else _err)
    for w in caught:
        if issubclass(w.category, TorchTraceWarning):
            _err(f"warning: {w.message}")
    for note in case.get("warnings", []):
        _err(f"note: {note}")
    rep = case.get("replay") or {}
    n_steps = len(case["steps"])
    ref = f"step {rep.get('reference_step')}" + (  # one real step: the lower median (imports.replay's module doc)
        "" if n_steps < 2 else ", the shorter of 2" if n_steps == 2 else f", the {'lower ' if n_steps % 2 == 0 else ''}median of {n_steps}")
    print(f"{files.index} ({len(case['jobs']['kind'])} jobs on {case['schedule']['p']} rank(s), {n_steps} step(s); "
          f"measured {ref}: {rep.get('measured_step_ns', 0) / 1e6:.3f} ms, simulated {rep.get('simulated_step_ns', 0) / 1e6:.3f} ms)")
    return 0


def _cases_named(cases: list[dict[str, Any]], wanted: str, source: str) -> list[dict[str, Any]]:
    """The one case ``wanted`` names: its id, else its label, else the short form the report and
    the pytest summary show (the id after its ``file::``, e.g. ``test_zoo[ZB-H1]``).

    Raises:
        ConfigError: no case, or several, answer to ``wanted`` (lists them, or the ids).
    """
    for match in (lambda c: c["id"] == wanted, lambda c: c.get("label") == wanted,
                  lambda c: str(c["id"]).split("::", 1)[-1] == wanted):
        found = [c for c in cases if match(c)]
        if len(found) == 1:
            return found
        if len(found) > 1:
            shown = ", ".join(str(c["id"]) for c in found[:20])
            raise ConfigError(f"--case {wanted!r} names {len(found)} cases in {source}: {shown}; give the full id")
    ids = [str(c["id"]) for c in cases]
    raise ConfigError(f"no case {wanted!r} in {source} (by id, label or short label); its case ids: "
                      + (", ".join(ids[:20]) + (f", ... ({len(ids) - 20} more)" if len(ids) > 20 else "") if ids else "(none)"))


def _cmd_export_paddle(args: argparse.Namespace) -> int:
    from harness.imports.paddle import write_paddle_logs
    from harness.imports.paddle_export import left_out
    from harness.report.fields import check_cases
    from harness.report.results import load_results

    _check_out(args.out)
    damaged: list[dict[str, Any]] = []  # checked as `report` checks them; only the case exported must be whole
    doc = load_results(Path(args.results), damaged)
    check_cases(doc, str(args.results), left_out=damaged)
    cases = doc["cases"]
    wanted = [e for e in damaged if args.case is None or args.case in (e["id"], e["label"])]
    if wanted and (args.case is not None or (not cases and len(damaged) == 1)):
        raise InputFormatError(wanted[0]["message"])  # the case asked for (or the file's only one) is damaged: nothing is written
    if args.case is not None:
        cases = _cases_named(cases, args.case, args.results)
    elif len(cases) + len(damaged) != 1:
        ids = [str(c["id"]) for c in cases] + [str(e["id"]) for e in damaged]
        shown = ", ".join(ids[:20]) + (f", ... ({len(ids) - 20} more)" if len(ids) > 20 else "")
        raise ConfigError(f"{args.results} holds {len(ids)} cases; pick one with --case ID: {shown}" if ids
                          else f"{args.results} holds no case to export")
    paths = write_paddle_logs(Path(args.out), cases[0])
    print(f"{len(paths)} worker log(s) in {args.out}")
    dropped = left_out(cases[0])
    if dropped:
        _err(f"note: {sum(dropped.values())} job(s) left out ({', '.join(f'{n} {k}' for k, n in sorted(dropped.items()))}): "
             "Paddle's profiler has no job type for them")
    return 0


def _cmd_schedules(args: argparse.Namespace) -> int:
    import inspect

    from harness.schedule.builders import builder_info, builder_options, schedule_names

    for name in schedule_names():
        info = builder_info(name)
        params, any_keyword = builder_options(info)
        opts = ", ".join([f"{p.name}={p.default!r}" if p.default is not inspect.Parameter.empty else p.name for p in params]
                         + (["any keyword"] if any_keyword else []))
        size = "p, m, v" if info.takes_chunks else "p, m"
        aliases = f" (also: {', '.join(info.aliases)})" if info.aliases else ""
        extra = "; splits backward into I and W" if info.splits_backward else ""
        print(f"{name}{aliases}\n    {info.summary}\n    sizes: {size}{'; options: ' + opts if opts else ''}{extra}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    from harness.run_command import positive_count

    parser = argparse.ArgumentParser(prog="pipeline-harness", description="Pipeline-parallel schedule benchmarks: reports and tools.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import a Python module (a dotted name, or a .py file) first, e.g. one that registers "
                             "your own schedule builders with @harness.schedule.register; repeatable")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("report", help="re-render index.html and traces from a results JSON")
    p.add_argument("results", metavar="RESULTS_JSON")
    p.add_argument("--out", metavar="DIR", help="report folder (default: the results file's folder)")
    p.add_argument("--no-hta", action="store_true", help="skip the per-rank HTA traces")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    add_trace_arguments(p)
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("compare", help="per-case deltas between two results files; with --fail, exit 1 past a threshold, "
                                       "when a base case is missing or a new case's test failed that passed in BASE")
    p.add_argument("base", metavar="BASE")
    p.add_argument("new", metavar="NEW")
    p.add_argument("--fail", action="append", metavar="METRIC:LIMIT",
                   help="fail when the median step time grows by more than LIMIT percent (relative: step_time:5 or "
                        "step_time:5%%) or the bubble ratio by more than LIMIT percentage points (absolute: bubble:2, "
                        "bubble:2pp and bubble:2%% all let it grow from 10%% to 12%% of the step time); repeatable")
    p.add_argument("--confidence", default="0.95", metavar="LEVEL",
                   help="confidence of the intervals shown and of the significance a gate needs (default 0.95; e.g. 0.99 or 99%%): "
                        "a gate fails a case only when its change is past LIMIT and its interval excludes no change")
    p.add_argument("--strict", action="store_true",
                   help="gate flagged cases (unstable, contended, clocks, steps in either file) too (by default they are reported, not gated)")
    p.set_defaults(func=_cmd_compare)

    p = sub.add_parser("import-paddle", help="render PaddlePaddle worker logs (workerlog.N, machine*/) as our reports")
    p.add_argument("log_dir", metavar="LOG_DIR")
    p.add_argument("--out", metavar="DIR", default="reports-paddle",
                   help="report folder (default: reports-paddle in the current folder; not the pytest report folder reports/, "
                        "which pytest runs rewrite)")
    p.add_argument("--name", help="case id (default: paddle:<folder name>)")
    p.add_argument("--schedule", default=None,
                   help="the built-in schedule that ran (see 'schedules', e.g. ZB-V): its stage placement, and its name in "
                        "the report; without it, stage = chunk * p + rank (Paddle's looped placement)")
    p.add_argument("--no-hta", action="store_true", help="skip the per-rank HTA traces")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    add_trace_arguments(p)
    p.set_defaults(func=_cmd_import_paddle)

    p = sub.add_parser("import-torch", help="render torch.profiler traces of a torch.distributed.pipelining run as our reports")
    p.add_argument("trace_dir", metavar="TRACE_DIR", help="folder of per-rank traces (rank*.json, *.json.gz)")
    p.add_argument("--out", metavar="DIR", default="reports-torch", help="report folder (default: reports-torch)")
    p.add_argument("--name", help="case id (default: torch:<folder name>)")
    p.add_argument("--schedule", metavar="CLASS", help="the PyTorch schedule class that ran (checks the stage placement)")
    p.add_argument("--steps", metavar="N,M|A:B", help="ProfilerStep numbers to import (default: all every rank recorded)")
    p.add_argument("--clock-offsets", metavar="NS,NS,...",
                   help="per rank, ns to add to its times, comma-separated in rank order, e.g. 0,-5000 or -5,5 "
                        "(ranks on several hosts; default: fitted from send/receive pairs)")
    p.add_argument("--no-hta", action="store_true", help="skip the per-rank HTA traces")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_cmd_import_torch)

    p = sub.add_parser("export-paddle", help="write a case's jobs as PaddlePaddle profiler log lines (workerlog.N)")
    p.add_argument("results", metavar="RESULTS_JSON")
    p.add_argument("--out", metavar="DIR", required=True)
    p.add_argument("--case", metavar="ID", help="the case to export (needed when the file has several): its id, label, "
                   "or the short label the report shows (test_zoo[ZB-H1]), when only one case has it")
    p.set_defaults(func=_cmd_export_paddle)

    p = sub.add_parser("schedules", help="list registered schedules with their parameters")
    p.set_defaults(func=_cmd_schedules)

    p = sub.add_parser("show", help="print a schedule's slot x rank grid (a rank's jobs in list order) and its figures")
    p.add_argument("schedule", metavar="SCHEDULE", help="a schedule name, or a PyTorch pipeline CSV file")
    p.add_argument("-p", type=positive_count("pipeline ranks"), default=None,
                   help="pipeline ranks (a schedule file gives its own; if given, they must match)")
    p.add_argument("-m", type=positive_count("micro-batches"), default=None, help="micro-batches per step (likewise)")
    p.add_argument("-v", type=positive_count("chunks per rank"), default=None,
                   help="chunks per rank (interleaved schedules; default 1, said when used)")
    p.add_argument("--forward-ms", type=float, default=1.0, help="forward time per stage (ms, default 1)")
    p.add_argument("--backward-ms", type=float, default=2.0, help="full backward time per stage (ms, default 2)")
    p.add_argument("--weight-ms", type=float, default=None,
                   help="weight-gradient part W of the backward (ms, below --backward-ms), for schedules that split the backward "
                        "into I and W (unused otherwise, with a note)")
    p.add_argument("--p2p-latency-ms", type=float, default=0.0,
                   help="time of one transfer between stages on different ranks (ms, default 0)")
    p.add_argument("--comm-model", default="stream", metavar="MODEL",
                   help="how transfers cost time: stream (send/receive jobs on a FIFO comm stream per pair of ranks; default), "
                        "edge (a delay on the dependency, as the published simulators) or free")
    p.add_argument("--all-steps", action="store_true",
                   help=f"draw every step of the grid (by default a grid of more than {GRID_MAX_STEPS} steps shows its first and "
                        f"last {GRID_EDGE})")
    p.set_defaults(func=cmd_show)

    from harness.run_command import add_parser as add_run_parser  # the run subcommand lives in its own module

    add_run_parser(sub)
    return parser


def _import_user_module(name: str) -> None:
    """Import ``name``: a ``.py`` file (by path) or a dotted module name (from the current folder too).

    Raises:
        ConfigError: it cannot be found, or importing it raised (names the exception and the line).
    """
    import importlib
    import importlib.util
    import traceback

    try:
        if name.endswith(".py") or "/" in name or "\\" in name:
            path = Path(name)
            if not path.is_file():
                raise ConfigError(f"--import {name}: no such file")
            # A module name of its own per file: two files called mb.py stay two modules (their builders
            # then clash by name, as they should), and a file called harness.py cannot shadow the package.
            module_name = f"_harness_import_{re.sub(r'[^0-9A-Za-z_]', '_', str(path.resolve()))}"
            spec = importlib.util.spec_from_file_location(module_name, path)
            if spec is None or spec.loader is None:
                raise ConfigError(f"--import {name}: not a Python module")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))  # as `python -m` would find it
            importlib.import_module(name)
    except HarnessError:
        raise
    except ModuleNotFoundError as exc:
        raise ConfigError(f"--import {name}: {exc}") from None
    except Exception as exc:  # the user's module failed: say where, in one line
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
        raise ConfigError(f"--import {name}: importing it raised {type(exc).__name__}: {exc}{where}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (see module doc)."""
    parser = build_parser()
    from harness.imports.torch_args import join_negative_values

    args, extra = parser.parse_known_args(join_negative_values(list(sys.argv[1:] if argv is None else argv)))
    if extra:  # name the command whose options they are not, with its own usage line (argparse shows the top one)
        chosen = next((action.choices[args.command] for action in parser._subparsers._group_actions  # type: ignore[union-attr]
                       if isinstance(action, argparse._SubParsersAction) and args.command in action.choices), parser)
        chosen.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        for module in args.imports:
            _import_user_module(module)
        return int(args.func(args))
    except HarnessError as exc:
        _err(f"error: {exc}")
        return 2
    except BrokenPipeError:  # pragma: no cover - e.g. piped into head
        return 0
    except OSError as exc:
        _err(f"error: {exc.filename or ''}{': ' if exc.filename else ''}{exc.strerror or exc}")
        return 2
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
