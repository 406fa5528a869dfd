"""The pytest run's words on the terminal: the "pipeline cases" section, the skipped cases with their
reasons, files that failed to collect, and the last line about another run's report (glue of
:mod:`harness.pytest.plugin`; the table itself is :mod:`harness.report.summary`'s).

Every line fits pytest's own width (``COLUMNS``, else the terminal's): the table is made to fit, the
other lines wrap at spaces.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.result import CaseResult
from harness.pytest import xdist as xdist_glue
from harness.report.not_run import KINDS
from harness.report.summary import CaseLine, case_table
from harness.text import shown_in_terminal

__all__ = ["SKIPPED_CASE", "SkippedCases", "header_line", "publish_note", "say_collection_errors", "shown_path", "skip_reason", "wrapped_line",
           "write_summary"]


def shown_path(path: Path) -> str:
    """``path`` relative to the current folder when it is below it, for messages."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return str(path)


#: The user property that marks the report of a skipped pipeline case (its value: the reason).
SKIPPED_CASE = "pipeline_harness_skipped_case"


class SkippedCases:
    """Notes each skipped pipeline case's report, with its reason, in the run's ``HarnessConfig`` (:mod:`harness.pytest.plugin`): this
    process's reports, or under pytest-xdist the controller's copies of the workers' (their
    ``user_properties`` travel with them)."""

    def __init__(self, hc: Any) -> None:
        self._hc = hc

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, reason in getattr(report, "user_properties", ()):
            if key == SKIPPED_CASE:
                self._hc.skipped.append((report.nodeid, str(reason)))


