"""Analytics agree exactly with running the plan on the sim device (harness.run.device.sim)."""

from __future__ import annotations

import pytest
from _sched_helpers import build_any

from harness.analysis.analytic import analyze
from harness.analysis.metrics import compute_metrics
from harness.errors import ConfigError
from harness.model.transformer import TransformerCost
from harness.plan.build import build_plan
from harness.plan.timeline import simulate
from harness.run.device.sim import SimDevice
from harness.run.executor import execute
from harness.schedule import build_schedule, schedule_names
from harness.schedule.model import Job, JobKind
from harness.schedule.passes import add_communication
from tests._sched_helpers import chunks_for, cost

COSTS = {
    "uniform": cost(1000, 2000),
    "split": cost(1500, 1000, 700),
    "comm": cost(1000, 2000, p2p_latency_ns=250, activation_bytes=1 << 20, p2p_gbytes_per_s=50),
    "transformer": TransformerCost(
        hidden_size=1024, seq_len=512, micro_batch_size=1, num_layers=16, vocab_size=50304, tflops=100, p2p_latency_ns=5000,
        p2p_gbytes_per_s=25,  # the LM head makes the last stage heavier
    ),
}


@pytest.mark.parametrize("name", sorted(schedule_names()))
@pytest.mark.parametrize("cost_name", sorted(COSTS))
@pytest.mark.parametrize("comm", [False, True])
def test_timeline_matches_sim_device(name: str, cost_name: str, comm: bool) -> None:
    c = COSTS[cost_name]
    s = build_any(name, 4, 8, chunks_for(name, 2), optimizer=True)
    if comm:
        s = add_communication(s)
    plan = build_plan(s)
    if name == "DualPipe" and cost_name == "transformer":  # one chain's cost model: refused (tests/test_dualpipe.py)
        with pytest.raises(ConfigError, match="TransformerCost cannot time schedule 'DualPipe'"):
            simulate(plan, c)
        return
    tl = simulate(plan, c)
    records = execute(plan, SimDevice(), c, range(1, 3))
    step = [r for r in records.jobs if r.step == 1]
    base = records.step_start_ns[0]
    got = {(r.stage, r.kind, r.microbatch): (r.start_ns - base, r.end_ns - base) for r in step}
    want = {(j.stage, j.kind.value, j.microbatch): (tl.start[i], tl.end[i]) for i, j in enumerate(plan.jobs)}
    assert got == want
    a = analyze(plan, c)
    mt = compute_metrics(records)
    assert a.makespan_ns == mt.steps[0].step_time_ns
    assert a.busy_ns == mt.steps[0].busy_ns
    assert a.bubble_ratio == pytest.approx(mt.bubble_ratio)
    assert a.bubble_over_ideal == pytest.approx(mt.bubble_over_ideal)
    assert a.peak_inflight == mt.peak_inflight


def test_bubble_normalizations_relate() -> None:
    # idle/(p*T) = b/(1+b) where b = idle/busy (both labelled in ScheduleAnalytics).
    a = analyze(build_schedule("1F1B", 4, 8), cost(1000, 2000))
    b = a.bubble_over_ideal
    assert a.bubble_ratio == pytest.approx(b / (1 + b))
    assert sum(a.idle_ns) == 4 * a.makespan_ns - sum(a.busy_ns)


def test_p2p_counts_without_and_with_comm_jobs() -> None:
    c = COSTS["transformer"]
    assert isinstance(c, TransformerCost)
    s = build_schedule("1F1B", 4, 8)
    a = analyze(s, c)
    assert a.p2p_messages == 2 * 3 * 8  # forward and backward across 3 boundaries, 8 micro-batches
    assert a.p2p_bytes == a.p2p_messages * 1024 * 512 * 2  # b*s*h*2 bytes (bf16)
    b = analyze(add_communication(s), c)
    assert (b.p2p_messages, b.p2p_bytes) == (a.p2p_messages, a.p2p_bytes)


def test_peak_per_stage_v_placement() -> None:
    # ZB-V rank r holds stages r and 2p-1-r: per-stage peaks add up to the rank's.
    p, m = 3, 8
    a = analyze(build_schedule("ZB-V", p, m), cost(1000, 1000, 1000))
    assert a.peak_inflight_per_stage[0] <= a.peak_inflight[0] <= a.peak_inflight_per_stage[0] + a.peak_inflight_per_stage[5]


def test_durations_asked_twice_per_stage_and_kind() -> None:
    calls: list[Job] = []
    base = cost(1000, 2000)

    class Counting:
        def duration_ns(self, job: Job, num_stages: int) -> int:
            calls.append(job)
            return base.duration_ns(job, num_stages)

        def nbytes(self, job: Job, num_stages: int) -> int:
            return 0

    a = analyze(build_schedule("1F1B", 2, 50), Counting(), comm=False)  # type: ignore[arg-type]
    assert a.makespan_ns == (50 + 1) * 3000
    # per (stage, kind) pair, 2 stages x {F, B}: its first micro-batch, and its last to check that costs
    # do not vary by micro-batch (they would be flattened to the first)
    assert len(calls) == 8 and {j.microbatch for j in calls} == {0, 49}
    assert {j.kind for j in calls} == {JobKind.F, JobKind.B}
    calls.clear()
    analyze(build_schedule("1F1B", 2, 50), Counting())  # type: ignore[arg-type]
    assert calls[0] == Job(0, JobKind.SEND_F, 0) and len(calls) == 9  # asked whether transfers take time: no


def test_analyze_inserts_communication_as_a_case_does() -> None:
    # 1F1B p=4 m=8, F=1 ms, B=2 ms, each transfer 0.5 ms + 1 MB at 1 GB/s = 1.5 ms: the prediction
    # equals what run_case measures on sim, and only comm=False leaves transfers free.
    from harness.case import PipelineCase
    from harness.model.cost import FixedCost
    from harness.runner import run_case

    c = FixedCost.ms(F=1, B=2, p2p_latency_ns=500_000, activation_bytes=1_000_000, p2p_gbytes_per_s=1.0)
    s = build_schedule("1F1B", 4, 8)
    predicted = analyze(s, c)
    measured = run_case(PipelineCase("1F1B", stages=4, microbatches=8, cost=c), "sim", range(0, 1))
    assert predicted.makespan_ns == measured.metrics.step_time_median_ns == 78_000_000
    assert (predicted.p2p_messages, predicted.p2p_bytes) == (48, 48_000_000)  # 2 (p-1) m sends of 1 MB
    assert analyze(s, c, comm=False).makespan_ns == (8 + 4 - 1) * 3_000_000  # the compute-only closed form
    assert analyze(s, cost(1000, 2000)).makespan_ns == analyze(s, cost(1000, 2000), comm=False).makespan_ns
    with pytest.raises(ConfigError, match=r"^analyze: comm=True needs a Schedule; a Plan is analysed as it was built$"):
        analyze(build_plan(s), c, comm=True)


def test_comm_true_on_a_schedule_that_has_send_receive_jobs_keeps_them() -> None:
    from harness.case import PipelineCase
    from harness.model.cost import FixedCost
    from harness.runner import run_case

    c = FixedCost.ms(F=1, B=2, p2p_latency_ns=500_000)
    lowered = add_communication(build_schedule("1F1B", 4, 8))
    assert analyze(lowered, c, comm=True).makespan_ns == analyze(lowered, c).makespan_ns == 48_000_000
    ran = run_case(PipelineCase(schedule=lowered, cost=c, comm=True), "sim", range(0, 1))
    assert ran.metrics.step_time_median_ns == 48_000_000 and ran.schedule.num_jobs == lowered.num_jobs
