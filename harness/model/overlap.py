"""How long an overlapped job group lasts under a cost model (the optional cost-model method
:data:`GROUP_METHOD`, and the ``overlap_ns`` / ``overlap_ratio`` fields that answer it).

By default a group lasts the **sum** of its jobs' durations, ``F + B``: no overlap. That is how
PyTorch's ``_PipelineScheduleRuntime`` runs an ``OVERLAP_F_B`` action (its sub-actions one after
the other) and how DualPipe runs a pair of modules that define no ``overlapped_forward_backward``
(deepseek-ai/DualPipe ``dualpipev.py``: ``_forward_compute_chunk`` then ``_backward_compute_chunk``).
A cost model says otherwise: :class:`~harness.model.cost.FixedCost` and
:class:`~harness.model.transformer.TransformerCost` take ``overlap_ns`` (every group lasts that
many ns: the DualPipe README's measured "F&B") or ``overlap_ratio`` ``r`` in ``[0, 1]``, the share of
the shorter jobs' time that is not hidden, so a group lasts ``max(d) + r (sum(d) - max(d))``:
``r = 1`` is the default ``F + B``, ``r = 0`` is ``max(F, B)``, perfect overlap (the duration
Victarry/PP-Schedule-Visualization gives an overlapped pair, ``overlapped_op_time = max(...)``).
This parametrization is the harness's own. A group shorter than its longest job is refused.

What a group is and how a plan runs one: :mod:`harness.plan.groups`.
"""

from __future__ import annotations

import numbers
from typing import Any

from harness.errors import ConfigError
from harness.schedule.model import Job, Schedule

__all__ = ["GROUP_METHOD", "group_ns", "overlap_assumptions"]


#: Optional cost-model method: ``overlapped_group_ns(jobs, durations_ns, num_stages) -> int``,
#: the wall time (ns) of an overlapped group whose jobs last ``durations_ns`` on their own
#: (:mod:`harness.plan.groups`); without it a group lasts ``sum(durations_ns)``: no overlap, as
#: PyTorch's runtime runs ``OVERLAP_F_B`` (its sub-actions one after the other).
GROUP_METHOD = "overlapped_group_ns"

def group_ns(cost: object, jobs: tuple[Job, ...], durations_ns: tuple[int, ...], num_stages: int) -> int:
    """The wall time (ns) of an overlapped group under ``cost``: its :data:`GROUP_METHOD`, or
    ``sum(durations_ns)`` (no overlap, ``F + B``) without one.

    Raises:
        ConfigError: the answer is not a whole number of ns, is below the longest job
            (a group cannot end before its longest job would alone), or is not below
            :data:`~harness.model.values.MAX_DURATION_NS`; names the group and the cost model.
    """
    longest = max(durations_ns, default=0)
    method = getattr(cost, GROUP_METHOD, None)
    if method is None:
        return sum(durations_ns)
    value = method(jobs, durations_ns, num_stages)
    from harness.model.values import MAX_DURATION_NS

    if type(value) is int and longest <= value < MAX_DURATION_NS:  # the usual answer: no error text to build
        return value
    shown = "(" + ";".join(map(str, jobs)) + ")OVERLAP_F_B"
    model = type(getattr(cost, "inner", cost)).__name__
    if isinstance(value, bool) or (not isinstance(value, int) and not (isinstance(value, float) and value.is_integer())):
        raise ConfigError(f"cost model {model}: {GROUP_METHOD}({shown}) gave {value!r}, not a whole number of ns")
    if not longest <= value < MAX_DURATION_NS:
        raise ConfigError(
            f"cost model {model}: {GROUP_METHOD}({shown}) gave {int(value):,} ns, but the group's jobs last "
            f"{', '.join(f'{d:,}' for d in durations_ns)} ns: an overlapped group lasts at least its longest job"
            + ("" if value < MAX_DURATION_NS else " (and below 2**53 ns)")
        )
    return int(value)

