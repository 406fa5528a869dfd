"""Communication models (harness.model.comm): free, edge (the published simulators'), stream (today's).

Figures are hand-computed from the zero-bubble repository's closed forms
(sail-sg/zero-bubble-pipeline-parallelism, arXiv:2401.10241) or are the issue's
published example (p=8, m=24, F=18522, B=18086, W=9337, c=601 time units).
"""

from __future__ import annotations

import pytest

from harness.analysis.analytic import analyze
from harness.case import PipelineCase
from harness.errors import ConfigError
from harness.model import comm
from harness.model.cost import FixedCost
from harness.plan.delays import edge_delays
from harness.runner import run_case
from harness.schedule.registry import build_schedule

F, B, W, C = 18522, 18086, 9337, 601  # time units as ns; B is the paper's B (backward for inputs, our I)


def split_cost(f: int, b: int, w: int, c: int) -> FixedCost:
    return FixedCost(forward_ns=f, backward_ns=b + w, backward_input_ns=b, backward_weight_ns=w, p2p_latency_ns=c)


def full_cost(f: int, b: int, w: int, c: int) -> FixedCost:
    return FixedCost(forward_ns=f, backward_ns=b + w, p2p_latency_ns=c)


def test_issue_example_1f1b_edge_is_the_papers_makespan_and_stream_is_todays() -> None:
    # The issue's figures: 1,456,749 from the zero-bubble paper's model, 1,485,597 from the harness's streams.
    sched = build_schedule("1F1B", 8, 24)
    assert analyze(sched, full_cost(F, B, W, C), comm_model="edge").makespan_ns == 1_456_749
    assert analyze(sched, full_cost(F, B, W, C), comm_model="stream").makespan_ns == 1_485_597
    assert analyze(sched, full_cost(F, B, W, C)).makespan_ns == 1_485_597  # stream is the default
    # free: (m+p-1)(F+B+W) = 31 * 45945
    assert analyze(sched, full_cost(F, B, W, C), comm_model="free").makespan_ns == 31 * 45945


@pytest.mark.parametrize(("p", "m"), [(4, 8), (4, 12), (8, 24)])
@pytest.mark.parametrize("c", [0, 601])
def test_zbh2_span_excess_is_the_zero_bubble_closed_form(p: int, m: int, c: int) -> None:
    # zero-bubble repo: ZB-H2 per-rank span - m(F+B+W) = (p-1)(F+B+2c-2W) (worst rank, rank 0).
    sched = build_schedule("ZB-H2", p, m)
    cost = split_cost(F, B, W, c)
    expected = (p - 1) * (F + B + 2 * c - 2 * W)
    a = analyze(sched, cost, comm_model="edge")
    assert max(a.span_bubble_ns) == a.span_bubble_ns[0] == expected
    r = run_case(PipelineCase(sched, cost=cost, comm_model="edge"), backend="sim")
    assert r.metrics.step_time_median_ns == a.makespan_ns
    assert r.comm_model == "edge"


@pytest.mark.parametrize(("p", "m"), [(4, 8), (8, 24)])
def test_c0_bubbles_of_1f1b_and_zbh1(p: int, m: int) -> None:
    # With c = 0: 1F1B's excess is (p-1)(F+B+W), ZB-H1's (p-1)(F+B-W) (B = backward for inputs).
    a = analyze(build_schedule("1F1B", p, m), full_cost(F, B, W, 0), comm_model="edge")
    assert a.span_bubble_ns[0] == (p - 1) * (F + B + W)
    a = analyze(build_schedule("ZB-H1", p, m), split_cost(F, B, W, 0), comm_model="edge")
    assert a.span_bubble_ns[0] == (p - 1) * (F + B - W)


def test_sim_and_analysis_agree_under_edge_for_v_placement() -> None:
    cost = split_cost(1000, 1000, 1000, 300)
    sched = build_schedule("ZB-V", 4, 8)
    a = analyze(sched, cost, comm_model="edge")
    r = run_case(PipelineCase(sched, cost=cost, comm_model="edge"), backend="sim")
    assert r.metrics.step_time_median_ns == a.makespan_ns
    # no send/receive jobs under edge; the V turn (stages 3 and 4 on rank 3) has no delay
    assert not r.schedule.has_comm
    assert a.makespan_ns > analyze(sched, cost, comm_model="free").makespan_ns


def test_edge_hand_computed_two_ranks() -> None:
    # FThenB p=2 m=1, F=10, B=20, c=3: F0 [0,10], F1 [13,23], B1 [23,43], B0 [46,66].
    sched = build_schedule("FThenB", 2, 1)
    cost = full_cost(10, 20, 0, 3)
    assert analyze(sched, cost, comm_model="edge").makespan_ns == 66
    assert run_case(PipelineCase(sched, cost=cost, comm_model="edge"), backend="sim").metrics.step_time_median_ns == 66
    # stream: the same here (a single transfer each way never queues): 10 + 3 + 10 + 20 + 3 + 20
    assert analyze(sched, cost, comm_model="stream").makespan_ns == 66
    assert analyze(sched, cost, comm_model="free").makespan_ns == 60


