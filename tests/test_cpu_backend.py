"""The cpu backend: host threads reproduce the sim timeline with real sleeps."""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from unittest import mock

import pytest

from harness.analysis.critical_path import critical_path
from harness.analysis.metrics import compute_metrics
from harness.errors import ConfigError, ExecutionError
from harness.model.cost import FixedCost
from harness.plan.build import build_plan
from harness.run.device.base import Work
from harness.run.device.cpu import CpuDevice
from harness.run.executor import execute
from harness.schedule import build_schedule

from conftest import MS, run_sim


def _order_per_stream(records):
    out: dict[str, list[str]] = {}
    for j in sorted(records.jobs, key=lambda j: (j.step, j.start_ns)):
        if j.step == records.steps[0]:
            out.setdefault(j.stream, []).append(j.label)
    return out


def _handoff_noise_ns(samples: int = 30) -> int:
    """The 90th percentile of ``samples`` hand-offs between two plain host threads, ns: one ends a 1 ms
    sleep, stamps the time and sets a ``threading.Event``; the other, already waiting for it, stamps
    the time it woke. What one cross-stream dependency costs on this machine at this moment, load
    included, measured without the harness (its own code must not widen its own bound)."""
    stamps: list[tuple[int, int]] = []

    def waiter(flag: threading.Event, sent: list[int]) -> None:
        flag.wait()
        stamps.append((sent[0], time.perf_counter_ns()))

    for _ in range(samples):
        flag, sent = threading.Event(), [0]
        thread = threading.Thread(target=waiter, args=(flag, sent))
        thread.start()
        time.sleep(1e-3)
        sent[0] = time.perf_counter_ns()
        flag.set()
        thread.join()
    return int(statistics.quantiles([woke - set_at for set_at, woke in stamps], n=10)[-1])


def _replayed_step_ns(plan, records, step: int) -> int:
    """``step``'s length had every job lasted what it measured and started the moment its
    dependencies and its stream let it: the run less the executor's dispatch latency (ns)."""
    from harness.imports.replay import replay_order

    measured = {j.label: j.duration_ns for j in records.jobs if j.step == step}
    times = replay_order(plan, [measured[str(job)] for job in plan.jobs])
    return max(end for _, end in times)


@pytest.mark.parametrize("name", ["FThenB", "1F1B"])
def test_sleep_workload_reproduces_sim(name):
    schedule = build_schedule(name, 4, 6)
    plan = build_plan(schedule)
    cost = FixedCost.ms(F=2, B=4)
    sim = run_sim(schedule, cost)
    sim_time = compute_metrics(sim).step_time_median_ns
    assert sim_time == (6 + 3) * 6 * MS
    # How late the cpu run may end is measured, not assumed (the 5 % figure of issue 2 is
    # benchmarks/bench_cpu_overhead.py's). The sim timeline replayed with the durations the jobs
    # measured (a sleep on a loaded host overruns) is the exact floor; above it, per job on the
    # step's critical path, one thread hand-off of this machine (90th percentile, measured just
    # before and after the run) plus one spin of the device's sleep routine (a waking stream may
    # wait that long for the GIL). A load spike the hand-offs missed gets two more tries.
    for _attempt in range(3):
        noise = _handoff_noise_ns()
        dev = CpuDevice("sleep")
        try:
            cpu = execute(plan, dev, cost, range(1, 4))
        finally:
            dev.close()
        per_job = max(noise, _handoff_noise_ns()) + dev.sleep_overshoot_ns
        replayed = {s: _replayed_step_ns(plan, cpu, s) for s in cpu.steps}
        excess = {s: e - b - replayed[s] for s, b, e in zip(cpu.steps, cpu.step_start_ns, cpu.step_end_ns, strict=True)}
        step = min(excess, key=excess.__getitem__)  # the step the executor delayed least
        allowed = len(critical_path(cpu, plan, step).jobs) * per_job
        if excess[step] <= allowed:
            break
    assert _order_per_stream(cpu) == _order_per_stream(sim)
    # exact: sleeps never end early, and no job starts before what it waits for
    assert all(sim_time <= v for v in replayed.values()) and all(v >= 0 for v in excess.values())
    assert excess[step] <= allowed, (excess, per_job)
    # Jobs on one stream never overlap and every job lasts at least its duration.
    for stream in cpu.streams:
        jobs = sorted((j for j in cpu.jobs if j.stream == stream), key=lambda j: j.start_ns)
        assert all(a.end_ns <= b.start_ns for a, b in itertools.pairwise(jobs))
    assert all(j.duration_ns >= (2 if j.kind == "F" else 4) * MS for j in cpu.jobs)


