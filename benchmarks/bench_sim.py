"""Throughput of the sim backend through the full executor path.

1F1B with p = 32, m = 256: 16,384 compute jobs plus their sends and receives.
Build + validate (plan) + run on the SimDevice through the executor, one step;
reported as jobs per second. This path emulates the device interface op by op
(a wait per cross-stream dependency, two event records and a launch per job,
then a synchronize that plays the streams), as a GPU run issues them, and makes
a JobRecord per job. The same timeline, computed directly from the plan by
:func:`harness.plan.timeline.simulate` (equal to the ns, see
tests/test_analytics.py), is what benchmarks/bench_schedule.py measures against
the 1,000,000 jobs/s aim.
"""

from __future__ import annotations

import time

from harness.model.cost import FixedCost
from harness.plan.build import build_plan
from harness.run.device.sim import SimDevice
from harness.run.executor import execute
from harness.schedule import build_schedule
from harness.schedule.passes import add_communication

COST = FixedCost(forward_ns=1000, backward_ns=2000, p2p_latency_ns=100)


def test_sim_1f1b_p32_m256_with_comm(benchmark):
    def run():
        schedule = add_communication(build_schedule("1F1B", 32, 256))
        plan = build_plan(schedule)
        return plan, execute(plan, SimDevice(), COST, range(0, 1))

    t0 = time.perf_counter()
    plan, _records = benchmark.pedantic(run, rounds=3, iterations=1)
    n = plan.num_jobs
    seconds = benchmark.stats.stats.median if benchmark.stats else time.perf_counter() - t0
    benchmark.extra_info.update({"jobs": n, "jobs_per_s": round(n / seconds)})
    print(f"\nsim, 1F1B p=32 m=256 with comm: {n} jobs in {seconds * 1e3:.0f} ms = {n / seconds:,.0f} jobs/s "
          f"(build + validate + execute + record)")
