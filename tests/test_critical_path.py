"""Critical path and waiting attribution: hand-computed for 1F1B p=2 m=3 (F=1, B=2) on sim, sums checked elsewhere."""

from __future__ import annotations

import pytest

from harness.analysis.critical_path import critical_path, median_step, waiting
from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.report.results import case_to_dict
from harness.runner import run_case

MS = 1_000_000


@pytest.fixture(scope="module")
def small():
    # rank 0: F0 [0,1] F1 [1,2] B0 [4,6] F2 [6,7] B1 [7,9] B2 [10,12]; rank 1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7] F2 [7,8] B2 [8,10] (ms)
    return run_case(PipelineCase("1F1B", 2, 3, cost=FixedCost.ms(F=1, B=2)), "sim", range(0, 2))


def test_the_chain_by_hand(small):
    # From 0B2 (ends last, at 12): released by 1B2 (ends 10; 0B1 ended at 9), 1B2 by 1F2 (8), 1F2 by 0F2 (7; its stream's
    # 1B1 also ended at 7: the dependency wins a tie), 0F2 by 0B0 (6), 0B0 by 1B0 (4), 1B0 by 1F0 (2), 1F0 by 0F0 (1).
    cp = critical_path(small.records, small.plan, step=1)
    assert cp.jobs == ["0F0", "1F0", "1B0", "0B0", "0F2", "1F2", "1B2", "0B2"]
    assert cp.ranks == [0, 1, 1, 0, 0, 1, 1, 0]
    assert cp.gaps_ns == [0] * 8  # sim: every job starts the instant it is released
    assert cp.length_ns == cp.busy_ns == 12 * MS == small.metrics.steps[1].step_time_ns


def test_waiting_by_hand_sums_to_each_rank_idle(small):
    w = waiting(small.records, small.plan, step=1)
    assert w[0].parts == {"waiting for rank 1's B": 3 * MS}  # [2, 4] before 0B0, [9, 10] before 0B2
    assert w[1].parts == {"warm-up": 1 * MS, "cool-down": 2 * MS}  # [0, 1] before 1F0, [10, 12] after 1B2
    assert [x.idle_ns for x in w] == small.metrics.steps[1].idle_ns == [3 * MS, 3 * MS]
    assert w[0].describe() == "rank 0 idle 3.000 ms: 3.000 ms waiting for rank 1's B"


def test_transfers_and_gaps_are_named_and_sum_exactly():
    r = run_case(PipelineCase("1F1B", 4, 8, cost=FixedCost.ms(F=1, B=2, p2p_latency_ns=500_000)), "sim")
    cp = critical_path(r.records, r.plan)
    assert cp.length_ns == r.metrics.step_time_median_ns and cp.jobs[:3] == ["0F0", "0SEND_F0", "1RECV_F0"]
    w = waiting(r.records, r.plan)
    assert [x.idle_ns for x in w] == r.metrics.steps[0].idle_ns
    assert set(w[0].parts) == {"waiting for a transfer from rank 1"}  # rank 0 waits only for gradients from rank 1
    assert all(sum(x.parts.values()) == x.idle_ns for x in w)


@pytest.mark.parametrize("comm", [False, True])
def test_on_a_timed_backend_gaps_are_host_time_and_everything_still_adds_up(comm):
    # with send/receive jobs, a receive that starts inside its send had a gap counted from the send's start:
    # the gaps and the running time added up to more than the step
    cost = FixedCost.ms(F=2, B=4, p2p_latency_ns=300_000) if comm else FixedCost.ms(F=2, B=4)
    r = run_case(PipelineCase("1F1B", 2, 4, cost=cost, comm=comm or None), "cpu", range(1, 3))
    for step, m in zip(r.records.steps, r.metrics.steps):
        cp = critical_path(r.records, r.plan, step)
        assert any("RECV" in j for j in cp.jobs) == comm
        assert cp.length_ns == m.step_time_ns and cp.length_ns - cp.busy_ns == sum(cp.gaps_ns) and min(cp.gaps_ns) >= 0
        assert [x.idle_ns for x in waiting(r.records, r.plan, step)] == m.idle_ns


def test_median_step_results_and_errors(small):
    assert median_step(small.records) in small.records.steps
    doc = case_to_dict(small)
    assert doc["critical_path"]["length_ns"] == small.metrics.step_time_median_ns
    assert [w["idle_ns"] for w in doc["waiting"]] == [3 * MS, 3 * MS]
    with pytest.raises(ValueError, match="step 7 was not recorded"):
        critical_path(small.records, small.plan, step=7)
