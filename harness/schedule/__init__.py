"""Schedules: the job model, builders, text forms and validation."""

from __future__ import annotations

from harness.schedule.builders import build_schedule, builder_info, register, schedule_names
from harness.schedule.model import Job, JobKind, Schedule, loop_placement, parse_job, v_placement
from harness.schedule.validate import check_counts

__all__ = [
    "Job",
    "JobKind",
    "Schedule",
    "build_schedule",
    "builder_info",
    "check_counts",
    "loop_placement",
    "parse_job",
    "register",
    "schedule_names",
    "v_placement",
]