def skip_reason(report: pytest.TestReport) -> str:
    """A skipped test's reason, as ``-rs`` shows it (without its ``Skipped: `` prefix)."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
    return str(text).removeprefix("Skipped: ").strip() or "no reason given"


def wrapped_line(line: str, width: int | None) -> list[str]:
    """``line`` wrapped at spaces to ``width`` (continuation lines indented; a longer word, a path, stays whole)."""
    if width is None or len(line) <= width:
        return [line]
    return textwrap.wrap(line, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False) or [line]


def publish_note(hc: Any) -> str | None:
    """Whether another run publishing into the same report folder replaced this run's report, or this run
    replaced one that other run published while it ran (:mod:`harness.report.concurrent`)."""
    w = hc.written
    if w is None:
        return None
    notes = [n for n in (w.replaced, w.still_ours()) if n]
    return "; ".join(notes) or None


def say_collection_errors(tr: Any, hc: Any) -> None:
    """With --profile-jobs, files that failed to collect stop pytest before any case runs: say that no
    report was written and how to run the other cases; with --continue-on-collection-errors, say the
    report lacks their cases."""
    failed = [r for r in tr.stats.get("error", []) if isinstance(r, pytest.CollectReport)]
    if not failed:
        return
    names = ", ".join(sorted({str(r.nodeid) or "." for r in failed})[:5]) + (", ..." if len(failed) > 5 else "")
    if hc.written is not None:  # --continue-on-collection-errors: the report is there, without their cases
        tr.write_line(f"pipeline-harness: {len(failed)} file(s) failed to collect ({names}): the report in "
                      f"{shown_path(hc.report_dir)}/ holds the other cases only, and names these files among the cases "
                      "that did not run", yellow=True)
    elif not hc.results:
        tr.write_line(f"pipeline-harness: {len(failed)} file(s) failed to collect ({names}), so pytest ran no case and "
                      f"reports in {shown_path(hc.report_dir)}/ were left as they were; fix them, or pass "
                      "--continue-on-collection-errors to run and report the other cases", yellow=True)


def write_summary(tr: Any, hc: Any, cases: list[CaseResult] | list[CaseLine]) -> None:
    """The "pipeline cases" section: the case table and its notes (:mod:`harness.report.summary`; under
    pytest-xdist, the workers' lines), failed and errored cases, lost workers, where the report is."""
    tr.section("pipeline cases")
    width = getattr(getattr(tr, "_tw", None), "fullwidth", None)  # pytest's own width (COLUMNS, else the terminal's)
    width = width if isinstance(width, int) and width >= 40 else None

    def say(line: str) -> None:  # every line fits pytest's width
        for part in wrapped_line(line, width):
            tr.write_line(part)

    for line in case_table(cases, width) if cases else []:
        tr.write_line(line)
    for nodeid, reason in hc.skipped:  # said without -rs: a case that did not run is part of the picture
        say(shown_in_terminal(f"skipped: {nodeid.split('::', 1)[-1]}: {reason}"))
    failed = [r for r in cases if r.outcome in ("failed", "error")]
    if failed:
        say(f"{len(failed)} case(s) ran but their test failed; reports mark them: "
            + ", ".join(shown_in_terminal(r.label) for r in failed))
    tests = [e for e in hc.not_run if e.get("kind") != "collection"]  # collection errors: said after pytest's summary
    if tests:
        say(f"{len(tests)} case(s) did not run ({', '.join(sorted({KINDS.get(e['kind'], e['kind']) for e in tests}))}; "
            f"pytest's failures above say why){'; the report lists them' if hc.written is not None else ''}: "
            + ", ".join(shown_in_terminal(e["label"]) for e in tests))
    errored = hc.session.errored if hc.session is not None else []
    if errored:
        say(f"{len(errored)} case(s) ran but could not be reported (listed as errored in the report; "
            "every other case was written):")
        for e in errored:
            say(shown_in_terminal(f"  {e['id']}: {e['error']}"))
    for line in xdist_glue.summary_lines(tr.config, hc.lost, bool(cases)):  # lost workers; pytest-benchmark off
        for part in wrapped_line(line, width):
            tr.write_line(part, yellow=True)
    d = shown_path(hc.report_dir)
    if hc.interrupted:
        stop = xdist_glue.stop_reason(tr.config)  # -x under pytest-xdist ends the run as interrupted
        why = f" (pytest-xdist ends a run it stops early as interrupted: {stop}; run without -x/--maxfail for a report)" if stop else ""
        say(f"run interrupted{why}: reports in {d}/ were left as they were; nothing of this run was written")
    elif getattr(hc, "write_error", None):
        say(f"no report of this run was written, and reports in {d}/ were left as they were: the run's last line says why")
    elif hc.written:
        if hc.interrupted_after_write:
            say(f"run interrupted while the report was being published; it was completed first, so {d}/ holds this run")
        w = hc.written
        say(f"reports: {shown_path(w.index)} · {shown_path(w.results) if w.results else ''} · "
            f"{len(w.traces)} trace(s) in {d}/traces/ · HTA traces in {d}/hta/")


def header_line(hc: Any, config: pytest.Config) -> str:
    """The line pytest prints under its header: the backend and why, the split of the cases over workers, and
    how steps are recorded and where the report goes (or that report options do nothing without
    ``--profile-jobs``). ``hc`` is the plugin's configuration (:class:`harness.pytest.plugin.HarnessConfig`)."""
    from harness.errors import HarnessError
    from harness.report.output import TRACE_OPTIONS

    try:
        c = hc.choice
    except HarnessError as exc:  # only reachable for odd names; configure already checked
        return f"pipeline-harness: {exc}"
    line = f"pipeline-harness: {c.name} backend ({c.reason})"
    if hc.split:
        line += f"; {hc.split}"
    if hc.profile:
        st = hc.steps
        if isinstance(st, range):
            warm = f"after {st.start} warm-up step{'s' if st.start != 1 else ''}" if st.start else "no warm-up"
            line += f"; recording steps {st.start}-{st.stop - 1} ({warm}) to {shown_path(hc.report_dir)}/"
        elif c.name == "sim":
            line += f"; recording 1 step after {st.warmup_steps} warm-up (sim is exact) to {shown_path(hc.report_dir)}/"
        else:
            line += (f"; measuring until stable: median step time to {100 * st.target:g}% after {st.warmup_steps} warm-up "
                     f"({st.min_steps}-{st.max_steps} steps, {st.max_time_ns / 1e9:g} s per case) to {shown_path(hc.report_dir)}/")
    else:  # report options given without a report: say they do nothing
        unused = [name for name in ("--report-dir", *(o for o, _, _ in TRACE_OPTIONS))
                  if config.getoption(name) not in (None, False)]
        if unused:
            line += (f"; note: {', '.join(unused)} {'does' if len(unused) == 1 else 'do'} nothing without --profile-jobs "
                     "(no report is written)")
    return line