def test_dependencies_hold_on_the_common_time_base():
    schedule = build_schedule("1F1B", 3, 4)
    plan = build_plan(schedule)
    dev = CpuDevice("sleep")
    try:
        rec = execute(plan, dev, FixedCost(forward_ns=300_000, backward_ns=600_000), range(0, 1))
    finally:
        dev.close()
    at = {j.label: j for j in rec.jobs}
    for i, job in enumerate(plan.jobs):
        for d in plan.deps[i]:
            assert at[str(plan.jobs[d])].end_ns <= at[str(job)].start_ns


def test_wait_captures_latest_record_at_wait_time():
    dev = CpuDevice("sleep")
    try:
        a, b = dev.stream("a"), dev.stream("b")
        ev, t0, t1 = dev.event(), dev.event(), dev.event()
        dev.record(t0, a)
        dev.launch(a, Work(1 * MS))
        dev.record(ev, a)  # 1 ms after t0
        dev.wait(b, ev)
        dev.launch(a, Work(50 * MS))
        dev.record(ev, a)  # re-record 51 ms after t0: must not delay b
        dev.record(t1, b)
        dev.synchronize()
        waited = dev.elapsed_ns(t0, t1)
        assert 1 * MS <= waited < 51 * MS  # had b waited for the re-record, 51 ms at least
    finally:
        dev.close()


def test_matmul_workload_does_real_work():
    dev = CpuDevice("matmul")
    try:
        s = dev.stream("s")
        t0, t1 = dev.event(), dev.event()
        dev.record(t0, s)
        dev.launch(s, Work(duration_ns=1, flops=2 * 256**3 * 4))  # four 256^3 GEMMs
        dev.record(t1, s)
        dev.synchronize()
        assert dev.elapsed_ns(t0, t1) > 1000  # far more than the 1 ns a sleep would take
        assert dev.describe()["workload"] == "matmul"
    finally:
        dev.close()


def test_unknown_workload_lists_valid_ones():
    with pytest.raises(ConfigError, match="valid: sleep, matmul"):
        CpuDevice("bogus")


@pytest.mark.parametrize("timeout", ["soon", 0, -1, float("nan"), float("inf"), 1e12, True, None])
def test_stall_timeout_must_be_a_positive_number_of_seconds(timeout):
    with pytest.raises(ConfigError) as info:
        CpuDevice("sleep", stall_timeout_s=timeout)
    assert str(info.value) == f"the cpu backend's stall_timeout_s must be a positive number of seconds (at most 1000000), got {timeout!r}"


def test_stalled_stream_fails_instead_of_hanging():
    dev = CpuDevice("sleep", stall_timeout_s=0.2)
    try:
        a = dev.stream("rank0/compute")
        never = dev.event()
        dev.launch(a, Work(1000, label="0F0"))
        # Simulate a record that never happens: take a record object and never enqueue it.
        from harness.run.device.cpu import _Record

        never.latest = _Record()
        dev.wait(a, never)
        with pytest.raises(ExecutionError) as info:
            dev.synchronize()
        assert str(info.value) == (
            "cpu: stream rank0/compute waited 0.2 s (stall_timeout_s) after job 0F0 for an event recorded on another stream; "
            "the job it depends on did not finish by then: the run stalled, or that job lasts longer than stall_timeout_s "
            "(raise it for long jobs)"
        )
    finally:
        dev.close()


def test_close_stops_worker_threads():
    before = {t.ident for t in threading.enumerate()}
    dev = CpuDevice("sleep")
    dev.stream("x")
    dev.stream("y")
    dev.close()
    dev.close()  # idempotent
    alive = [t for t in threading.enumerate() if t.ident not in before and t.name.startswith("harness-cpu-")]
    assert alive == []


def test_short_jobs_on_the_cpu_backend_come_with_a_note():
    from harness import PipelineCase, run_case

    short = run_case(PipelineCase("1F1B", 2, 2, cost=FixedCost(forward_ns=100_000, backward_ns=200_000)), "cpu")
    assert len(short.warnings) == 1 and "use --backend=sim for exact figures" in short.warnings[0]
    assert run_case(PipelineCase("1F1B", 2, 2, cost=FixedCost.ms(F=2, B=4)), "cpu").warnings == []
    assert run_case(PipelineCase("1F1B", 2, 2, cost=FixedCost(forward_ns=100_000, backward_ns=200_000)), "sim").warnings == []


