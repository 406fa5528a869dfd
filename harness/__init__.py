"""pipeline-harness: benchmark pipeline-parallel schedules.

The data flows one way (docs/architecture.md): a :class:`PipelineCase` builds a :class:`Schedule`
(per-rank job lists), :func:`build_plan` validates it into a dependency graph, a backend device runs
it (:func:`execute`), :func:`compute_metrics` and the rest of :mod:`harness.analysis` analyse the
records, and :mod:`harness.report` writes traces, results and HTML (:func:`write_report`).
:func:`run_case` does the whole chain for one case; :func:`analyze` gives a schedule's figures from
its analytic timeline without running it.

:func:`choose_configuration` (``python -m harness choose``) ranks schedules, micro-batch counts,
chunks, stage layouts and recomputation by predicted step time under a memory limit, and
:func:`choose_params` turns its top rows into parametrized cases.

Everything here is importable from ``harness``. The report writers, the importers (which load
numpy and jinja2) and the chooser are imported on first use, so ``import harness`` stays quick.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness.analysis.analytic import ScheduleAnalytics, analyze
from harness.analysis.memory import MemoryProfile, memory_profile
from harness.analysis.metrics import RunMetrics, compute_metrics
from harness.analysis.result import CaseResult
from harness.case import PipelineCase
from harness.errors import (
    BackendUnavailable,
    ConfigError,
    ExecutionError,
    HarnessError,
    InputFormatError,
    ScheduleError,
)
from harness.model.cost import CostModel, FixedCost
from harness.model.layout import StageLayout, parse_layout
from harness.model.stage_costs import stage_costs
from harness.model.transformer import TransformerCost
from harness.plan.build import build_plan
from harness.plan.graph import Plan
from harness.plan.timeline import Timeline, simulate
from harness.records import JobRecord, RunRecords
from harness.run.executor import execute
from harness.runner import run_case
from harness.schedule import Job, JobKind, Schedule, StageCosts, build_schedule, parse_job, register, schedule_names

if TYPE_CHECKING:
    from harness.imports.paddle import import_paddle_logs
    from harness.imports.torch import import_torch_traces, read_torch_traces, torch_case
    from harness.report.hta import hta_idle_offset_us
    from harness.report.render import write_report
    from harness.report.results import case_to_dict, load_results, results_document

#: Names imported on first use (PEP 562), and the module each comes from.
_LAZY = {
    "case_to_dict": "harness.report.results",
    "results_document": "harness.report.results",
    "load_results": "harness.report.results",
    "write_report": "harness.report.render",
    "hta_idle_offset_us": "harness.report.hta",
    "import_paddle_logs": "harness.imports.paddle",
    "import_torch_traces": "harness.imports.torch",
    "read_torch_traces": "harness.imports.torch",
    "torch_case": "harness.imports.torch",
    "ChooseQuery": "harness.choose.query",
    "ChooseResult": "harness.choose.rank",
    "choose_configuration": "harness.choose.rank",
    "choose_params": "harness.pytest.choose",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "BackendUnavailable",
    "CaseResult",
    "ChooseQuery",
    "ChooseResult",
    "ConfigError",
    "CostModel",
    "ExecutionError",
    "FixedCost",
    "HarnessError",
    "InputFormatError",
    "Job",
    "JobKind",
    "JobRecord",
    "MemoryProfile",
    "PipelineCase",
    "Plan",
    "RunMetrics",
    "RunRecords",
    "Schedule",
    "ScheduleAnalytics",
    "ScheduleError",
    "StageCosts",
    "StageLayout",
    "Timeline",
    "TransformerCost",
    "analyze",
    "build_plan",
    "build_schedule",
    "case_to_dict",
    "choose_configuration",
    "choose_params",
    "compute_metrics",
    "execute",
    "hta_idle_offset_us",
    "import_paddle_logs",
    "import_torch_traces",
    "load_results",
    "memory_profile",
    "parse_job",
    "parse_layout",
    "read_torch_traces",
    "register",
    "results_document",
    "run_case",
    "schedule_names",
    "simulate",
    "stage_costs",
    "torch_case",
    "write_report",
]
