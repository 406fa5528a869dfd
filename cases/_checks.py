"""Checks the benchmark cases share: what holds on any machine.

A case asserts exact figures against the harness's own analytic timeline
(``analyze``) where the backend is exact (``sim``), and orders and counts on
every backend. Timed backends (``cpu``, ``cuda``) get no timed assertion here:
how close they come to the cost model is a figure of the report (``vs sim``,
with the median's confidence interval), and how far to trust it is said by
the ``unstable`` and ``contended`` flags, not by a test that fails when the
machine is busy.
"""

from __future__ import annotations

from harness import CaseResult, ScheduleAnalytics


def check_run(result: CaseResult, predicted: ScheduleAnalytics) -> None:
    """``result`` ran the predicted schedule: every job of every recorded step ran once, the
    activations held per rank are the predicted ones, and on ``sim`` the step time and bubble
    are the analytic timeline's exactly."""
    per_step = result.plan.num_jobs if result.plan is not None else result.schedule.num_jobs
    assert len(result.records.jobs) == per_step * len(result.records.steps)
    assert result.metrics.peak_inflight == predicted.peak_inflight
    if result.records.backend == "sim":
        assert result.metrics.step_time_median_ns == predicted.makespan_ns
        assert abs(result.metrics.bubble_ratio - predicted.bubble_ratio) < 1e-12
