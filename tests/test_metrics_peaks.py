"""peak_inflight_of (numpy) against the plain event-sweep it replaced, and by hand."""

from __future__ import annotations

from collections import defaultdict

import pytest

from harness.analysis.metrics import peak_inflight_of
from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.records import JobRecord
from harness.runner import run_case


def sweep(jobs: list[JobRecord], num_ranks: int, per: str = "rank") -> list[int]:
    """The reference: a forward's start acquires, the end of B (W when split, else I) releases,
    releases first at equal times."""
    split = {(j.stage, j.microbatch) for j in jobs if j.kind == "W"}
    events: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for j in jobs:
        key = j.stage if per == "stage" else j.rank
        if j.kind == "F":
            events[key].append((j.start_ns, 1))
        elif j.kind in ("B", "W") or (j.kind == "I" and (j.stage, j.microbatch) not in split):
            events[key].append((j.end_ns, -1))
    size = (max((j.stage for j in jobs), default=-1) + 1) if per == "stage" else num_ranks
    peaks = [0] * size
    for key, evs in events.items():
        cur = peak = 0
        for _, d in sorted(evs):
            cur += d
            peak = max(peak, cur)
        peaks[key] = peak
    return peaks


@pytest.mark.parametrize(("name", "p", "m", "v"), [
    ("1F1B", 4, 8, 1), ("ZB-H1", 4, 8, 1), ("ZB-V", 4, 8, 1), ("Interleaved1F1B", 4, 8, 2), ("DualPipeV", 4, 8, 1),
    ("ZB-H2", 4, 8, 1), ("FThenB", 3, 5, 1), ("V-Half", 4, 8, 1), ("InterleavedZeroBubble", 4, 8, 2)])
def test_equals_the_event_sweep(name: str, p: int, m: int, v: int) -> None:
    kw = {"chunks": v} if v > 1 else {}
    r = run_case(PipelineCase(name, stages=p, microbatches=m, cost=FixedCost.ms(F=1, B=2), **kw), "sim", range(0, 2))
    for per in ("rank", "stage"):
        assert peak_inflight_of(r.records.jobs, p, per) == sweep(r.records.jobs, p, per)
    for s in r.records.steps:
        assert peak_inflight_of(r.records.jobs_of_step(s), p) == sweep(r.records.jobs_of_step(s), p)


def test_by_hand_release_before_acquire_and_split_backward() -> None:
    def job(kind: str, mb: int, a: int, b: int, stage: int = 0) -> JobRecord:
        return JobRecord(0, "rank0/compute", stage, kind, mb, 0, 1, a, b)

    # F0 [0,1], F1 [1,2], B0 ends at 3 while F2 starts at 3: release first, so the peak stays 2
    assert peak_inflight_of([job("F", 0, 0, 1), job("F", 1, 1, 2), job("B", 0, 2, 3), job("F", 2, 3, 4)], 1) == [2]
    # split backward: I0 frees nothing, W0 does; unsplit I1 frees at its end
    jobs = [job("F", 0, 0, 1), job("F", 1, 1, 2), job("I", 0, 2, 3), job("F", 2, 3, 4), job("W", 0, 4, 5), job("I", 1, 5, 6)]
    assert peak_inflight_of(jobs, 1) == [3]
    assert peak_inflight_of([], 2) == [0, 0] and peak_inflight_of([], 2, "stage") == []
