"""Dependency graph, validation and enqueue order (harness.plan)."""

from __future__ import annotations

import pytest

from harness.errors import ScheduleError
from harness.plan.build import build_plan
from harness.schedule import build_schedule
from harness.schedule.model import Schedule


def test_cross_stage_dependencies_of_1f1b():
    plan = build_plan(build_schedule("1F1B", 2, 2))
    idx = {str(j): i for i, j in enumerate(plan.jobs)}
    deps = {str(plan.jobs[i]): sorted(str(plan.jobs[d]) for d in plan.deps[i]) for i in range(plan.num_jobs)}
    # F(1,i) waits for F(0,i); B(0,i) for B(1,i); same-rank producers are covered by stream order.
    assert deps["1F0"] == ["0F0"]
    assert deps["0B0"] == ["1B0"]
    assert deps["1B0"] == []
    assert deps["0F0"] == []
    assert plan.stream_names[plan.stream[idx["0F0"]]] == "rank0/compute"
    assert plan.stream_names[plan.stream[idx["1F0"]]] == "rank1/compute"


def test_enqueue_order_is_topological():
    plan = build_plan(build_schedule("FThenB", 4, 6))
    pos = {j: k for k, j in enumerate(plan.order)}
    assert sorted(plan.order) == list(range(plan.num_jobs))
    for j in range(plan.num_jobs):
        for d in plan.deps[j]:
            assert pos[d] < pos[j]
    # stream order is kept
    for s in plan.streams_used():
        on_stream = [j for j in plan.order if plan.stream[j] == s]
        assert on_stream == sorted(on_stream)


def test_rank_starting_with_a_backward_deadlocks_before_anything_runs():
    bad = Schedule.from_text("bad", [["0B0", "0F0"], ["1F0", "1B0"]], 1)
    with pytest.raises(ScheduleError) as err:
        build_plan(bad)
    msg = str(err.value)
    assert "0B0 is listed before its 0F0 (step 1)" in msg
    assert ">>0B0" in msg and ">>0F0" in msg  # the grid marks the misordered pair
    assert "0B0" in err.value.jobs


def test_cross_rank_cycle_deadlocks():
    # rank 0 waits for 1B0 before 0F1; rank 1 needs 0F1 before 1B0.
    bad = Schedule.from_text("cycle", [["0F0", "0B0", "0F1", "0B1"], ["1F0", "1F1", "1B0", "1B1"]], 2)
    with pytest.raises(ScheduleError, match="deadlocks") as err:
        build_plan(bad)
    assert "1F1 waits for 0F1 (rank 0, step 2)" in str(err.value)


def test_missing_and_duplicate_jobs_are_named():
    missing = Schedule.from_text("m", [["0F0", "0F1", "0B0"], ["1F0", "1F1", "1B0", "1B1"]], 2)
    with pytest.raises(ScheduleError, match=r"missing jobs: 0B1"):
        build_plan(missing)
    dup = Schedule.from_text("d", [["0F0", "0F0", "0B0"], ["1F0", "1B0"]], 1)
    with pytest.raises(ScheduleError, match=r"0F0 is listed twice \(first at rank 0, step 0\)"):
        build_plan(dup)


def test_microbatch_out_of_range():
    s = Schedule.from_text("r", [["0F0", "0F5", "0B0"], ["1F0", "1B0"]], 1)
    with pytest.raises(ScheduleError, match=r"0F5 names micro-batch 5, valid are 0..0"):
        build_plan(s)


def test_w_needs_i_and_b_excludes_split():
    s = Schedule.from_text("w", [["0F0", "0W0"], ["1F0", "1B0"]], 1)
    with pytest.raises(ScheduleError, match="missing jobs: 0I0"):
        build_plan(s)
    s = Schedule.from_text("bi", [["0F0", "0B0", "0I0", "0W0"], ["1F0", "1B0"]], 1)
    with pytest.raises(ScheduleError, match="0B0 is a full backward, but 0I0 is also listed"):
        build_plan(s)
