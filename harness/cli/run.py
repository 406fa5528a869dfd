"""``python -m harness run``: run one schedule on a backend and write its report, without pytest;
``python -m harness merge-ranks``: the report of per-rank part files written by separate processes.

    python -m harness run 1F1B -p 4 -m 8 --forward-ms 2 --backward-ms 4 --backend cpu --out reports-run
    mpirun -n 4 python -m harness run 1F1B -p 4 -m 8 --backend mpi --out reports-mpi
    torchrun --standalone --nproc-per-node=2 -m harness run ZB-V -p 2 -m 4 --backend torch --out reports-torch
    python -m harness run ZB-V -p 2 -m 4 --backend torch    # launches its 2 ranks itself
    python -m harness merge-ranks rank0.json rank1.json rank2.json rank3.json 1F1B -p 4 -m 8 --out merged

Under ``mpirun`` with ``--backend mpi`` every process runs its pipeline rank (:mod:`harness.distributed.mpi`);
only MPI rank 0 prints the summary line and writes the report. ``--backend torch`` runs the schedule on
PyTorch's own pipelining runtime (:mod:`harness.distributed.torch_backend`): under torchrun every process
is one rank and only rank 0 reports (a case for another number of processes is refused on rank 0 alone,
before anything is written); without torchrun the command launches the ranks itself through
torch's elastic launcher (``--no-launch``: it says the torchrun command instead). The report is published as the
pytest plugin's is (staged, then moved into place), so a failed or interrupted run leaves the
previous one intact.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.cli.common import positive_count, say_publish_note
from harness.report.output import add_trace_arguments, trace_options_of

__all__ = ["add_parser", "merge_ranks", "positive_count", "run"]




def add_parser(sub: Any) -> None:
    """Add the ``run`` subcommand to the command line's subparsers ``sub``."""
    p = sub.add_parser("run", help="run one schedule on a backend (sim, cpu, cuda, mpi under mpirun, torch on PyTorch's pipelining "
                                   "runtime) and write its report")
    p.add_argument("schedule", metavar="SCHEDULE", help="a schedule name (python -m harness schedules lists them) or a PyTorch "
                                                       "pipeline .csv")
    p.add_argument("-p", type=positive_count("pipeline ranks"), required=True,
                   help="pipeline ranks (under --backend mpi or torch: the number of processes)")
    p.add_argument("-m", type=positive_count("micro-batches"), required=True, help="micro-batches per step")
    p.add_argument("-v", type=positive_count("chunks per rank"), default=None, help="chunks per rank (interleaved schedules)")
    p.add_argument("--forward-ms", type=float, default=1.0, help="forward time per stage (ms, default 1)")
    p.add_argument("--backward-ms", type=float, default=2.0, help="full backward time per stage (ms, default 2)")
    p.add_argument("--activation-bytes", type=int, default=4096, help="bytes each send moves (default 4096)")
    p.add_argument("--optimizer", action="store_true", help="append an optimizer step (OPT job) per stage")
    p.add_argument("--backend", default="auto", help="auto, sim, cpu, cuda, mpi or torch (default auto)")
    p.add_argument("--steps", default=None, metavar="START:END",
                   help="recorded steps; earlier ones are warm-up (default 1:6; on sim, which is exact, 1:2)")
    p.add_argument("--transfer-timeout-s", type=float, default=None,
                   help="mpi: longest wait for one transfer; torch: the process group's timeout (s, default 60)")
    p.add_argument("--torch-lowering", choices=("torch", "harness"), default=None,
                   help="torch: PyTorch lowers the compute order (torch, the default) or is handed the harness's placement")
    p.add_argument("--torch-traces", default=None, metavar="DIR",
                   help="torch: also write torch.profiler traces of the recorded steps there (for import-torch)")
    p.add_argument("--no-launch", action="store_true",
                   help="torch without torchrun: say the torchrun command instead of launching the ranks")
    p.add_argument("--out", default="reports-run", metavar="DIR", help="report folder (default reports-run)")
    add_trace_arguments(p)
    p.set_defaults(func=run)

    q = sub.add_parser("merge-ranks", help="merge per-rank part files (harness.distributed.rank_merge.write_part) of one run onto rank 0's "
                                           "clock and write its report")
    q.add_argument("parts", metavar="PART", nargs="+", help="one part file per rank (any order)")
    q.add_argument("schedule", metavar="SCHEDULE", help="the schedule the run used (a name, or a PyTorch pipeline .csv)")
    q.add_argument("-p", type=positive_count("pipeline ranks"), required=True, help="pipeline ranks of the run")
    q.add_argument("-m", type=positive_count("micro-batches"), required=True, help="micro-batches per step of the run")
    q.add_argument("-v", type=positive_count("chunks per rank"), default=None, help="chunks per rank (interleaved schedules)")
    q.add_argument("--forward-ms", type=float, default=1.0, help="the run's forward time per stage (ms, default 1): the theory's")
    q.add_argument("--backward-ms", type=float, default=2.0, help="the run's backward time per stage (ms, default 2)")
    q.add_argument("--out", default="reports-merged", metavar="DIR", help="report folder (default reports-merged)")
    add_trace_arguments(q)
    q.set_defaults(func=merge_ranks)


