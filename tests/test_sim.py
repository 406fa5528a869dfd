"""The sim backend against hand-computed timelines and published figures."""

from __future__ import annotations

import pytest

from harness.analysis.metrics import compute_metrics
from harness.errors import ExecutionError
from harness.model.cost import FixedCost
from harness.run.device.base import Work
from harness.run.device.sim import SimDevice
from harness.schedule import build_schedule

from conftest import MS, run_sim, timeline


@pytest.mark.parametrize("name", ["FThenB", "1F1B"])
def test_p4_m8_makespan_and_bubble(name):
    # Narayanan et al., SC'21 (arXiv:2104.04473) §2.2.1: makespan (m+p-1)(F+B), bubble (p-1)/(m+p-1).
    rec = run_sim(build_schedule(name, 4, 8), FixedCost.ms(F=1, B=2))
    m = compute_metrics(rec)
    assert m.step_time_median_ns == 33 * MS
    assert m.bubble_ratio == pytest.approx(3 / 11, abs=1e-12)
    assert m.bubble_over_ideal == pytest.approx(3 / 8, abs=1e-12)


# Hand-computed with F = 1 ms, B = 2 ms, p = 2, m = 3 (times in ms).
FTHENB_P2_M3 = {
    "0F0": (0, 1), "0F1": (1, 2), "0F2": (2, 3),
    "1F0": (1, 2), "1F1": (2, 3), "1F2": (3, 4),
    "1B0": (4, 6), "1B1": (6, 8), "1B2": (8, 10),
    "0B0": (6, 8), "0B1": (8, 10), "0B2": (10, 12),
}
ONE_F_ONE_B_P2_M3 = {
    "0F0": (0, 1), "0F1": (1, 2), "0B0": (4, 6), "0F2": (6, 7), "0B1": (7, 9), "0B2": (10, 12),
    "1F0": (1, 2), "1B0": (2, 4), "1F1": (4, 5), "1B1": (5, 7), "1F2": (7, 8), "1B2": (8, 10),
}


@pytest.mark.parametrize(("name", "table"), [("FThenB", FTHENB_P2_M3), ("1F1B", ONE_F_ONE_B_P2_M3)])
def test_exact_start_times_p2_m3(name, table):
    rec = run_sim(build_schedule(name, 2, 3), FixedCost.ms(F=1, B=2))
    got = timeline(rec)
    assert got == {k: (a * MS, b * MS) for k, (a, b) in table.items()}


def test_recorded_steps_follow_each_other_on_one_time_base():
    rec = run_sim(build_schedule("1F1B", 2, 3), FixedCost.ms(F=1, B=2), steps=range(2, 5))
    assert rec.steps == [2, 3, 4]
    assert rec.warmup_steps == 2
    assert rec.step_start_ns == [0, 12 * MS, 24 * MS]
    assert rec.step_end_ns == [12 * MS, 24 * MS, 36 * MS]
    assert {j.step for j in rec.jobs} == {2, 3, 4}


def test_wait_uses_the_latest_record_at_wait_time():
    # cudaStreamWaitEvent semantics: a wait enqueued before a re-record waits for the earlier record.
    dev = SimDevice()
    a, b = dev.stream("a"), dev.stream("b")
    ev, start, end = dev.event(), dev.event(), dev.event()
    dev.record(start, b)
    dev.launch(a, Work(5))
    dev.record(ev, a)  # t = 5
    dev.wait(b, ev)  # waits for the t = 5 record
    dev.launch(a, Work(100))
    dev.record(ev, a)  # re-record at t = 105 must not affect b
    dev.record(end, b)
    dev.synchronize()
    assert dev.elapsed_ns(start, end) == 5


def test_wait_on_never_recorded_event_is_a_no_op():
    dev = SimDevice()
    s = dev.stream("s")
    t0, t1 = dev.event(), dev.event()
    dev.record(t0, s)
    dev.wait(s, dev.event())
    dev.launch(s, Work(7))
    dev.record(t1, s)
    dev.synchronize()
    assert dev.elapsed_ns(t0, t1) == 7


