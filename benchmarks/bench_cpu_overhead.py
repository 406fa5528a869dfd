"""Host overhead of the cpu backend per job, against the same sleeps run bare.

One rank, one stream, N jobs of 1 ms (FThenB with p = 1: F and B per
micro-batch): the executor's per-job work is two event records, a launch and
the readout, with no cross-stream waits. Overhead per job =
(measured step time - N x 1 ms run bare with the same sleep routine) / N.
A second figure, on 1F1B with p = 4, adds cross-thread event waits: its
overhead is the step time above the simulated one, per job on the critical
path.

Aim (issue 2): <= 50 µs per job.
"""

from __future__ import annotations

import time

import pytest

from harness.analysis.metrics import compute_metrics
from harness.model.cost import FixedCost
from harness.plan.build import build_plan
from harness.run.device.base import Work
from harness.run.device.cpu import CpuDevice
from harness.run.executor import execute
from harness.schedule import build_schedule

MS = 1_000_000
N_MB = 50  # 100 jobs per step


def _bare_sleeps(device: CpuDevice, n: int, duration_ns: int) -> int:
    """Run the cpu stream's own sleep routine n times on this thread; ns elapsed."""
    from harness.run.device.cpu import _CpuStream

    runner = _CpuStream.__new__(_CpuStream)
    runner.device = device
    t0 = time.perf_counter_ns()
    for _ in range(n):
        _CpuStream._execute(runner, Work(duration_ns))
    return time.perf_counter_ns() - t0


def test_cpu_overhead_single_stream(benchmark):
    schedule = build_schedule("FThenB", 1, N_MB)
    plan = build_plan(schedule)
    cost = FixedCost(forward_ns=MS, backward_ns=MS)
    device = CpuDevice("sleep")
    try:
        n = plan.num_jobs
        bare = _bare_sleeps(device, n, MS)

        def run():
            return execute(plan, device, cost, range(1, 4))

        records = benchmark.pedantic(run, rounds=3, iterations=1)
    finally:
        device.close()
    m = compute_metrics(records)
    overhead_us = (m.step_time_median_ns - bare) / n / 1000
    benchmark.extra_info.update({
        "jobs_per_step": n,
        "bare_sleeps_ms": bare / 1e6,
        "step_time_ms": m.step_time_median_ns / 1e6,
        "overhead_per_job_us": round(overhead_us, 2),
        "enqueue_per_job_us": round(m.enqueue_ns_per_job / 1000, 2),
    })
    print(f"\ncpu backend, single stream: {overhead_us:.1f} µs overhead per job "
          f"(step {m.step_time_median_ns / 1e6:.2f} ms vs bare {bare / 1e6:.2f} ms for {n} jobs); "
          f"host enqueue {m.enqueue_ns_per_job / 1000:.1f} µs per job")


@pytest.mark.parametrize("m", [8, 32])
def test_cpu_overhead_1f1b_p4(benchmark, m):
    schedule = build_schedule("1F1B", 4, m)
    plan = build_plan(schedule)
    cost = FixedCost.ms(F=2, B=4)
    device = CpuDevice("sleep")
    try:
        records = benchmark.pedantic(lambda: execute(plan, device, cost, range(1, 4)), rounds=1, iterations=1)
    finally:
        device.close()
    measured = compute_metrics(records).step_time_median_ns
    ideal = (m + 4 - 1) * 6 * MS
    critical_jobs = 2 * (m + 4 - 1)
    per_job = (measured - ideal) / critical_jobs / 1000
    benchmark.extra_info.update({"step_time_ms": measured / 1e6, "sim_ms": ideal / 1e6,
                                 "error_pct": 100 * (measured / ideal - 1), "overhead_per_critical_job_us": round(per_job, 2)})
    print(f"\ncpu backend, 1F1B p=4 m={m}: step {measured / 1e6:.2f} ms vs sim {ideal / 1e6:.2f} ms "
          f"({100 * (measured / ideal - 1):+.2f} %), {per_job:.1f} µs per job on the critical path")
