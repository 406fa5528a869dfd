"""``python -m harness export-paddle``: a case's jobs written as PaddlePaddle profiler log lines, for tools that parse them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.cli.common import case_named, check_out, err
from harness.errors import ConfigError, InputFormatError

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Add the ``export-paddle`` subcommand to ``sub`` (the top parser's subparsers)."""
    p = sub.add_parser("export-paddle", help="write a case's jobs as PaddlePaddle profiler log lines (workerlog.N)")
    p.add_argument("results", metavar="RESULTS_JSON")
    p.add_argument("--out", metavar="DIR", required=True)
    p.add_argument("--case", metavar="ID", help="the case to export (needed when the file has several): its id as written, its label, "
                   "the short label the report shows (test_schedule_zoo[ZB-H1]), or its name on disk (the report's "
                   "traces/1F1B_p=4_m=8.json, with or without the folder and .json), when only one case has it")
    p.set_defaults(func=_cmd_export_paddle)


def _cmd_export_paddle(args: argparse.Namespace) -> int:
    from harness.imports.paddle import write_paddle_logs
    from harness.imports.paddle_export import left_out
    from harness.report.fields import check_cases
    from harness.report.results import load_results

    check_out(args.out)
    damaged: list[dict[str, Any]] = []  # checked as `report` checks them; only the case exported must be whole
    doc = load_results(Path(args.results), damaged)
    check_cases(doc, str(args.results), left_out=damaged)
    cases = doc["cases"]
    wanted = [e for e in damaged if args.case is None or args.case in (e["id"], e["label"])]
    if wanted and (args.case is not None or (not cases and len(damaged) == 1)):
        raise InputFormatError(wanted[0]["message"])  # the case asked for (or the file's only one) is damaged: nothing is written
    if args.case is not None:
        cases = [case_named(cases, args.case, args.results)]
    elif len(cases) + len(damaged) != 1:
        ids = [str(c["id"]) for c in cases] + [str(e["id"]) for e in damaged]
        shown = ", ".join(ids[:20]) + (f", ... ({len(ids) - 20} more)" if len(ids) > 20 else "")
        raise ConfigError(f"{args.results} holds {len(ids)} cases; pick one with --case ID: {shown}" if ids
                          else f"{args.results} holds no case to export")
    paths = write_paddle_logs(Path(args.out), cases[0])
    print(f"{len(paths)} worker log(s) in {args.out}")
    dropped = left_out(cases[0])
    if dropped:
        err(f"note: {sum(dropped.values())} job(s) left out ({', '.join(f'{n} {k}' for k, n in sorted(dropped.items()))}): "
             "Paddle's profiler has no job type for them")
    return 0
