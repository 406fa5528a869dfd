"""``python -m harness import-paddle``: PaddlePaddle worker logs rendered as the harness's reports."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path
from typing import Any

from harness.cli.common import check_out, err, say_publish_note
from harness.report.output import add_trace_arguments, trace_options_of

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Add the ``import-paddle`` subcommand to ``sub`` (the top parser's subparsers)."""
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


def _cmd_import_paddle(args: argparse.Namespace) -> int:
    from harness.imports.paddle import PaddleLogWarning, builtin_schedule_name, import_paddle_logs
    from harness.report.render import write_report
    from harness.report.results import results_document

    check_out(args.out)
    schedule = "PaddlePaddle log" if args.schedule is None else builtin_schedule_name(args.schedule)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PaddleLogWarning)
        case = import_paddle_logs(Path(args.log_dir), name=args.name, schedule_name=schedule)
    for w in caught:
        if issubclass(w.category, PaddleLogWarning):
            err(f"warning: {w.message}")
    doc = results_document([case], {"source": f"PaddlePaddle logs in {args.log_dir}"})
    out = Path(args.out)
    files = write_report(out, doc, hta=not args.no_hta, progress=None if args.quiet else err, source=str(args.log_dir),
                         notice=err, trace_options=trace_options_of(args))
    n = len(case["jobs"]["kind"])
    print(f"{files.index} ({n} jobs on {case['schedule']['p']} device(s), {len(case['steps'])} step(s), "
          f"{len(case['overlaps'])} overlap(s) flagged)")
    say_publish_note(files)
    return 0
