"""Shared helpers for the schedule-library tests (not a test module)."""

from __future__ import annotations

from harness.model.cost import FixedCost
from harness.model.stage_costs import stage_costs
from harness.schedule.model import Schedule
from harness.schedule.registry import build_schedule, builder_info

CHUNKED = ("Interleaved1F1B", "LoopedBFS")


def cost(f: int, b: int, w: int | None = None, **kw: object) -> FixedCost:
    """FixedCost with F=f, I=b, W=w (full backward b+w); without w, B=b split in half."""
    if w is None:
        return FixedCost(forward_ns=f, backward_ns=b, **kw)  # type: ignore[arg-type]
    return FixedCost(forward_ns=f, backward_ns=b + w, backward_input_ns=b, backward_weight_ns=w, **kw)  # type: ignore[arg-type]


def chunks_for(name: str, v: int) -> int:
    return v if builder_info(name).takes_chunks else 1


#: The costs a cost-aware builder (ZB-auto) plans from in tests that build every registered schedule.
PLANNING_COST = FixedCost(forward_ns=1000, backward_ns=2000)


def build_any(name: str, p: int, m: int, v: int = 1, **options: object) -> Schedule:
    """``build_schedule(name, p, m, v, **options)``, with per-stage costs (:data:`PLANNING_COST` under
    ``edge``) for a builder that plans from them, so tests over every registered schedule build them all."""
    info = builder_info(name)
    costs = stage_costs(PLANNING_COST, info.num_stages(p, v), "edge") if info.takes_costs else None
    return build_schedule(name, p, m, v, costs=costs, **options)
