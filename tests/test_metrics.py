"""Measured figures from hand-made records."""

from __future__ import annotations

import pytest

from harness.analysis.metrics import compute_metrics, peak_inflight_of
from harness.records import JobRecord, RunRecords


def _job(rank, kind, mb, start, end, stage=None, step=0):
    return JobRecord(rank, f"rank{rank}/compute", rank if stage is None else stage, kind, mb, 0, step, start, end)


def test_busy_idle_and_both_bubble_normalizations():
    jobs = [_job(0, "F", 0, 0, 10), _job(0, "B", 0, 30, 50), _job(1, "F", 0, 10, 20), _job(1, "B", 0, 20, 30)]
    rec = RunRecords("sim", {}, 2, ["rank0/compute", "rank1/compute"], [0], [0], [50], jobs, [1000])
    m = compute_metrics(rec)
    s = m.steps[0]
    assert s.step_time_ns == 50
    assert s.busy_ns == [30, 20] and s.idle_ns == [20, 30]
    assert s.bubble_ratio == pytest.approx(50 / 100)  # idle / (p x step)
    assert s.bubble_over_ideal == pytest.approx(50 / 50)  # idle / busy
    # span bubble: rank 0 spans 0-50 with 30 busy, rank 1 spans 10-30 with 20 busy
    assert s.span_bubble_ratio == pytest.approx(20 / 70)
    assert m.span_bubble_ratio == pytest.approx(20 / 70)
    assert m.enqueue_ns_per_job == pytest.approx(1000 / 4)


def test_peak_inflight_counts_forward_to_end_of_backward():
    jobs = [
        _job(0, "F", 0, 0, 1), _job(0, "F", 1, 1, 2), _job(0, "F", 2, 2, 3),
        _job(0, "B", 0, 3, 4), _job(0, "F", 3, 4, 5), _job(0, "B", 1, 5, 6), _job(0, "B", 2, 6, 7), _job(0, "B", 3, 7, 8),
    ]
    assert peak_inflight_of(jobs, 1) == [3]  # B0 ends at 4 before F3 starts at 4: release first


def test_split_backward_frees_at_w():
    jobs = [_job(0, "F", 0, 0, 1), _job(0, "I", 0, 1, 2), _job(0, "F", 1, 2, 3), _job(0, "W", 0, 3, 4), _job(0, "I", 1, 4, 5), _job(0, "W", 1, 5, 6)]
    assert peak_inflight_of(jobs, 1) == [2]


def test_summary_over_steps():
    jobs = [_job(0, "F", 0, 0, 10, step=1), _job(0, "F", 0, 100, 130, step=2), _job(0, "F", 0, 200, 220, step=3)]
    rec = RunRecords("sim", {}, 1, ["rank0/compute"], [1, 2, 3], [0, 100, 200], [10, 130, 220], jobs, [5, 5, 5])
    m = compute_metrics(rec)
    assert [s.step_time_ns for s in m.steps] == [10, 30, 20]
    assert m.step_time_median_ns == 20 and m.step_time_min_ns == 10 and m.step_time_max_ns == 30
    assert m.step_time_iqr_ns == pytest.approx(10.0)  # quartiles 15 and 25 (inclusive method)


def test_peak_inflight_per_stage_matches_the_analytic_timeline():
    from harness import FixedCost, PipelineCase, run_case
    from harness.analysis.analytic import analyze
    from harness.schedule import build_schedule

    cost = FixedCost.ms(F=1, B=2)
    run = run_case(PipelineCase("Interleaved1F1B", 4, 8, chunks=2, cost=cost), "sim").metrics
    predicted = analyze(build_schedule("Interleaved1F1B", 4, 8, 2), cost)
    assert run.peak_inflight_per_stage == predicted.peak_inflight_per_stage
    # per rank, its two chunks add up: rank 0 holds stages 0 and 4
    assert run.peak_inflight[0] <= run.peak_inflight_per_stage[0] + run.peak_inflight_per_stage[4]
