"""Recomputation kept apart from the backward (``FixedCost.recompute_ns``, ``FixedCost.ms(R=...)``) and the
bubble's normalizations, each saying whether recomputation counts as work (harness.analysis.bubble), against
mindformers' pipeline_balance simulator (tests/_reference_mindformers.py), whose ``real`` bubble counts it as bubble.
"""

from __future__ import annotations

import pytest
from _reference_mindformers import DOCSTRING_EXAMPLES, MindformersSimulator

from harness.analysis.analytic import analyze
from harness.analysis.bubble import RECOMPUTE_IS_WORK, bubble_in, convert_bubble, decompose, recompute_by_rank
from harness.errors import ConfigError
from harness.model.cost import FixedCost
from harness.plan.build import build_plan
from harness.schedule.model import Job, JobKind
from harness.schedule.registry import build_schedule

MS = 1_000_000


def _ex3() -> tuple[MindformersSimulator, FixedCost]:
    """mindformers' recompute example (p=8, v=3, m=16, 1 unit = 1 ms, B = 2F) without transfers; stage k = chunk * p + rank."""
    bt, m, kw, *_ = DOCSTRING_EXAMPLES["ex3"]
    sim = MindformersSimulator(bt, m, **{**kw, "comm_time": 0.0})
    per = [(c, r) for c in range(sim.vp) for r in range(sim.pp)]
    cost = FixedCost(forward_ns=tuple(round(sim.block_time[c, r] * MS) for c, r in per),
                     backward_ns=tuple(round(2 * sim.block_time[c, r] * MS) for c, r in per),
                     recompute_ns=tuple(round(sim.layer_recompute[c, r] * MS) for c, r in per))
    return sim, cost


def test_mindformers_counts_recomputation_as_bubble() -> None:
    sim, cost = _ex3()
    plan = build_plan(build_schedule("Interleaved1F1B", 8, 16, 3))
    a = analyze(plan, cost)
    assert a.makespan_ns == 385_800_000 == round(sim.run(False).end_time * MS)
    rec = recompute_by_rank(plan, cost)
    assert sum(rec) == 6 * MS * 16  # layer_recompute sums to 6 per micro-batch
    assert round(bubble_in("mindformers", a.makespan_ns, a.busy_ns, rec), 4) == 0.3230 == round(sim.bubbles["real"], 4)
    assert round(a.bubble_over_ideal, 4) == 0.2708  # recomputation counted as work
    assert bubble_in("over_ideal", a.makespan_ns, a.busy_ns, rec) == a.bubble_over_ideal
    assert bubble_in("bubble_ratio", a.makespan_ns, a.busy_ns, rec) == a.bubble_ratio
    share = sum(rec) / sum(a.busy_ns)
    mf = bubble_in("mindformers", a.makespan_ns, a.busy_ns, rec)
    assert convert_bubble(a.bubble_over_ideal, "over_ideal", "mindformers", share) == pytest.approx(mf, rel=1e-12)
    assert convert_bubble(mf, "mindformers", "idle_share", share) == pytest.approx(a.bubble_ratio, rel=1e-12)
    assert RECOMPUTE_IS_WORK == {"idle_share": True, "over_ideal": True, "mindformers": False}
    d = decompose(a.makespan_ns, plan, cost)
    assert d.recompute_ns == 16 * 3 * MS  # the busiest rank, rank 0: chunks 1 and 2 recompute 1 + 2 per micro-batch


def test_bubble_in_refuses_what_is_no_bubble() -> None:
    with pytest.raises(ConfigError, match="unknown bubble normalization 'ratio'"):
        bubble_in("ratio", 10, [5, 5])
    with pytest.raises(ConfigError, match="recompute_ns has 1 value"):
        bubble_in("mindformers", 10, [5, 5], [1])
    with pytest.raises(ConfigError, match="rank 1: recomputation 6 ns"):
        bubble_in("mindformers", 10, [5, 5], [0, 6])
    with pytest.raises(ConfigError, match="a bubble needs a step and work"):
        bubble_in("mindformers", 10, [5, 5], [5, 5])
    with pytest.raises(ConfigError, match="recompute_share is R / W"):
        convert_bubble(0.1, "over_ideal", "mindformers", 1.0)
    with pytest.raises(ConfigError, match=r"recompute_share 0.2 is at least 0.25 \(the recomputation alone\), got 0.1"):
        convert_bubble(0.1, "mindformers", "over_ideal", 0.2)


def test_recomputation_goes_into_the_backward_or_its_input_half() -> None:
    cost = FixedCost.ms(F=1, B=2, R=[0.5, 0])
    assert cost.duration_ns(Job(0, JobKind.B, 0), 2) == 2_500_000 and cost.recompute_time_ns(Job(0, JobKind.B, 0), 2) == 500_000
    assert cost.duration_ns(Job(1, JobKind.B, 0), 2) == 2 * MS and cost.recompute_time_ns(Job(0, JobKind.F, 0), 2) == 0
    split = FixedCost.ms(F=1, B=2, W=1, R=0.5)
    assert split.duration_ns(Job(0, JobKind.I, 0), 1) == 1_500_000 and split.duration_ns(Job(0, JobKind.W, 0), 1) == MS
    assert split.recompute_time_ns(Job(0, JobKind.I, 0), 1) == 500_000 and split.recompute_time_ns(Job(0, JobKind.W, 0), 1) == 0
    assert "recompute_ns" not in FixedCost.ms(F=1, B=2).describe()
    assert "recompute_ns" not in FixedCost.ms(F=1, B=2, R=[0, 0]).describe()
    assert FixedCost.ms(F=1, B=2, R=[0.5, 0]).describe()["recompute_ns"] == [500_000, 0]
    assert not FixedCost.ms(F=1, B=2, R=[0.5, 0]).is_uniform(2)
    with pytest.raises(ConfigError, match=r"cost model: R\[1\] \(stage 1\) must be 0 or more, got -1 ms"):
        FixedCost.ms(F=1, B=2, R=[0, -1])
    with pytest.raises(ConfigError, match="per-stage lists of different lengths: F has 2, R has 3"):
        FixedCost.ms(F=[1, 1], B=2, R=[0, 0, 1])
    with pytest.raises(ConfigError, match="recompute_ns gives 3 per-stage value"):
        FixedCost(forward_ns=1000, backward_ns=2000, recompute_ns=(0, 0, 5)).duration_ns(Job(0, JobKind.B, 0), 2)
    with pytest.raises(ConfigError, match="takes recompute_ns as R, in milliseconds"):
        FixedCost.ms(F=1, B=2, recompute_ns=5)
    assert any("re-runs per stage 0.5, 0 ms of forward work" in line for line in FixedCost.ms(F=1, B=2, R=[0.5, 0]).assumptions(
        build_schedule("1F1B", 2, 2)))
    assert not any("recomputation" in line for line in FixedCost.ms(F=1, B=2).assumptions(build_schedule("1F1B", 2, 2)))
