"""``python -m harness compare``: per-case changes between two results files, with confidence intervals, verdicts and gates."""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from harness.analysis.compare import parse_thresholds
from harness.cli.common import case_named, err
from harness.errors import ConfigError, InputFormatError

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Add the ``compare`` subcommand to ``sub`` (the top parser's subparsers)."""
    p = sub.add_parser("compare", help="per-case deltas between two results files, or between any two cases (--case A --case B, "
                                       "of one file or of two); with --fail, exit 1 past a threshold, when a base case is "
                                       "missing or a new case's test failed that passed in BASE")
    p.add_argument("base", metavar="BASE")
    p.add_argument("new", metavar="NEW", nargs="?",
                   help="the second results file; without it, --case A --case B compares two cases of BASE")
    p.add_argument("--case", action="append", metavar="ID",
                   help="compare these cases instead of matching ids: --case A --case B (A of BASE, B of NEW, or both of BASE "
                        "without NEW), e.g. two schedules; --case A alone compares case A of BASE with case A of NEW. An id as "
                        "written, a label, the short label the report shows (test_schedule_zoo[ZB-H1]) or the name on disk (1F1B_p=4_m=8)")
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
    from harness.analysis.compare import compare_documents, mismatch_groups, parse_confidence
    from harness.report.fields import check_cases
    from harness.report.identity import model_differences
    from harness.report.results import every_case_damaged, load_results

    thresholds = parse_thresholds(args.fail or [])
    confidence = parse_confidence(args.confidence)
    wanted = list(args.case or [])
    if len(wanted) > 2:
        raise ConfigError(f"--case was given {len(wanted)} times; compare takes two cases: --case A --case B")
    names = (args.base, args.new if args.new is not None else args.base)
    if args.new is None and len(wanted) != 2:
        raise ConfigError("compare needs NEW (a second results file), or --case A --case B to compare two cases of "
                          f"{names[0]}" + (f" (one --case was given: {wanted[0]!r})" if wanted else ""))
    # as `report` checks them: a damaged case (a null bubble, a string step time) is named with file, case and field,
    # and left out; the others are compared (a case left out of NEW is then missing from it, which a gate fails)
    docs = []
    for name in dict.fromkeys(names):
        left_out: list[dict[str, Any]] = []
        doc = load_results(Path(name), left_out)
        check_cases(doc, str(name), left_out=left_out)
        twice = next((e for e in left_out if e.get("duplicate")), None)
        if twice is not None:  # which of the two is the case to compare cannot be known
            raise InputFormatError(twice["message"])
        if left_out and not doc["cases"]:
            raise every_case_damaged(left_out)
        if wanted:  # the case asked for is damaged: nothing to compare
            hit = next((e for e in left_out if {e["id"], e["label"]} & set(wanted)), None)
            if hit is not None:
                raise InputFormatError(hit["message"])
        for entry in sorted(left_out, key=lambda e: e["index"]):
            err(f"warning: {entry['message']}; left out of the comparison")
        docs.append(doc)
    base, new = docs[0], docs[-1]
    pair = bool(wanted)
    if pair:  # two cases, whatever their ids: each side a document of one case, under one shown id "A -> B"
        a = case_named(base["cases"], wanted[0], str(names[0]))
        b = case_named(new["cases"], wanted[-1], str(names[1]))
        def short(c: dict[str, Any]) -> str:  # the id after its test file, as the report and the pytest summary show it
            return str(c["id"]).split("::", 1)[-1]

        shown = short(a) if len(wanted) == 1 else f"{short(a)} -> {short(b)}"
        err(f"note: comparing case {a['id']!r} of {names[0]} (base) with case {b['id']!r} of {names[1]} (new)")
        base, new = {**base, "cases": [{**a, "id": shown}]}, {**new, "cases": [{**b, "id": shown}]}
    result = compare_documents(base, new, thresholds, str(names[0]), str(names[1]), confidence=confidence, strict=args.strict)
    deltas, only_base, only_new = result
    if not deltas:
        def one_id(doc: dict[str, Any]) -> str:  # a file of one case: its id in the hint; else a placeholder
            return shlex.quote(str(doc["cases"][0]["id"])) if len(doc["cases"]) == 1 else "ID"

        raise ConfigError(
            f"no case id is in both {names[0]} ({len(base['cases'])} case(s)) and {names[1]} "
            f"({len(new['cases'])} case(s)); nothing was compared: is one of them the wrong file? To compare two cases "
            f"of different ids (another schedule, say), name them: python -m harness compare {names[0]} {names[1]} "
            f"--case {one_id(base)} --case {one_id(new)}"
        )
    for note, ids in mismatch_groups(base, new):
        if pair and len(wanted) == 2 and "a different pipeline" in note:  # two cases asked for: their pipelines may differ, that is the point
            continue
        err(f"warning: {_said_once(ids, note)}")
    new_cases = {str(c["id"]): c for c in new["cases"]}
    base_cases: dict[str, Any] = {}
    for c in base["cases"]:
        base_cases.setdefault(str(c["id"]), c)  # the first of an id, as the deltas take it
    for d in deltas:  # the same case id run on two models: its change is the models', not the schedule's or the code's
        differs = model_differences(base_cases[d.case_id], new_cases[d.case_id])
        if differs:
            where = "the two cases named ran different models" if pair and len(wanted) == 2 else "a different model in the two files"
            err(f"warning: {d.case_id}: {where} ({'; '.join(differs)}); its deltas compare the two models, not two runs of one")
    timed = [d for d in deltas if d.step is not None and d.step.method != "exact"]
    for t in thresholds if timed else []:
        drift = _RUN_DRIFT.get(t.metric)
        if drift is not None and t.limit < drift[0]:
            err(f"warning: the gate {t.describe()} is below what two runs of one commit can differ by on a shared host "
                 f"({drift[1]}, docs/measurement.md): each confidence interval is over one run's own steps and does not "
                 f"hold that drift, so the gate can fail identical code ({len(timed)} timed case(s) compared)")
    zero = [d.case_id for d in deltas if d.step_change is None]
    if zero:
        note = (f"the median step time in {names[0]} is 0 ns, so its change cannot be computed "
                "(shown as n/a; a step_time gate fails it if the new step time is above 0)")
        err(f"warning: {_said_once(zero, note)}")
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
        print(f"only in {names[0]}: {cid}", file=out)
    for cid in only_new:
        print(f"only in {names[1]}: {cid}", file=out)
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
        print(f"FAIL: {len(only_base)} case(s) of {names[0]} missing from {names[1]}", file=out)
    if thresholds and broken:
        print(f"FAIL: {len(broken)} case(s) in {names[1]} ran but their test failed, as it did not in {names[0]}: "
              f"{', '.join(broken)}", file=out)
    if thresholds and still:
        print(f"note: {len(still)} case(s) failed their test in both files (no change, not gated): {', '.join(still)}", file=out)
    return 1 if failed or (thresholds and (only_base or broken)) else 0
