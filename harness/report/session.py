"""A profiling session: collects case results and writes the reports.

Used by the pytest plugin (one session per pytest run) and usable without
pytest. Reports are written once, at the end, into a staging folder that is
moved into place only when everything rendered, so an interrupted or failed
run never leaves a half file or destroys an earlier report. A run split across
processes (pytest-xdist) publishes from one session, which merges the others'
cases (:mod:`harness.report.parts`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.analysis.result import CaseResult
from harness.report.atomic import ensure_writable_dir
from harness.report.concurrent import RunTicket, announce, new_token
from harness.report.output import TraceOptions
from harness.report.parts import SessionPart, merge_cases, worker_entries
from harness.report.render import ReportFiles, check_report_folder, write_report
from harness.report.results import reportable_case, results_document
from harness.run.environment import BackendChoice, machine_facts
from harness.run.window import AdaptiveWindow

__all__ = ["ProfileSession", "describe_window"]


def describe_window(steps: range | AdaptiveWindow) -> str:
    """The profiling window as options spell it: ``"1:4"``, or
    ``"adaptive: 1 warm-up, target 1%, 5-1000 steps, 10 s"``."""
    if isinstance(steps, range):
        return f"{steps.start}:{steps.stop}"
    return (f"adaptive: {steps.warmup_steps} warm-up, target {100 * steps.target:g}%, "
            f"{steps.min_steps}-{steps.max_steps} steps, {steps.max_time_ns / 1e9:g} s")


@dataclass
class ProfileSession:
    """Collects results of one run and writes the report folder.

    Attributes:
        report_dir: where reports go (created; must be writable).
        backend: the backend choice the session runs with.
        steps: the profiling window: recorded steps (earlier ones are warm-up),
            or an adaptive window's settings (:class:`~harness.run.window.AdaptiveWindow`).
        results: finished cases, in completion order; serialized when the
            report is written, so outcomes noted after a case ran are included.
        errored: after :meth:`write`, the cases that ran but could not be
            reported (``id``, ``label``, ``error``), listed in the report's
            ``session.errored_cases`` instead of lost with every other case.
        trace_options: how traces are written (gzip, traced steps, flows, size
            warning; :class:`~harness.report.output.TraceOptions`, default when ``None``).
        started: when the session began (``time.time()``): a report another run publishes into
            the folder after it is one this session's report replaces, and says so
            (:mod:`harness.report.concurrent`).
        parts: the cases other processes ran for this session (:meth:`add_part`), merged
            into the report after its own ones, in the serial run's order.
    """

    report_dir: Path
    backend: BackendChoice
    steps: range | AdaptiveWindow
    results: list[CaseResult] = field(default_factory=list)
    errored: list[dict[str, str]] = field(default_factory=list)
    trace_options: TraceOptions | None = None
    started: float = field(default_factory=time.time)
    token: str = field(default_factory=new_token)
    _ticket: RunTicket | None = None
    parts: list[SessionPart] = field(default_factory=list)

    def prepare(self) -> None:
        """Check the report folder is writable (before any case runs), and announce this run there
        (:func:`harness.report.concurrent.announce`; :meth:`close` withdraws it).

        Raises:
            ConfigError: it is not, or it holds another tool's report files
                (see :func:`~harness.report.render.check_report_folder`).
        """
        ensure_writable_dir(self.report_dir)
        check_report_folder(self.report_dir)  # another tool's folder: say so now, not after the cases ran
        self._ticket = announce(self.report_dir, self.started, self.token)

    def close(self) -> None:
        """Withdraw this run's announcement from the report folder (call at the run's very end)."""
        if self._ticket is not None:
            self._ticket.withdraw()
            self._ticket = None

    def add(self, result: CaseResult) -> None:
        """Record a finished case."""
        self.results.append(result)

    def add_part(self, part: SessionPart) -> None:
        """Add the cases another process ran (a pytest-xdist worker; :mod:`harness.report.parts`)."""
        self.parts.append(part)

    def write(self, extra_session: dict[str, Any] | None = None, notice: Callable[[str], None] | None = None) -> ReportFiles:
        """Write traces, HTA traces, ``results.json`` and ``index.html``.

        Everything is rendered into a staging folder first and moved into place
        only once all of it succeeded (:func:`harness.report.render.write_report`);
        ``notice`` gets its rare messages (waiting for another render's lock,
        removing a killed render's staging folder).

        A case whose records cannot be reported (e.g. a job that ends before it
        starts, from a backend or cost model at fault) does not stop the report:
        it is left out of ``cases``, listed in ``session.errored_cases`` with its
        error (the page and the pytest summary show it) and in :attr:`errored`,
        and every other case is written. With :attr:`parts`, their cases follow
        the session's own (merged in the serial run's order, errored ones too), and
        ``session.workers`` names the processes: per part its ``id``, the ids of the
        cases it ran and its facts (``CUDA_VISIBLE_DEVICES``).
        """
        session = {
            "backend_requested": self.backend.requested,
            "backend": self.backend.name,
            "backend_reason": self.backend.reason,
            "profile_steps": describe_window(self.steps),
            "environment": machine_facts(),
            **(extra_session or {}),
        }
        cases: list[dict[str, Any]] = []
        self.errored = []
        for result in self.results:
            case, problem = reportable_case(result)
            if case is None:
                self.errored.append({"id": result.case_id, "label": result.label, "error": str(problem)})
            else:
                cases.append(case)
        if self.parts:
            merged, errored = merge_cases(self.parts)
            cases += merged
            self.errored += errored
            session["workers"] = worker_entries(self.parts)
        if self.errored:
            session["errored_cases"] = list(self.errored)
        doc = results_document(cases, session)
        return write_report(self.report_dir, doc, notice=notice, trace_options=self.trace_options,
                            run_token=self.token, run_started=self.started)