def test_edge_transfers_do_not_queue_but_stream_ones_do() -> None:
    # FThenB p=2 m=2, F=1, B=2, c=5, by hand.
    # edge: rank 0 F0 [0,1] F1 [1,2]; rank 1 F0 [6,7] F1 [7,8] B0 [8,10] B1 [10,12]; rank 0 B0 [15,17] B1 [17,19].
    # stream: the second transfer each way waits for the first on the pair's comm stream:
    # rank 1 F0 [6,7], F1 [11,12], B0 [12,14], B1 [14,16]; rank 0 B0 [19,21], B1 [24,26].
    sched = build_schedule("FThenB", 2, 2)
    cost = full_cost(1, 2, 0, 5)
    assert analyze(sched, cost, comm_model="edge").makespan_ns == 19
    assert analyze(sched, cost, comm_model="stream").makespan_ns == 26
    assert run_case(PipelineCase(sched, cost=cost, comm_model="edge"), backend="sim").metrics.step_time_median_ns == 19


def test_free_and_comm_false_notes() -> None:
    cost = full_cost(1_000_000, 2_000_000, 0, 50_000)
    r = run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=cost, comm_model="free"), backend="sim")
    assert r.comm_model == "free" and not r.schedule.has_comm
    assert any("comm_model 'free'" in w and "50,000 ns" in w and "not charged" in w for w in r.warnings)
    r = run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=cost, comm=False), backend="sim")
    assert r.comm_model == "stream"
    assert any(w.startswith("comm=False") and "not charged" in w for w in r.warnings)
    # free transfers: no note
    r = run_case(PipelineCase("1F1B", stages=2, microbatches=2, comm_model="free"), backend="sim")
    assert r.warnings == []


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_real_backends_refuse_edge_naming_stream(backend: str) -> None:
    with pytest.raises(ConfigError, match="use comm_model 'stream'"):
        comm.check_backend("edge", backend)
    comm.check_backend("stream", backend)
    comm.check_backend("free", backend)


def test_run_case_refuses_edge_on_cpu() -> None:
    case = PipelineCase("1F1B", stages=2, microbatches=2, comm_model="edge")
    with pytest.raises(ConfigError, match="cpu backend moves real data: use comm_model 'stream'"):
        run_case(case, backend="cpu", steps=range(0, 1))


def test_case_checks_comm_model() -> None:
    with pytest.raises(ConfigError, match="comm_model must be one of free"):
        PipelineCase("1F1B", stages=2, microbatches=2, comm_model="edges")
    with pytest.raises(ConfigError, match="comm=True asks for send/receive jobs"):
        PipelineCase("1F1B", stages=2, microbatches=2, comm=True, comm_model="edge")
    assert PipelineCase("1F1B", stages=2, microbatches=2, comm_model=" Edge ").comm_model == "edge"


def test_run_case_default_model_and_results_say_which() -> None:
    from harness.report.results import case_to_dict

    cost = full_cost(1_000_000, 2_000_000, 0, 10_000)
    r = run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=cost), backend="sim", comm_model="edge")
    assert r.comm_model == "edge"
    assert case_to_dict(r)["comm_model"] == "edge"
    assert r.theory == {}  # closed forms are for free transfers
    r = run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=cost, comm_model="stream"), backend="sim", comm_model="edge")
    assert r.comm_model == "stream"  # the case's own wins


def test_edge_strips_a_schedules_own_comm_jobs() -> None:
    from harness.schedule.passes import add_communication

    cost = full_cost(10, 20, 0, 3)
    lowered = add_communication(build_schedule("1F1B", 2, 2))
    assert analyze(lowered, cost, comm_model="edge").makespan_ns == analyze(build_schedule("1F1B", 2, 2), cost, comm_model="edge").makespan_ns


def test_edge_delays_refuse_a_plan_with_comm_jobs() -> None:
    from harness.plan.build import build_plan
    from harness.schedule.passes import add_communication

    plan = build_plan(add_communication(build_schedule("1F1B", 2, 2)))
    with pytest.raises(ConfigError, match="without send/receive jobs"):
        edge_delays(plan, full_cost(1, 2, 0, 1))


@pytest.mark.parametrize(("p", "m"), [(4, 8), (8, 16)])
def test_dualpipe_readme_bubbles_of_1f1b_and_zb1p(p: int, m: int) -> None:
    # deepseek-ai/DualPipe README, B = full backward: 1F1B (PP-1)(F+B), ZB1P (PP-1)(F+B-2W).
    f, b_full, w = 3000, 5000, 2000
    a = analyze(build_schedule("1F1B", p, m), FixedCost(forward_ns=f, backward_ns=b_full), comm_model="edge")
    assert a.span_bubble_ns[0] == (p - 1) * (f + b_full)
    a = analyze(build_schedule("ZB-H1", p, m), split_cost(f, b_full - w, w, 0), comm_model="edge")
    assert a.span_bubble_ns[0] == (p - 1) * (f + b_full - 2 * w)