# --- the cost-model fields overlap_ns / overlap_ratio (FixedCost, TransformerCost) ---
def _overlap_fields(obj: Any) -> None:
    """Check ``overlap_ns`` (a duration >= 0) and ``overlap_ratio`` (in [0, 1]), at most one given."""
    if obj.overlap_ns is not None and obj.overlap_ratio is not None:
        raise ConfigError(f"cost model: give overlap_ns or overlap_ratio, not both (got {obj.overlap_ns!r} and {obj.overlap_ratio!r})")
    from harness.model.values import _set_whole_ns

    if obj.overlap_ns is not None:
        _set_whole_ns(obj, "overlap_ns")  # rounded to the nearest ns, as every duration
    r = obj.overlap_ratio
    if r is not None and (isinstance(r, bool) or not isinstance(r, numbers.Real) or not 0 <= float(r) <= 1):
        raise ConfigError("cost model: overlap_ratio must be a number in [0, 1] (0: max(F, B), perfect overlap; 1: F + B, "
                          f"no overlap, the default), got {r!r}")

def _overlap_group_ns(obj: Any, durations_ns: tuple[int, ...]) -> int:
    """An overlapped group's time (ns) from ``overlap_ns`` / ``overlap_ratio`` (:mod:`harness.plan.groups`);
    ``sum(durations_ns)`` (no overlap) when neither is set."""
    longest = max(durations_ns, default=0)
    if obj.overlap_ns is not None:
        return int(obj.overlap_ns)
    if obj.overlap_ratio is not None:
        return longest + round(obj.overlap_ratio * (sum(durations_ns) - longest))
    return sum(durations_ns)


def overlap_assumptions(cost: Any, schedule: Schedule) -> list[str]:
    """A sentence naming how long ``schedule``'s overlapped F&B groups last under ``cost``, read from
    what :func:`group_ns` gives its first group (so it says what the run uses, default or not) and from
    the field that set it (``overlap_ns``, ``overlap_ratio``, the model's own :data:`GROUP_METHOD`, or
    none: the default); empty when the schedule has no groups."""
    from harness.schedule.groups import groups_of

    groups = groups_of(schedule)
    if not groups:
        return []
    jobs = tuple(groups[0])
    n = schedule.num_stages
    durations = tuple(int(cost.duration_ns(job, n)) for job in jobs)
    wall = group_ns(cost, jobs, durations, n)
    inner = getattr(cost, "inner", cost)
    if getattr(inner, "overlap_ns", None) is not None:
        source = f"overlap_ns={inner.overlap_ns}"  # type: ignore[attr-defined]
    elif getattr(inner, "overlap_ratio", None) is not None:
        source = f"overlap_ratio={inner.overlap_ratio:g}"  # type: ignore[attr-defined]
    elif getattr(inner, GROUP_METHOD, None) is not None and not hasattr(inner, "overlap_ratio"):
        source = f"the cost model's {GROUP_METHOD}"
    else:
        source = "the default; overlap_ratio or overlap_ns set it"

    # one unit for the whole sentence: the largest in which the members' summed duration is at least 1
    scale, unit = next(((s, u) for s, u in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")) if max(sum(durations), 1) >= s), (1, "ns"))

    def ms(ns: float) -> str:
        return f"{ns / scale:.4g}"

    names = "&".join(job.kind.value for job in jobs)
    if wall == max(durations) and wall != sum(durations):
        how = f"perfect overlap, a group lasts max({', '.join(job.kind.value for job in jobs)})"
    elif wall == sum(durations):
        how = f"no overlap, a group lasts {' + '.join(job.kind.value for job in jobs)}"
    else:
        how = f"a group lasts {ms(wall)} {unit} against {' + '.join(job.kind.value for job in jobs)} = {ms(sum(durations))} {unit}"
    shown = ";".join(map(str, jobs))
    return [f"overlapped {names} groups ({len(groups)} per step): {how} ({source}; e.g. ({shown}): "
            f"{' + '.join(ms(d) for d in durations)} {unit} -> {ms(wall)} {unit}); a group starts when the inputs of all its members "
            "are in (the rule of DualPipe)"]
