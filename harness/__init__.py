"""pipeline-harness: benchmark pipeline-parallel schedules.

The data flows one way: a :class:`PipelineCase` builds a :class:`Schedule`
(per-rank job lists), :func:`build_plan` validates it into a dependency graph,
a backend device runs it (:func:`execute`), :func:`compute_metrics` analyses
the records, and :mod:`harness.report` writes traces, results and HTML.
:func:`run_case` does the whole chain for one case.
"""

from __future__ import annotations

from harness.case import PipelineCase
from harness.cost import CostModel, FixedCost, TransformerCost
from harness.errors import (
    BackendUnavailable,
    ConfigError,
    ExecutionError,
    HarnessError,
    InputFormatError,
    ScheduleError,
)
from harness.executor import execute
from harness.metrics import RunMetrics, compute_metrics
from harness.plan import Plan, build_plan
from harness.records import JobRecord, RunRecords
from harness.runner import CaseResult, run_case
from harness.schedule import Job, JobKind, Schedule, build_schedule, parse_job, schedule_names

__all__ = [
    "BackendUnavailable",
    "CaseResult",
    "ConfigError",
    "CostModel",
    "ExecutionError",
    "FixedCost",
    "HarnessError",
    "InputFormatError",
    "Job",
    "JobKind",
    "JobRecord",
    "PipelineCase",
    "Plan",
    "RunMetrics",
    "RunRecords",
    "Schedule",
    "ScheduleError",
    "TransformerCost",
    "build_plan",
    "build_schedule",
    "compute_metrics",
    "execute",
    "parse_job",
    "run_case",
    "schedule_names",
]
