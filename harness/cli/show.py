"""The ``show`` subcommand: a schedule's slot x rank grid and its figures, from the command line.

``python -m harness show SCHEDULE -p 4 -m 8 [-v 2]`` prints the grid (every rank's jobs in
order), the analytic step time, bubble and span bubble, and the closed-form theory beside them
(:mod:`harness.analysis.analytic`, :mod:`harness.analysis.theory`); :mod:`harness.cli` parses its options.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from harness.cli.common import err, positive_count
from harness.errors import ConfigError
from harness.model.assumptions import DURATION_BASIS_PREFIXES
from harness.model.cost import CostModel
from harness.model.values import MAX_DURATION_NS
from harness.schedule.chains import CHAINS_PARAM
from harness.schedule.groups import groups_of

__all__ = ["GRID_EDGE", "GRID_MAX_STEPS", "cmd_show"]




def cmd_show(args: argparse.Namespace) -> int:
    """Print the schedule named by ``args`` (see :func:`harness.cli.build_parser`); 0.

    Raises:
        ConfigError: no schedule, or a bad size, duration or comm model (named by its flag).
    """
    from harness.analysis import analytic as analytics
    from harness.analysis.theory import is_builtin_order, theory_for
    from harness.case import PipelineCase
    from harness.model.cost import FixedCost
    from harness.plan.build import build_plan
    from harness.schedule.model import Job, JobKind
    from harness.schedule.registry import builder_info

    if not args.schedule.strip():
        raise ConfigError("no schedule given: name one (see `pipeline-harness schedules`) or give a PyTorch pipeline .csv file")
    _check_show_costs(args)  # in the flags' names: FixedCost.ms would speak of F, B and W
    from harness.model.comm import check_comm_model

    comm_model = check_comm_model(args.comm_model, "--comm-model")
    if not args.p2p_latency_ms >= 0:  # also NaN
        raise ConfigError(f"--p2p-latency-ms must be 0 or more (ms per transfer), got {args.p2p_latency_ms}")
    cost = FixedCost.ms(F=args.forward_ms, B=args.backward_ms, **({"W": args.weight_ms} if args.weight_ms is not None else {}),
                        p2p_latency_ns=round(args.p2p_latency_ms * 1e6),
                        **({"overlap_ratio": args.overlap_ratio} if args.overlap_ratio is not None else {}))
    # A file of that name that is no schedule name is the file (`show my_schedule`), as `./my_schedule` would be.
    given_file = Path(args.schedule).is_file() and not _is_schedule_name(args.schedule)
    case = PipelineCase(Path(args.schedule) if given_file else args.schedule, stages=args.p, microbatches=args.m,
                        chunks=1 if args.v is None else args.v, cost=cost, comm_model=comm_model)
    # A file (or what is not a schedule name): say plainly when it is not one, before its suffix is looked at.
    given = Path(args.schedule)
    if given.is_dir() and (isinstance(case.schedule, Path) or not _is_schedule_name(args.schedule)):
        raise ConfigError(f"{args.schedule}: is a directory, not a schedule file (a PyTorch pipeline .csv)")
    if isinstance(case.schedule, Path) and not given.exists():
        raise ConfigError(f"{args.schedule}: no such file" + (
            f"; for the built-in schedule, give its name alone: show {given.name}" if _is_schedule_name(given.name) else ""))
    if isinstance(case.schedule, str):  # a name, not a file: is it one we know, then are the sizes there?
        info = builder_info(case.schedule)  # raises for an unknown name, listing the valid ones
        missing = [flag for flag, value in (("-p (pipeline ranks)", args.p), ("-m (micro-batches per step)", args.m)) if value is None]
        if missing:
            raise ConfigError(f"schedule {info.name!r} needs its sizes: give {' and '.join(missing)}, "
                              f"e.g. show {args.schedule} -p {args.p or 4} -m {args.m or 8}")
        if info.takes_chunks and args.v is None:  # v=1 interleaves nothing (Interleaved1F1B refuses it): ask for it
            raise ConfigError(f"schedule {info.name!r} places several chunks per rank: give -v (chunks per rank), "
                              f"e.g. show {args.schedule} -p {args.p} -m {args.m} -v 2")
    schedule = case.build()
    # Validate (and time) before printing anything: a schedule that is out of order or
    # deadlocks is shown once, in the error's grid, not also above it.
    plan = build_plan(schedule)
    a = analytics.analyze(plan, cost, comm_model=comm_model)
    th = theory_for(case, plan, comm_model=comm_model)
    from harness.schedule.registry import schedule_notes

    for note in schedule_notes(schedule):
        err(f"note: {note}")
    if args.weight_ms is not None and not any(job.kind in (JobKind.I, JobKind.W) for _, _, job in schedule.jobs()):
        err(f"note: --weight-ms is unused: {schedule.name} does not split the backward (no I or W jobs); "
             "its B jobs take --backward-ms")
    print(_grid(schedule, args.all_steps))
    print()
    p, m, v = schedule.num_ranks, schedule.num_microbatches, schedule.chunks_per_rank
    splits = any(job.kind in (JobKind.I, JobKind.W) for _, _, job in schedule.jobs())
    i_ns, w_ns = (cost.duration_ns(Job(0, k, 0), schedule.num_stages) for k in (JobKind.I, JobKind.W))
    split = f" (I={i_ns / 1e6:g} ms, W={w_ns / 1e6:g} ms" + ("" if args.weight_ms is not None else ": B split in half; --weight-ms sets W") + ")"
    print(f"{schedule.name}: p={p}, m={m}, v={v}, {schedule.num_jobs} jobs per step; "
          f"cost F={args.forward_ms:g} ms, B={args.backward_ms:g} ms" + (split if splits else ""))
    # What a job's duration covers, said once: the cost model's own sentence on it is left out of the assumes: lines below.
    if schedule.params.get(CHAINS_PARAM):  # DualPipe: each stage runs its direction's m/2 micro-batches
        work = m * (args.forward_ms + args.backward_ms)
        print(f"durations are per stage: each rank runs m*(F+B) = {m}*({args.forward_ms:g}+{args.backward_ms:g}) ms = {work:g} ms "
              f"of work per step ({schedule.name}: its {v} stages run m/2 micro-batches each, one per direction; each stage is "
              "1/p of the model, as a v=1 schedule's)")
    elif v > 1:  # ZB-V, DualPipeV, interleaved: a job is one chunk's, 1/v of a v=1 stage
        work = v * m * (args.forward_ms + args.backward_ms)
        part = "half" if v == 2 else f"1/{v}"
        print(f"durations are per chunk: each rank runs v*m*(F+B) = {v}*{m}*({args.forward_ms:g}+{args.backward_ms:g}) ms "
              f"= {work:g} ms of work per step ({v} chunks per rank, each {part} of a v=1 schedule's stage: for the same model as a "
              f"v=1 schedule, divide F and B by {v}, and a rank runs m*(F+B) of that schedule's per-stage F and B)")
    else:
        work = m * (args.forward_ms + args.backward_ms)
        print(f"durations are per stage: each rank runs m*(F+B) = {m}*({args.forward_ms:g}+{args.backward_ms:g}) ms = {work:g} ms "
              "of work per step")
    if groups_of(schedule):
        print(_groups_line(schedule, cost, args.overlap_ratio, max(a.busy_ns)))
    elif args.overlap_ratio is not None:
        err(f"note: --overlap-ratio is unused: {schedule.name} has no overlapped F&B pairs")
    makespan, bubble, over, peaks = a.makespan_ns, a.bubble_ratio, a.bubble_over_ideal, a.peak_inflight
    print(f"step time {makespan / 1e6:.3f} ms (analytic timeline, comm model {comm_model})")
    bubble_th = th.get("bubble_ratio")
    no_theory = "; no closed-form theory for this schedule, these sizes and costs"
    print(f"bubble {100 * bubble:.2f}% of total (idle share), {100 * over:.2f}% over ideal time"
          + (f"; theory {100 * bubble_th:.2f}% of total" if bubble_th is not None else no_theory))
    spans = a.span_bubble_ns
    free = cost.is_uniform(schedule.num_stages)  # the closed forms assume free transfers (docs/schedules.md)
    span_th = _span_theory(schedule.name, p, m, cost, schedule.num_stages) if free and is_builtin_order(schedule) else None
    print("span bubble per rank (idle between its own first and last job; the zero-bubble paper's bubble): "
          + _per_rank([f"{x / 1e6:g}" for x in spans]) + " ms"
          + (f"; theory, worst rank: {span_th / 1e6:g} ms (arXiv:2401.10241, Table 2)" if span_th is not None else ""))
    readme = _dualpipe_line(schedule, cost, a.idle_ns, free and is_builtin_order(schedule))
    if readme:
        print(readme)
    if a.p2p_messages:
        print(f"point-to-point: {a.p2p_messages} messages" + (f", {a.p2p_bytes:,} bytes" if a.p2p_bytes else "") + " per step")
    peak_th = th.get("peak_inflight")
    print("peak in-flight per rank: " + _per_rank(list(map(str, peaks))) + (f"; theory {_per_rank(list(map(str, peak_th)))}" if peak_th else ""))
    from harness.analysis.assumptions import case_assumptions

    # the schedule before the comm model's lowering, so that inserted send/receive jobs are not taken for the schedule's own
    for line in case_assumptions(case.compute_schedule(), schedule, cost, comm_model, case.comm_placement):
        if not line.startswith(DURATION_BASIS_PREFIXES):  # the "durations are per ..." line above says it, with its figure
            print(f"assumes: {line}")
    return 0


#: Per-rank figures past this many ranks are shown as their first and last few.
_PER_RANK_SHOWN = 16


def _per_rank(values: list[str]) -> str:
    """``"a, b, c"``, or for more than :data:`_PER_RANK_SHOWN` ranks the first 8 and the last 4 with the count between."""
    if len(values) <= _PER_RANK_SHOWN:
        return ", ".join(values)
    return ", ".join(values[:8]) + f", … ({len(values) - 12} more) …, " + ", ".join(values[-4:])


#: ``show`` draws grids of more steps than this cut: their first and last :data:`GRID_EDGE` steps.
GRID_MAX_STEPS = 200
GRID_EDGE = 20


def _grid(schedule: Any, all_steps: bool) -> str:
    """The schedule's step x rank grid; over :data:`GRID_MAX_STEPS` steps (unless
    ``all_steps``) its first and last :data:`GRID_EDGE` steps, the cut saying how
    many it hides and how to see them."""
    n_steps = max((len(r) for r in schedule.ranks), default=0)
    lines = schedule.format_grid(max_steps=max(n_steps, 1)).splitlines()  # every step: one header line, one line per step
    if lines and lines[0].startswith("step  "):  # the row is a rank's slot index, not a time step: say so
        lines[0] = "slot" + lines[0][4:]
    if all_steps or n_steps <= GRID_MAX_STEPS or len(lines) != n_steps + 1:
        return "\n".join(lines)
    hidden = n_steps - 2 * GRID_EDGE
    return "\n".join([*lines[: 1 + GRID_EDGE], f"  ... ({hidden} slots not shown; --all-steps shows all {n_steps})",
                      *lines[-GRID_EDGE:]])


def _is_schedule_name(name: str) -> bool:
    from harness.schedule.registry import builder_info

    try:
        builder_info(name)
    except ConfigError:
        return False
    return True


def _check_show_costs(args: argparse.Namespace) -> None:
    """``show``'s durations, checked as :meth:`FixedCost.ms` checks them but named by
    their flags (``--forward-ms``), so the error says which flag to change.

    Raises:
        ConfigError: a duration that is not finite, not positive, below 1 ns or
            not below 2**53 ns, or a ``--weight-ms`` not below ``--backward-ms``.
    """
    flags = (("--forward-ms", args.forward_ms), ("--backward-ms", args.backward_ms), ("--weight-ms", args.weight_ms))
    for flag, value in flags:
        if value is None:
            continue
        if not math.isfinite(value):
            raise ConfigError(f"{flag} must be a finite number of milliseconds, got {value!r}")
        if value <= 0:
            raise ConfigError(f"{flag} must be positive, got {value:g} ms")
        if round(value * 1e6) == 0:
            raise ConfigError(f"{flag} must be at least 1 ns (0.000001 ms), got {value:g} ms")
        if value * 1e6 >= MAX_DURATION_NS:
            raise ConfigError(f"{flag} must be below {MAX_DURATION_NS / 1e6:g} ms (2**53 ns, about 104 days), got {value:g} ms")
    if args.weight_ms is not None and round(args.weight_ms * 1e6) >= round(args.backward_ms * 1e6):
        w, b = f"{args.weight_ms:.15g}", f"{args.backward_ms:.15g}"  # as typed, not rounded to 6 digits
        ns = (f" (durations are whole ns: {round(args.weight_ms * 1e6)} ns is not below {round(args.backward_ms * 1e6)} ns)"
              if args.weight_ms < args.backward_ms else "")
        raise ConfigError(f"--weight-ms {w} must be below --backward-ms {b}{ns}: W is the weight part of "
                          f"the full backward, the rest (I = {b} - {w} ms) is the input part")


def _groups_line(schedule: Any, cost: CostModel, ratio: float | None, busiest_ns: int) -> str:
    """The line that says how ``show`` times the schedule's overlapped F&B pairs (:mod:`harness.plan.groups`)."""
    from harness.schedule.model import Job, JobKind

    n = schedule.num_stages
    f, b = (cost.duration_ns(Job(0, k, 0), n) for k in (JobKind.F, JobKind.B))
    g = cost.overlapped_group_ns((Job(0, JobKind.F, 0), Job(0, JobKind.B, 0)), (f, b), n)  # type: ignore[attr-defined]
    rule = ("F + B, no overlap, as PyTorch's runtime runs OVERLAP_F_B; --overlap-ratio 0 gives max(F, B)" if ratio is None
            else f"--overlap-ratio {ratio:g}: max(F, B) + {ratio:g} x (F + B - max(F, B))")
    return (f"overlapped F&B pairs ({len(groups_of(schedule))} per step): each starts when both its inputs are in and lasts "
            f"{g / 1e6:g} ms ({rule}); the busiest rank is busy {busiest_ns / 1e6:g} ms per step")


