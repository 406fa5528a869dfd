"""``python -m harness import-torch``: ``torch.profiler`` traces of a ``torch.distributed.pipelining`` run rendered as the harness's reports."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path
from typing import Any

from harness.cli.common import check_out, err, say_publish_note

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Add the ``import-torch`` subcommand to ``sub`` (the top parser's subparsers)."""
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


def _cmd_import_torch(args: argparse.Namespace) -> int:
    from harness.imports.torch import TorchTraceWarning, import_torch_traces

    check_out(args.out)
    from harness.cli.torch_args import clock_offsets_list, steps_list

    steps = steps_list(args.steps) if args.steps else None
    offsets = clock_offsets_list(args.clock_offsets) if args.clock_offsets else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TorchTraceWarning)
        files, case = import_torch_traces(Path(args.trace_dir), Path(args.out), name=args.name, steps=steps,
                                          schedule_class=args.schedule, clock_offsets_ns=offsets, hta=not args.no_hta,
                                          progress=None if args.quiet else err)
    warned = set()
    for w in caught:  # input the import left out (a field of the wrong type, ...): a warning
        if issubclass(w.category, TorchTraceWarning):
            err(f"warning: {w.message}")
            warned.add(str(w.message))
    for note in case.get("warnings", []):  # the case's other notes (said once: a warning above is among them)
        if note not in warned:
            err(f"note: {note}")
    rep = case.get("replay") or {}
    n_steps = len(case["steps"])
    ref = f"step {rep.get('reference_step')}" + (  # one real step: the lower median (imports.replay's module doc)
        "" if n_steps < 2 else ", the shorter of 2" if n_steps == 2 else f", the {'lower ' if n_steps % 2 == 0 else ''}median of {n_steps}")
    print(f"{files.index} ({len(case['jobs']['kind'])} jobs on {case['schedule']['p']} rank(s), {n_steps} step(s); "
          f"measured {ref}: {rep.get('measured_step_ns', 0) / 1e6:.3f} ms, simulated {rep.get('simulated_step_ns', 0) / 1e6:.3f} ms)")
    say_publish_note(files)
    return 0
