"""``python -m harness report``: re-render a report folder (page, traces, HTA traces) from a results file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.cli.common import check_out, err, say_publish_note
from harness.errors import ConfigError
from harness.report.output import add_trace_arguments, trace_options_of

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """Add the ``report`` subcommand to ``sub`` (the top parser's subparsers)."""
    p = sub.add_parser("report", help="re-render index.html and traces from a results JSON")
    p.add_argument("results", metavar="RESULTS_JSON")
    p.add_argument("--out", metavar="DIR", help="report folder (default: the results file's folder)")
    p.add_argument("--no-hta", action="store_true", help="skip the per-rank HTA traces")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    add_trace_arguments(p)
    p.set_defaults(func=_cmd_report)


def _cmd_report(args: argparse.Namespace) -> int:
    from harness.report.render import write_report
    from harness.report.results import load_results

    src = Path(args.results)
    check_out(args.out, "render beside the results file")
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
    files = write_report(out, doc, hta=not args.no_hta, source=str(src), progress=None if args.quiet else err,
                         notice=err, trace_options=trace_options_of(args), left_out=left_out,
                         write_results_if_left_out=not in_place)
    for entry in left_out:
        err(f"error: {entry['message']}; left out of the report")
    print(f"{files.index} ({len(doc['cases'])} case(s); traces in {out / 'traces'}" + ("" if args.no_hta else f", HTA traces in {out / 'hta'}") + ")")
    if left_out:
        kept = "" if in_place else f"; {files.results} lacks them too, {src} still holds them"
        err(f"{len(left_out)} damaged case(s) of {src} left out of the report (listed on its page{kept})")
        say_publish_note(files)
        return 1
    say_publish_note(files)
    return 0