def test_elapsed_of_unrecorded_event_is_an_error():
    dev = SimDevice()
    with pytest.raises(ExecutionError, match="not completed"):
        dev.elapsed_ns(dev.event(), dev.event())


def test_records_carry_enqueue_time_and_sends_name_their_peer():
    from harness.plan.build import build_plan
    from harness.run.executor import _works
    from harness.schedule.passes import add_communication

    schedule = add_communication(build_schedule("1F1B", 3, 2))
    plan = build_plan(schedule)
    works = {w.label: w for w in _works(plan, FixedCost.ms(F=1, B=2))}
    assert works["0SEND_F0"].peer_rank == 1 and works["2SEND_B1"].peer_rank == 1
    assert works["1F0"].peer_rank is None and works["1RECV_F0"].peer_rank is None
    from harness.run.executor import execute

    rec = execute(plan, SimDevice(), FixedCost.ms(F=1, B=2), range(0, 1), replay=False)  # op by op: host time measured
    assert len(rec.jobs) == plan.num_jobs
    assert all(j.enqueue_ns > 0 for j in rec.jobs)
    assert sum(j.enqueue_ns for j in rec.jobs) <= rec.enqueue_ns[0]
    replayed = run_sim(schedule, FixedCost.ms(F=1, B=2))  # the sim replay enqueues nothing
    assert len(replayed.jobs) == plan.num_jobs and all(j.enqueue_ns == 0 for j in replayed.jobs) and replayed.enqueue_ns == [0]


def test_span_bubble_separates_zb_h1_from_zb_h2():
    # arXiv:2401.10241 Table 2 with T_F = T_B = T_W = 1 ms: ZB-H2's bubble (p-1)(T_F+T_B-2T_W) is 0 inside
    # each rank's span, ZB-H1's is (p-1)(T_F+T_B-T_W) = 3 ms on the worst rank; with the per-step barrier
    # both have the same idle share of total.
    from harness import PipelineCase, run_case

    h1, h2 = (run_case(PipelineCase(s, 4, 8, cost=FixedCost.ms(F=1, B=2, W=1)), "sim").metrics for s in ("ZB-H1", "ZB-H2"))
    assert h1.bubble_ratio == pytest.approx(h2.bubble_ratio) == pytest.approx(3 / 27)
    assert h2.span_bubble_ratio == 0
    # rank s starts at s ms (its first input) and ends at 27 ms: spans 27, 26, 25, 24 ms around 24 ms of work,
    # idle 3, 2, 1, 0 ms; 6 ms over 102 ms.
    assert h1.span_bubble_ratio == pytest.approx(6 / 102)


def test_transfer_costs_bring_comm_jobs_and_hide_the_free_transfer_theory():
    from harness import PipelineCase, run_case

    cost = FixedCost(forward_ns=MS, backward_ns=2 * MS, p2p_latency_ns=200_000)
    auto = run_case(PipelineCase("1F1B", 4, 8, cost=cost), "sim")
    assert auto.schedule.has_comm and auto.theory == {}
    assert auto.metrics.step_time_median_ns > 33 * MS
    off = run_case(PipelineCase("1F1B", 4, 8, cost=cost, comm=False), "sim")
    assert not off.schedule.has_comm
    assert off.metrics.step_time_median_ns == 33 * MS
    assert off.theory["bubble_ratio"] == pytest.approx(3 / 11)  # what ran had free transfers


def test_no_theory_beside_a_compute_workload():
    # GEMMs sharing the machine's cores do not last their cost-model durations.
    from harness import PipelineCase
    from harness.analysis.theory import theory_for
    from harness.plan.build import build_plan

    case = PipelineCase("1F1B", 2, 2, workload="compute")
    plan = build_plan(case.build())
    assert theory_for(case, plan, "matmul") == {}
    assert theory_for(case, plan, "sleep")["bubble_ratio"] == pytest.approx(1 / 3)
