"""Shared helpers for the schedule-library tests (not a test module)."""

from __future__ import annotations

from harness.model.cost import FixedCost
from harness.schedule.registry import builder_info

CHUNKED = ("Interleaved1F1B", "LoopedBFS")


def cost(f: int, b: int, w: int | None = None, **kw: object) -> FixedCost:
    """FixedCost with F=f, I=b, W=w (full backward b+w); without w, B=b split in half."""
    if w is None:
        return FixedCost(forward_ns=f, backward_ns=b, **kw)  # type: ignore[arg-type]
    return FixedCost(forward_ns=f, backward_ns=b + w, backward_input_ns=b, backward_weight_ns=w, **kw)  # type: ignore[arg-type]


def chunks_for(name: str, v: int) -> int:
    return v if builder_info(name).takes_chunks else 1
