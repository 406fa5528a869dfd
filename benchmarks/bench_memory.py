"""What the memory model adds to the analytic path (issue: at most 10 % at 1 M jobs).

Run: ``python -m pytest benchmarks/bench_memory.py --benchmark-only``.

The same chain as ``bench_schedule.py`` (interleaved 1F1B, p = 64, m = 1024,
v = 2, with communication: 782,336 jobs; build + comm pass + validate +
simulate), without and with :func:`harness.analysis.memory.analytic_memory` at the end,
under a cost model with memory bytes per job. ``extra_info`` of the second
gives the memory step's own time and its share of the first. Nothing here
asserts a duration.
"""

from __future__ import annotations

import time

from harness.analysis.memory import analytic_memory
from harness.model.cost import FixedCost
from harness.plan.build import build_plan
from harness.plan.timeline import simulate
from harness.schedule import build_schedule
from harness.schedule.passes import add_communication

COST = FixedCost(forward_ns=1000, backward_ns=2000, p2p_latency_ns=100, activation_bytes=1 << 20, p2p_gbytes_per_s=50,
                 mem_F=1 << 20, mem_W=-(1 << 19), mem_static=1 << 30)
P, M, V = 64, 1024, 2


def _analytic(memory: bool) -> tuple[int, float]:
    plan = build_plan(add_communication(build_schedule("Interleaved1F1B", P, M, V)))
    simulate(plan, COST)
    t = time.perf_counter()
    if memory:
        analytic_memory(plan, COST)
    return plan.num_jobs, time.perf_counter() - t


def test_analytic_path_without_memory(benchmark):
    benchmark.pedantic(lambda: _analytic(False), rounds=3, iterations=1, warmup_rounds=0)


def test_analytic_path_with_memory(benchmark):
    out: dict[str, float] = {}

    def run() -> None:
        out["jobs"], out["memory_s"] = _analytic(True)

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=0)
    total = benchmark.stats.stats.median
    benchmark.extra_info.update({"jobs": out["jobs"], "memory_s_last_round": out["memory_s"],
                                 "memory_share_of_chain": out["memory_s"] / (total - out["memory_s"]),
                                 "aim": "memory adds at most 10% to build + validate + simulate"})
