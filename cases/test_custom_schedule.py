"""A custom schedule from a PyTorch pipeline CSV (one row per rank, one action per cell).

``schedules/zb_like_p3_m4.csv`` is a hand-written 3-rank, 4-micro-batch order in
the style of ZB-H1 (Qi et al., arXiv:2401.10241): the backward split into
``I`` (inputs) and ``W`` (weights), each ``W`` moved behind the next job so
that the ``I`` chain back to rank 0 starts earlier. With F = 2 ms and a 4 ms
backward split 2 + 2 ms, the harness's own simulation of this order gives a
30 ms step against 1F1B's (m+p-1)(F+B) = 36 ms (arXiv:2104.04473 §2.2.1).
"""

from __future__ import annotations

from pathlib import Path

from harness import FixedCost, PipelineCase, analyze, build_schedule
from harness.schedule.notation import load_schedule_file

from _checks import check_run

SCHEDULE = Path(__file__).parent / "schedules" / "zb_like_p3_m4.csv"
COST = FixedCost.ms(F=2, B=4)
MS = 1_000_000


def test_custom_csv_schedule(pipeline):
    result = pipeline(PipelineCase(schedule=SCHEDULE, cost=COST))
    predicted = analyze(load_schedule_file(SCHEDULE), COST)
    assert (result.num_ranks, result.num_microbatches) == (3, 4)
    assert predicted.makespan_ns == 30 * MS
    assert analyze(build_schedule("1F1B", 3, 4), COST).makespan_ns == 36 * MS
    assert predicted.peak_inflight == [4, 3, 2]
    check_run(result, predicted)