def run(args: argparse.Namespace) -> int:
    """Run the case the arguments describe; write the report on rank 0 (every process elsewhere).

    Returns:
        0 when the case ran.

    Raises:
        HarnessError: bad arguments, an unusable backend, or a failed run (names the rank under mpi).
    """
    from harness.case import PipelineCase
    from harness.distributed.backends import resolve_backend
    from harness.distributed.launch import check_not_duplicated
    from harness.errors import ConfigError
    from harness.model.cost import FixedCost
    from harness.report.session import ProfileSession
    from harness.run.window import parse_steps
    from harness.runner import run_case

    check_not_duplicated(args.backend, "python -m harness run")
    _check_times(args)
    choice = resolve_backend(args.backend)
    if args.transfer_timeout_s is not None and choice.name not in ("mpi", "torch"):
        raise ConfigError(f"--transfer-timeout-s is for --backend mpi or torch (their transfers between processes); the {choice.name} "
                          "backend has none")
    torch_only = [name for name, given in (("--torch-lowering", args.torch_lowering), ("--torch-traces", args.torch_traces),
                                           ("--no-launch", args.no_launch or None)) if given is not None]
    if torch_only and choice.name != "torch":
        raise ConfigError(f"{', '.join(torch_only)} {'is' if len(torch_only) == 1 else 'are'} for --backend torch")
    try:
        steps = parse_steps(args.steps if args.steps is not None else ("1:2" if choice.name == "sim" else "1:6"))
    except ConfigError as exc:
        raise ConfigError(f"--steps: {exc}") from None
    fields: dict[str, Any] = {"schedule": Path(args.schedule) if args.schedule.lower().endswith(".csv") else args.schedule,
                              "stages": args.p, "microbatches": args.m, "workload": "timed",
                              "cost": FixedCost.ms(F=args.forward_ms, B=args.backward_ms, activation_bytes=args.activation_bytes)}
    if args.v is not None:
        fields["chunks"] = args.v
    if args.optimizer:
        fields["optimizer"] = True
    case = PipelineCase(**fields)
    options: dict[str, Any] = {}
    if choice.name == "torch":
        options = {k: v for k, v in (("timeout_s", args.transfer_timeout_s), ("lowering", args.torch_lowering),
                                     ("trace_dir", args.torch_traces), ("launch", False if args.no_launch else None)) if v is not None}
    elif args.transfer_timeout_s is not None:
        options = {"transfer_timeout_s": args.transfer_timeout_s}
    writes = True
    if choice.name == "mpi":
        from harness.distributed.launch import writes_reports

        writes = writes_reports()
    elif choice.name == "torch":
        from harness.distributed.torch_launch import torchrun_world

        writes = torchrun_world()[0] == 0
        if not _torch_world_ok(case, writes):
            return 2
    session = ProfileSession(Path(args.out), choice, steps, trace_options=trace_options_of(args)) if writes else None
    if session is not None:
        session.prepare()
    result = run_case(case, backend=choice, steps=steps, device_options=options)
    if session is not None:
        session.add(result)
        files = session.write(notice=_warn)
        _refuse_errored(session, files)
        from harness.report.summary import case_notes

        m = result.metrics
        fid = result.fidelity
        against = "" if fid is None else f" ({fid['change']:+.1%} vs the cost model's {fid['predicted_step_ns'] / 1e6:.3f} ms)"
        print(f"{result.label} on {result.records.backend}: median step {m.step_time_median_ns / 1e6:.3f} ms{against}, "
              f"bubble {m.bubble_ratio:.1%}; report: {files.index}")
        for line in result.assumptions or []:  # what the figures rest on: overlap model, per-chunk durations, comm model
            print(f"  assumes: {line}")
        # the notes and flags the pytest summary shows (a figure to distrust says so), and on the torch backend the step
        # beside the sim of the same lowered order and of the ideal schedule, per rank what the runtime added
        for line in case_notes([result]):
            print(line)
        say_publish_note(files)
        session.close()
    return 0


