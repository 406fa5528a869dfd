"""Cost of the ``blocking`` comm model's ``timed`` placement and of its plan (docs/schedules.md).

ZB-V with p = 16, m = 128 (12,288 compute jobs): the ``timed`` walk (a heap of the actions that
can start next, ``O(n log n)``) that places the sends and receives, then the blocking plan
(:mod:`harness.plan.rendezvous`: transfers on the compute streams, each send meeting its
receive, a new enqueue order). Reported in ms; nothing here asserts a duration.
"""

from __future__ import annotations

import time

from harness.model.comm import lower
from harness.model.cost import FixedCost
from harness.plan.build import build_plan
from harness.schedule import build_schedule

COST = FixedCost.ms(F=1, B=2, W=1, p2p_latency_ns=300_000)


def test_blocking_timed_zbv_p16_m128(benchmark):
    schedule = build_schedule("ZB-V", 16, 128)

    def run():
        t0 = time.perf_counter()
        placed = lower(schedule, COST, "blocking")
        t1 = time.perf_counter()
        plan = build_plan(placed)
        return plan, t1 - t0, time.perf_counter() - t1

    plan, place_s, plan_s = benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info.update({"jobs": plan.num_jobs, "place_ms": round(place_s * 1e3), "plan_ms": round(plan_s * 1e3)})
    print(f"\nblocking, ZB-V p=16 m=128: {schedule.num_jobs} compute jobs, {plan.num_jobs} with transfers; "
          f"timed placement {place_s * 1e3:.0f} ms, blocking plan {plan_s * 1e3:.0f} ms")
