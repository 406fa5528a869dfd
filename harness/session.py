"""A profiling session: collects case results and writes the reports.

Used by the pytest plugin (one session per pytest run) and usable without
pytest. Each case's trace is written as soon as the case finishes;
``results.json`` and ``index.html`` are written at the end. Every file is
written atomically, so an interrupted or failed run never leaves a half file
or destroys an earlier report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.device import BackendChoice
from harness.report.atomic import atomic_write_json, ensure_writable_dir
from harness.report.html import write_index
from harness.report.results import case_to_dict, results_document
from harness.report.trace import write_trace
from harness.runner import CaseResult

__all__ = ["ProfileSession", "trace_filename"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]+")


def trace_filename(case_id: str) -> str:
    """A file name for a case's trace: the id with unsafe characters replaced, ``.json``."""
    name = _UNSAFE.sub("_", case_id.replace("::", "__")).strip("_.") or "case"
    return name[:180] + ".json"


@dataclass
class ProfileSession:
    """Collects results of one run and writes the report folder.

    Attributes:
        report_dir: where reports go (created; must be writable).
        backend: the backend choice the session runs with.
        steps: recorded steps (earlier ones are warm-up).
        results: serialized cases, in completion order.
    """

    report_dir: Path
    backend: BackendChoice
    steps: range
    results: list[dict[str, Any]] = field(default_factory=list)
    trace_files: dict[str, str] = field(default_factory=dict)
    summaries: list[CaseResult] = field(default_factory=list)

    def prepare(self) -> None:
        """Check the report folder is writable (before any case runs).

        Raises:
            ConfigError: it is not.
        """
        ensure_writable_dir(self.report_dir)

    def add(self, result: CaseResult) -> dict[str, Any]:
        """Record a finished case and write its trace to ``traces/``; returns its serialized form."""
        case = case_to_dict(result)
        name = trace_filename(result.case_id)
        taken = set(self.trace_files.values())
        stem, n = name[:-5], 2
        while name in taken:
            name = f"{stem}-{n}.json"
            n += 1
        write_trace(self.report_dir / "traces" / name, case)
        self.trace_files[result.case_id] = f"traces/{name}"
        self.results.append(case)
        self.summaries.append(result)
        return case

    def write(self, extra_session: dict[str, Any] | None = None) -> tuple[Path, Path]:
        """Write ``results.json`` and ``index.html``; returns their paths."""
        session = {
            "backend_requested": self.backend.requested,
            "backend": self.backend.name,
            "backend_reason": self.backend.reason,
            "profile_steps": f"{self.steps.start}:{self.steps.stop}",
            **(extra_session or {}),
        }
        doc = results_document(self.results, session)
        results_path = atomic_write_json(self.report_dir / "results.json", doc)
        index_path = write_index(self.report_dir / "index.html", doc, self.trace_files)
        return results_path, index_path