def test_a_gpu_sized_compute_case_on_the_cpu_is_refused_with_an_estimate(monkeypatch):
    from harness import PipelineCase, TransformerCost, run_case, runner

    monkeypatch.setattr(runner, "CPU_GEMM_LIMIT_S", 5.0)  # well below any CPU's time for 356 TFLOP

    gpt = TransformerCost(hidden_size=2048, seq_len=1024, micro_batch_size=1, num_layers=24, tflops=200.0)
    # the adaptive window runs at least 1 warm-up + 5 steps: 6 steps of 8 micro-batches, 59.3 TFLOP each
    with pytest.raises(ConfigError, match=r"the compute workload would run 356 TFLOP of real GEMMs on this CPU, about [\d,]+ min"):
        run_case(PipelineCase("1F1B", 4, 8, cost=gpt, workload="compute"), "cpu")
    with pytest.raises(ConfigError, match=r"would run 237 TFLOP"):  # a fixed window of 1 warm-up + 3 steps
        run_case(PipelineCase("1F1B", 4, 8, cost=gpt, workload="compute"), "cpu", range(1, 4))
    # the same model with timed jobs, or on sim, runs
    assert run_case(PipelineCase("1F1B", 4, 8, cost=gpt, workload="compute"), "sim").metrics.step_time_median_ns > 0


def test_a_stretched_cpu_step_is_reported_against_the_cost_models_step():
    # Records as a crowded 2-core machine gives them: 3 steps of 40 ms where the schedule takes 33 ms.
    from harness.records import RunRecords
    from harness.run.stability import trust_warnings

    def records(backend: str, workload: str, n_streams: int) -> RunRecords:
        return RunRecords(backend=backend, device={"workload": workload}, num_ranks=4,
                          streams=[f"rank{r}/compute" for r in range(n_streams)], steps=[1, 2, 3],
                          step_start_ns=[0, 50_000_000, 100_000_000], step_end_ns=[40_000_000, 90_000_000, 140_000_000])

    with mock.patch("os.cpu_count", return_value=2):
        warned = trust_warnings(records("cpu", "sleep", 32), predicted_step_ns=33_000_000)
        assert warned == [
            "median step 40.000 ms is 21% longer than the 33.000 ms the cost model gives for this schedule: 32 streams "
            "share 2 core(s): the threads that finish each job's sleep wait for a core, so jobs and hand-offs stretch; "
            "the cpu backend's figures are host-timing estimates; use --backend=sim for exact ones"
        ]
        assert "streams share" not in trust_warnings(records("cpu", "sleep", 2), predicted_step_ns=33_000_000)[0]
        assert trust_warnings(records("cpu", "sleep", 32), predicted_step_ns=37_000_000) == []  # within 10 %
        assert trust_warnings(records("cpu", "matmul", 32), predicted_step_ns=33_000_000) == []  # GEMMs: no duration to match
        assert trust_warnings(records("sim", "virtual", 32), predicted_step_ns=33_000_000) == []
        # an mpi rank runs a cpu device: the same note, which says its transfers are real
        assert trust_warnings(records("mpi", "sleep", 2), predicted_step_ns=33_000_000) == [
            "median step 40.000 ms is 21% longer than the 33.000 ms the cost model gives for this schedule: the mpi "
            "backend's figures are host-timing estimates and include real transfers, which the cost model charges only "
            "as its p2p terms; use --backend=sim for exact ones"
        ]


def test_short_jobs_get_one_note_not_also_the_stretch_one():
    from harness.records import JobRecord, RunRecords
    from harness.run.stability import trust_warnings

    jobs = [JobRecord(0, "rank0/compute", 0, "F", 0, 0, 1, 0, 200_000)]  # a 200 µs job
    rec = RunRecords(backend="cpu", device={"workload": "sleep"}, num_ranks=1, streams=["rank0/compute"], steps=[1],
                     step_start_ns=[0], step_end_ns=[400_000], jobs=jobs)
    (note,) = trust_warnings(rec, predicted_step_ns=200_000)  # twice the predicted step, yet one note
    assert note.startswith("median job 200 µs: on the cpu backend each cross-stage dependency costs a thread hand-off")


def test_a_stall_names_the_job_it_waited_for():
    from harness import PipelineCase, run_case

    case = PipelineCase("1F1B", stages=2, microbatches=2, cost=FixedCost.ms(F=100, B=200), device_options={"cpu": {"stall_timeout_s": 0.01}})
    with pytest.raises(ExecutionError) as info:
        run_case(case, "cpu", range(0, 1))
    assert str(info.value).startswith(
        "cpu: stream rank1/compute waited 0.01 s (stall_timeout_s) before its first job for an event recorded on rank0/compute "
        "after job 0F0; the job it depends on did not finish by then"
    )
