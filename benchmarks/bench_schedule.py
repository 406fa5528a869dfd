"""Throughput of the schedule library: build + comm pass + validate/plan + timeline simulation.

Run: ``python -m pytest benchmarks/bench_schedule.py --benchmark-only``.

The headline figure (issue 3) is an interleaved 1F1B schedule with p = 64,
m = 1024, v = 2 and communication jobs: 782,336 jobs. ``extra_info`` carries
jobs/s for the whole chain and per phase. Schedules and plans are held as
numpy columns and make their per-job objects on first access; a second
benchmark times that access (``schedule.ranks``, ``plan.jobs``, ``plan.deps``,
...), which a run on a backend pays and a pure analysis does not, and
:func:`~harness.analysis.analytic.analyze` on the same plan. The scaling benchmarks time the
validator (``build_plan``) and the comm pass alone at three sizes (m = 256,
512, 1024) and record ns per job (median and minimum of 5 rounds), which
stays flat when the work is linear.
Nothing here asserts a duration.
"""

from __future__ import annotations

import time

import pytest

from harness.analysis.analytic import analyze
from harness.model.cost import FixedCost
from harness.plan.build import build_plan
from harness.plan.timeline import simulate
from harness.schedule import build_schedule
from harness.schedule.passes import add_communication

COST = FixedCost(forward_ns=1000, backward_ns=2000, p2p_latency_ns=100, activation_bytes=1 << 20, p2p_gbytes_per_s=50)
P, V = 64, 2


def _chain(m: int) -> tuple[int, dict[str, float]]:
    t = [time.perf_counter()]
    s = build_schedule("Interleaved1F1B", P, m, V)
    t.append(time.perf_counter())
    s = add_communication(s)
    t.append(time.perf_counter())
    plan = build_plan(s)
    t.append(time.perf_counter())
    simulate(plan, COST)
    t.append(time.perf_counter())
    names = ("build_s", "comm_s", "validate_plan_s", "simulate_s")
    return plan.num_jobs, {k: t[i + 1] - t[i] for i, k in enumerate(names)}


def test_interleaved_p64_m1024_v2_with_comm(benchmark):
    out: dict[str, object] = {}

    def run() -> None:
        n, phases = _chain(1024)
        out["jobs"] = n
        out["phases"] = phases

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=0)
    n = int(out["jobs"])  # type: ignore[arg-type]
    phases: dict[str, float] = out["phases"]  # type: ignore[assignment]
    total = benchmark.stats.stats.median
    benchmark.extra_info.update(
        {
            "jobs": n,
            "jobs_per_s_end_to_end": n / total,
            "last_round_phases_s": phases,
            "last_round_jobs_per_s_by_phase": {k: n / v for k, v in phases.items()},
            "aim": ">= 1,000,000 jobs/s end to end",
        }
    )


def test_interleaved_p64_m1024_v2_per_job_views(benchmark):
    """Making the per-job Python objects of the headline case, and analyze()."""
    out: dict[str, float] = {}

    def run() -> None:
        s = add_communication(build_schedule("Interleaved1F1B", P, 1024, V))
        plan = build_plan(s)
        t0 = time.perf_counter()
        s.ranks  # noqa: B018
        plan.jobs  # noqa: B018
        plan.rank, plan.step, plan.stream, plan.chunk  # noqa: B018
        plan.deps, plan.start_deps  # noqa: B018
        t1 = time.perf_counter()
        analyze(plan, COST)
        t2 = time.perf_counter()
        out.update(views_s=t1 - t0, analyze_s=t2 - t1, jobs=plan.num_jobs)

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=0)
    benchmark.extra_info.update({**out, "views_ns_per_job": out["views_s"] * 1e9 / out["jobs"], "analyze_jobs_per_s": out["jobs"] / out["analyze_s"]})


@pytest.mark.parametrize("m", [256, 512, 1024])
def test_validator_scaling(benchmark, m):
    s = add_communication(build_schedule("Interleaved1F1B", P, m, V))
    n = s.num_jobs
    benchmark.pedantic(build_plan, args=(s,), rounds=5, iterations=1)
    st = benchmark.stats.stats
    benchmark.extra_info.update({"jobs": n, "ns_per_job": st.median * 1e9 / n, "ns_per_job_min": st.min * 1e9 / n})


@pytest.mark.parametrize("m", [256, 512, 1024])
def test_comm_pass_scaling(benchmark, m):
    s = build_schedule("Interleaved1F1B", P, m, V)
    out = add_communication(s)
    n = out.num_jobs
    benchmark.pedantic(add_communication, args=(s,), rounds=5, iterations=1)
    st = benchmark.stats.stats
    benchmark.extra_info.update({"jobs_out": n, "ns_per_job": st.median * 1e9 / n, "ns_per_job_min": st.min * 1e9 / n})


@pytest.mark.parametrize("comm_model", ["stream", "edge"])
def test_analyze_comm_model_1m_jobs(benchmark, comm_model):
    """``analyze`` of interleaved 1F1B p=64, m=2048, v=2 (1,048,576 compute jobs) under ``stream``
    (1,564,672 jobs with the send/receive jobs it inserts) and ``edge`` (no comm jobs; a delay on each
    cross-rank dependency): issue 11 asks that ``edge`` be at least as fast as ``stream``."""
    s = build_schedule("Interleaved1F1B", P, 2048, V)
    out: dict[str, object] = {}

    def run() -> None:
        out["a"] = analyze(s, COST, comm_model=comm_model)

    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=0)
    benchmark.extra_info.update({
        "compute_jobs": s.num_jobs,
        "makespan_ns": out["a"].makespan_ns,  # type: ignore[attr-defined]
        "jobs_per_s": s.num_jobs / benchmark.stats.stats.median,
    })
