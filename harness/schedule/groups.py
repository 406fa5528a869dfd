"""Overlapped job groups as a schedule carries them: ``schedule.params["overlap"]``, a tuple of
job tuples, first job first (PyTorch's ``OVERLAP_F_B`` action). They name jobs, not positions, so
passes that insert send/receive jobs keep them.

How a plan runs a group: :mod:`harness.plan.groups`; how long it lasts: :mod:`harness.model.overlap`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from harness.schedule.model import Job, JobKind, Schedule

if TYPE_CHECKING:
    pass

__all__ = ["OVERLAP_PARAM", "groups_of", "with_groups"]


#: The key of a schedule's ``params`` that holds its overlapped groups.
OVERLAP_PARAM = "overlap"

def groups_of(schedule: Schedule) -> tuple[tuple[Job, ...], ...]:
    """The overlapped job groups of ``schedule`` (empty when it has none)."""
    return tuple(schedule.params.get(OVERLAP_PARAM, ()))  # type: ignore[arg-type]

def with_groups(schedule: Schedule, groups: Iterable[Iterable[Job]]) -> Schedule:
    """``schedule`` with ``groups`` as its overlapped job groups (replacing any it had).

    Each group is two or more jobs of one rank, listed one after the other in the
    rank's list (send/receive jobs and idle slots between them allowed), none of which
    needs another of the group (a forward and the backward of the same stage and
    micro-batch cannot overlap). Checked when the plan is built (:func:`apply`).
    """
    params = dict(schedule.params)
    kept = tuple(tuple(g) for g in groups)
    if kept:
        params[OVERLAP_PARAM] = kept
    else:
        params.pop(OVERLAP_PARAM, None)
    return Schedule(schedule.name, schedule.num_microbatches, schedule.stage_to_rank, schedule.ranks, params)

def _needs(later: Job, earlier: Job, schedule: Schedule) -> bool:
    """Whether ``later`` depends on ``earlier`` (directly or through its stage's order)."""
    if later.microbatch != earlier.microbatch:
        return False
    if later.stage == earlier.stage:
        return earlier.kind is JobKind.F or (earlier.kind is JobKind.I and later.kind is JobKind.W)
    if later.kind is JobKind.F and earlier.kind is JobKind.F:
        return earlier.stage < later.stage
    if later.kind in (JobKind.B, JobKind.I) and earlier.kind in (JobKind.B, JobKind.I):
        return earlier.stage > later.stage
    return False
