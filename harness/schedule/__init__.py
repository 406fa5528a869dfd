"""Schedules: the job model, the builder registry, the built-in builders, text forms, passes and validation.

The job model (:mod:`~harness.schedule.model`), the registry (:mod:`~harness.schedule.registry`), the
builders by family (:mod:`~harness.schedule.builders`, :mod:`~harness.schedule.interleaved`,
:mod:`~harness.schedule.zero_bubble`, :mod:`~harness.schedule.dualpipe`,
:mod:`~harness.schedule.controllable_memory`, and ZB-auto, which plans from per-stage costs:
:mod:`~harness.schedule.zb_auto` with :mod:`~harness.schedule.costs`), text forms (:mod:`~harness.schedule.notation`,
:mod:`~harness.schedule.paddle_jobs`), passes (:mod:`~harness.schedule.passes`,
:mod:`~harness.schedule.placement`), overlapped groups (:mod:`~harness.schedule.groups`) and checks
(:mod:`~harness.schedule.validate`).

The builder modules are imported here, below everything else in the harness, so that every built-in
schedule is registered as soon as any part of this package is imported.
"""

from __future__ import annotations

# The built-in builders register on import (harness.schedule.registry.register).
from harness.schedule import builders, controllable_memory, dualpipe, interleaved, zb_auto, zero_bubble  # noqa: F401
from harness.schedule.costs import StageCosts
from harness.schedule.model import Job, JobKind, Schedule, loop_placement, parse_job, v_placement
from harness.schedule.registry import build_schedule, builder_info, register, schedule_names
from harness.schedule.validate import check_counts

__all__ = [
    "Job",
    "JobKind",
    "Schedule",
    "StageCosts",
    "build_schedule",
    "builder_info",
    "check_counts",
    "loop_placement",
    "parse_job",
    "register",
    "schedule_names",
    "v_placement",
]
