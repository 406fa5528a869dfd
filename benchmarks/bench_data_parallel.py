"""Cost of PyTorch's data-parallel jobs (UNSHARD, RESHARD, REDUCE_GRAD) in a schedule.

Run: ``python -m pytest benchmarks/bench_data_parallel.py --benchmark-only``.

A schedule that holds them is planned on the numpy path of :func:`~harness.plan.build.build_plan`,
as a compute-only one is (their order against their stage's compute checked there too); this
times ``build_plan`` of an
interleaved 1F1B schedule (p = 64, v = 2, m = 256: 65,536 compute jobs) without and with one
UNSHARD, RESHARD and REDUCE_GRAD per stage (384 more jobs), and records ns per job.
Nothing here asserts a duration.
"""

from __future__ import annotations

import pytest

from harness.plan.build import build_plan
from harness.schedule import build_schedule
from harness.schedule.model import Job, JobKind, Schedule

P, V, M = 64, 2, 256


def _with_data_parallel(s: Schedule) -> Schedule:
    """Each rank's list opened by its stages' UNSHARD and closed by their REDUCE_GRAD and RESHARD (as PyTorch lowers it)."""
    rows = []
    for r, row in enumerate(s.ranks):
        stages = [k for k, rank in enumerate(s.stage_to_rank) if rank == r]
        rows.append(tuple(Job(k, JobKind.UNSHARD, None) for k in stages) + tuple(row)
                    + tuple(Job(k, kind, None) for k in stages for kind in (JobKind.REDUCE_GRAD, JobKind.RESHARD)))
    return Schedule(s.name, s.num_microbatches, s.stage_to_rank, tuple(rows), dict(s.params))


@pytest.mark.parametrize("data_parallel", [False, True], ids=["compute-only", "with-UNSHARD-RESHARD-REDUCE_GRAD"])
def test_build_plan_with_and_without_data_parallel_jobs(benchmark, data_parallel):
    s = build_schedule("Interleaved1F1B", P, M, V)
    if data_parallel:
        s = _with_data_parallel(s)
    out: dict[str, int] = {}

    def run() -> None:
        out["jobs"] = build_plan(s).num_jobs

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=0)
    benchmark.extra_info.update({"jobs": out["jobs"], "ns_per_job": benchmark.stats.stats.median * 1e9 / out["jobs"]})