def merge_ranks(args: argparse.Namespace) -> int:
    """Merge the part files ``args.parts`` (:func:`harness.distributed.rank_merge.merge_part_files`: onto rank 0's
    clock, causality checked) and write their report as a run of the schedule the arguments name.

    Returns:
        0 when the report was written.

    Raises:
        InputFormatError: a part file that cannot be read, or two of one rank.
        ConfigError: a rank without clock alignment, a rank missing, or records that are not the
            named schedule's jobs (names the step and the first differences).
    """
    from harness.case import PipelineCase
    from harness.distributed.rank_merge import merge_part_files
    from harness.errors import ConfigError
    from harness.model.cost import FixedCost
    from harness.report.session import ProfileSession
    from harness.run.environment import BackendChoice
    from harness.runner import run_case

    _check_times(args)
    if args.schedule.lower().endswith((".json", ".json.gz")):
        raise ConfigError(f"{args.schedule!r} looks like a part file, not a schedule: give the schedule after the part "
                          f"files (merge-ranks {' '.join(args.parts)} {args.schedule} SCHEDULE -p P -m M)")
    records = merge_part_files([Path(p) for p in args.parts])
    fields: dict[str, Any] = {"schedule": Path(args.schedule) if args.schedule.lower().endswith(".csv") else args.schedule,
                              "stages": args.p, "microbatches": args.m, "workload": "timed",
                              "cost": FixedCost.ms(F=args.forward_ms, B=args.backward_ms)}
    if args.v is not None:
        fields["chunks"] = args.v
    case = PipelineCase(**fields)
    choice = BackendChoice(records.backend, records.backend, f"merged from {len(args.parts)} part file(s)")
    session = ProfileSession(Path(args.out), choice, range(records.warmup_steps, records.warmup_steps + len(records.steps)),
                             trace_options=trace_options_of(args))
    session.prepare()
    result = run_case(case, backend=choice, records=records)
    causality = records.device.get("causality") or {}
    beyond = [v for v in causality.get("violations", []) if not v.get("within_bound")]
    if beyond:  # the clock alignment is shown wrong for these pairs: flag the case, so compare does not gate it silently
        from harness.distributed.rank_merge import CausalityReport
        from harness.run.stability import Flag

        why = CausalityReport(int(causality.get("pairs", 0)), list(causality["violations"]), int(causality.get("bound_ns", 0))).describe()
        result.flags.append(Flag("clocks", str(why)))
        print(f"note: {why}", file=sys.stderr)
    session.add(result)
    files = session.write(notice=_warn)
    _refuse_errored(session, files)
    m = result.metrics
    print(f"{result.label}: {len(args.parts)} rank(s) merged onto rank 0's clock, {causality.get('pairs', 0)} send/receive "
          f"pair(s) checked, {len(causality.get('violations', []))} violation(s); median step {m.step_time_median_ns / 1e6:.3f} ms; "
          f"report: {files.index}")
    say_publish_note(files)
    session.close()
    return 0


def _warn(text: str) -> None:
    """A report's size warning, as one line on stderr (not a Python warning pointing into the harness)."""
    print(text, file=sys.stderr)  # (the text says "warning:" itself)


def _refuse_errored(session: Any, files: Any) -> None:
    """Raise when the one case could not be reported (the session left it out of the report and
    listed it in ``session.errored_cases``): the command must not say it succeeded.

    Raises:
        InputFormatError: the case's error, and where the report (without it) is.
    """
    from harness.errors import InputFormatError

    if session.errored:
        (case,) = session.errored[:1]
        raise InputFormatError(f"case {case['label']!r} ran but cannot be reported: {case['error']}; "
                               f"the report at {files.index} holds no case")


#: How long (s) a torchrun process other than rank 0 waits, after a case for another number of processes, before
#: it exits: torchrun ends every process once one exits, and rank 0 must have said the error by then.
RANK0_SAYS_S = 60.0


def _torch_world_ok(case: Any, rank0: bool) -> bool:
    """Under torchrun, whether the case's ``p`` is the number of processes, checked before anything is written.
    Where it is not, every process meets the same error; rank 0 raises it (one ``error:`` line), the others wait
    (:data:`RANK0_SAYS_S`: torchrun stops them once rank 0 has exited, its exit the run's root cause) and return
    ``False`` without a word.

    Raises:
        ConfigError: on rank 0, the two counts and the torchrun command for ``p``
            (:func:`harness.distributed.torch_backend.check_world`).
    """
    import time

    from harness.distributed.torch_backend import check_world
    from harness.errors import ConfigError

    try:
        check_world(case.compute_schedule().num_ranks, case.label())
    except ConfigError:
        if rank0:
            raise
        time.sleep(RANK0_SAYS_S)
        return False
    return True


def _check_times(args: argparse.Namespace) -> None:
    """Refuse a forward or backward time that is not a positive number of ms, naming the option.

    Raises:
        ConfigError: ``--forward-ms`` or ``--backward-ms`` is not positive and finite.
    """
    import math

    from harness.errors import ConfigError

    for option, value in (("--forward-ms", args.forward_ms), ("--backward-ms", args.backward_ms)):
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(f"{option} must be a positive number of ms, got {value:g}")