def _dualpipe_line(schedule: Any, cost: CostModel, idle_ns: list[int], applies: bool) -> str | None:
    """For DualPipe and DualPipeV: the worst rank's idle beside the DualPipe README's bubble, where it holds
    (:func:`harness.analysis.theory.dualpipe_bubble_time`), or the regime it needs; ``None`` for other schedules."""
    from harness.analysis import theory
    from harness.schedule.model import Job, JobKind
    from harness.schedule.registry import builder_info

    try:
        name = builder_info(schedule.name).name
    except ConfigError:
        return None
    if name not in ("DualPipe", "DualPipeV"):
        return None
    n = schedule.num_stages
    t_f, t_i, t_w = (cost.duration_ns(Job(0, k, 0), n) for k in (JobKind.F, JobKind.I, JobKind.W))
    t_fb = cost.overlapped_group_ns((Job(0, JobKind.F, 0), Job(0, JobKind.B, 0)), (t_f, t_i + t_w), n)  # type: ignore[attr-defined]
    p, m = schedule.num_ranks, schedule.num_microbatches
    bubble = theory.dualpipe_bubble_time(name, p, m, t_f, t_i, t_w, t_fb) if applies else None
    head = f"worst rank's idle {max(idle_ns, default=0) / 1e6:g} ms per step"
    pp = f"PP = {p if name == 'DualPipe' else 2 * p}"
    if bubble is not None:
        return (f"{head}; DualPipe README's (PP/2-1)(F&B+B-3W), {pp}: {bubble / 1e6:g} ms (it holds here: F = I, W <= F, "
                "transfers free, m >= 2p)")
    return (f"{head}; the DualPipe README's (PP/2-1)(F&B+B-3W) is not shown: these schedules meet it only for F = I, "
            "W <= F, transfers free and m >= 2p")


