"""A profiling session: collects case results and writes the reports.

Used by the pytest plugin (one session per pytest run) and usable without
pytest. Reports are written once, at the end, into a staging folder that is
moved into place only when everything rendered, so an interrupted or failed
run never leaves a half file or destroys an earlier report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.device import BackendChoice
from harness.report.atomic import ensure_writable_dir
from harness.report.render import ReportFiles, check_report_folder, write_report
from harness.report.results import case_to_dict, results_document
from harness.runner import CaseResult

__all__ = ["ProfileSession"]


@dataclass
class ProfileSession:
    """Collects results of one run and writes the report folder.

    Attributes:
        report_dir: where reports go (created; must be writable).
        backend: the backend choice the session runs with.
        steps: recorded steps (earlier ones are warm-up).
        results: finished cases, in completion order; serialized when the
            report is written, so outcomes noted after a case ran are included.
    """

    report_dir: Path
    backend: BackendChoice
    steps: range
    results: list[CaseResult] = field(default_factory=list)

    def prepare(self) -> None:
        """Check the report folder is writable (before any case runs).

        Raises:
            ConfigError: it is not, or it holds another tool's report files
                (see :func:`~harness.report.render.check_report_folder`).
        """
        ensure_writable_dir(self.report_dir)
        check_report_folder(self.report_dir)  # another tool's folder: say so now, not after the cases ran

    def add(self, result: CaseResult) -> None:
        """Record a finished case."""
        self.results.append(result)

    def write(self, extra_session: dict[str, Any] | None = None, notice: Callable[[str], None] | None = None) -> ReportFiles:
        """Write traces, HTA traces, ``results.json`` and ``index.html``.

        Everything is rendered into a staging folder first and moved into place
        only once all of it succeeded (:func:`harness.report.render.write_report`);
        ``notice`` gets its rare messages (waiting for another render's lock,
        removing a killed render's staging folder).
        """
        session = {
            "backend_requested": self.backend.requested,
            "backend": self.backend.name,
            "backend_reason": self.backend.reason,
            "profile_steps": f"{self.steps.start}:{self.steps.stop}",
            **(extra_session or {}),
        }
        doc = results_document([case_to_dict(r) for r in self.results], session)
        return write_report(self.report_dir, doc, notice=notice)
