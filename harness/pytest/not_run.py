"""The pipeline cases of a pytest run that never produced a run, for the report (glue of
:mod:`harness.pytest.plugin`; the entries and the page's block are :mod:`harness.report.not_run`'s).

A failed pipeline test whose error came before its case ran (:func:`note_not_run`, from the plugin's
``pytest_runtest_makereport``) carries its entry in the report's ``user_properties``, as a skipped
case does: they travel with the report to pytest-xdist's controller. :class:`NotRunCases` gathers
them, and the files that failed to collect, in the run's ``HarnessConfig``; the session writes them
as ``session.not_run_cases``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ConfigError, HarnessError, InputFormatError, ScheduleError
from harness.pytest.terminal import shown_path
from harness.report.not_run import not_run_entry

__all__ = ["NOT_RUN_CASE", "NotRunCases", "collection_entry", "note_not_run"]

#: The user property that carries a not-run case's entry on its test's report.
NOT_RUN_CASE = "pipeline_harness_not_run_case"

#: Errors that say the harness refused what the case asked for (its configuration), not that its run failed.
_CONFIG_ERRORS = (ConfigError, ScheduleError, InputFormatError)

_SITE = re.compile(r"(\S+?\.py:\d+): ")


def note_not_run(item: pytest.Item, report: pytest.TestReport, exc: BaseException | None, ran_cases: bool,
                 raised_at: str | None) -> None:
    """Add the not-run entry of a failed pipeline test to ``report.user_properties``, where its error
    came before its case ran.

    Listed: a case the harness refused or whose run failed (``pipeline(...)`` marks the error, or any
    :class:`~harness.errors.HarnessError` raised in the test, e.g. by ``PipelineCase(...)``), and a test
    that failed with any other error before it ran a case at all (``ran_cases`` false). Not listed: a
    test that ran its case and then failed otherwise (its case is reported, marked failed), a teardown
    error, a passed, skipped or xfailed test. ``raised_at`` is the innermost ``file:line`` of the test's
    code in the error's traceback, where known.
    """
    if not report.failed or report.when not in ("setup", "call") or exc is None:
        return
    refused = getattr(exc, "_case_refused", None)  # set by the pipeline fixture: (label, site) of the case it ran
    if refused is None and not isinstance(exc, HarnessError) and ran_cases:
        return
    if isinstance(exc, _CONFIG_ERRORS):
        kind = "config"
    elif isinstance(exc, HarnessError) or refused is not None:
        kind = "run"
    else:
        kind = "test"
    text = str(exc)
    named = _SITE.match(text)  # a harness error names the case's line first
    label, case_site = refused if refused is not None else (item.name, None)
    path, lineno, _ = item.location
    site = (named.group(1) if named else None) or case_site or raised_at or (f"{path}:{lineno + 1}" if lineno is not None else path)
    error = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    report.user_properties.append((NOT_RUN_CASE, not_run_entry(item.nodeid, label, kind, error, site)))


def collection_entry(report: pytest.CollectReport) -> dict[str, str]:
    """The not-run entry of a test file (or other collector) that failed to collect: its node id, the
    error's last line (``ModuleNotFoundError: No module named 'x'``, or the harness error's message) and
    the file's line that raised it, where the report names one."""
    if isinstance(report.longrepr, str):  # a harness error, shown as its message (the plugin's collect-report hook)
        text = report.longrepr
        error = text.split("\n(raised at ", 1)[0]
    else:
        text = report.longreprtext
        crash = getattr(report.longrepr, "reprcrash", None)
        raised = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]  # pytest's "E   Error: ..." lines
        error = getattr(crash, "message", None) or (raised[-1] if raised else (text.strip().splitlines() or [""])[-1])
    sites = re.findall(r"^(\S+\.py:\d+): in <module>$", text, re.M) + re.findall(r"raised at (\S+\.py:\d+)\)", text)
    # a file that does not compile: the compiler's 'File "...", line N' (pytest shows it on its "E" lines)
    sites += [f"{shown_path(Path(path))}:{line}" for path, line in re.findall(r'^E\s+File "([^"]+\.py)", line (\d+)$', text, re.M)]
    return not_run_entry(report.nodeid or ".", report.nodeid or ".", "collection", str(error) or "failed to collect",
                         sites[-1] if sites else None)


class NotRunCases:
    """Gathers the run's not-run cases in its ``HarnessConfig`` (:mod:`harness.pytest.plugin`), in the
    order pytest reports them: this process's reports, or under pytest-xdist the controller's copies of
    the workers' (their ``user_properties`` travel with them)."""

    def __init__(self, hc: Any) -> None:
        self._hc = hc

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, entry in getattr(report, "user_properties", ()):
            if key == NOT_RUN_CASE and isinstance(entry, dict):
                self._hc.not_run.append({str(k): str(v) for k, v in entry.items()})

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._hc.not_run.append(collection_entry(report))