def _span_theory(name: str, p: int, m: int, cost: CostModel, num_stages: int) -> float | None:
    """The zero-bubble paper's per-rank bubble (ns) for ZB-H1/ZB-H2 where it applies, else None."""
    from harness.analysis import theory
    from harness.schedule.model import Job, JobKind

    t_f, t_b, t_w = (cost.duration_ns(Job(0, k, 0), num_stages) for k in (JobKind.F, JobKind.I, JobKind.W))
    return theory.zb_span_bubble(name, p, m, t_f, t_b, t_w)


def add_parser(sub: Any) -> None:
    """Add the ``show`` subcommand to ``sub`` (the top parser's subparsers)."""
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
    p.add_argument("--overlap-ratio", type=float, default=None, metavar="R",
                   help="how long an overlapped F&B pair lasts (DualPipe, DualPipeV): max(F, B) + R (F + B - max(F, B)), R in "
                        "[0, 1]; 0 is perfect overlap, max(F, B); default F + B, no overlap, as PyTorch's runtime runs OVERLAP_F_B")
    p.add_argument("--p2p-latency-ms", type=float, default=0.0,
                   help="time of one transfer between stages on different ranks (ms, default 0)")
    p.add_argument("--comm-model", default="stream", metavar="MODEL",
                   help="how transfers cost time: stream (send/receive jobs on a FIFO comm stream per pair of ranks; default), "
                        "edge (a delay on the dependency, as the published simulators), blocking (send/receive jobs on the compute "
                        "streams, a send meeting its receive, placed so that nothing deadlocks) or free")
    p.add_argument("--all-steps", action="store_true",
                   help=f"draw every step of the grid (by default a grid of more than {GRID_MAX_STEPS} steps shows its first and "
                        f"last {GRID_EDGE})")
    p.set_defaults(func=cmd_show)
