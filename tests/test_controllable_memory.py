"""V-Half and V-Min (arXiv:2405.15362) against the paper's table.

The table (README of the paper's demo, sail-sg): activation memory by micro-batch 1F1B p,
V-Min (p+4)//3, V-Half (p+2)//2, V-ZB p; bubble rate at T_F = T_B = T_W about p/m, 2p/3m, p/2m, 0,
with bubble rate = 1 - (F+B+W) m / longest stage time (a rank's first-job-to-last-job span).
Here a chunk holds half a rank's layers: F, I, W below are per chunk and one micro-batch's
activations on a rank are two chunk activations.
"""

from __future__ import annotations

import pytest

from harness.analysis.analytic import analyze
from harness.errors import ConfigError
from harness.model.cost import FixedCost
from harness.plan.build import build_plan
from harness.schedule.registry import build_schedule

CHUNK = FixedCost(forward_ns=1000, backward_ns=2000, backward_input_ns=1000, backward_weight_ns=1000)  # F = I = W per chunk


def bubble_rate(name: str, p: int, m: int) -> float:
    a = analyze(build_schedule(name, p, m), CHUNK)
    work = 2 * m * 3000  # two chunks of F + I + W per micro-batch on each rank
    longest = max(b + work for b in a.span_bubble_ns)
    return 1 - work / longest


@pytest.mark.parametrize("p", [4, 6, 8])
@pytest.mark.parametrize(("name", "memory"), [("V-Half", lambda p: (p + 2) // 2), ("V-Min", lambda p: (p + 4) // 3)])
def test_peak_activations_are_the_papers(name: str, memory, p: int) -> None:
    for m in (2 * p, 4 * p):
        a = analyze(build_schedule(name, p, m), CHUNK)
        assert max(a.peak_inflight) == 2 * memory(p)  # chunk activations = 2 x micro-batches
    ones = analyze(build_schedule("1F1B", p, 4 * p), FixedCost(forward_ns=2000, backward_ns=4000))
    assert max(ones.peak_inflight) == p


@pytest.mark.parametrize("p", [4, 6, 8])
def test_bubble_rates_within_the_papers_approximations(p: int) -> None:
    m = 4 * p
    v_half, v_min = bubble_rate("V-Half", p, m), bubble_rate("V-Min", p, m)
    assert 0 < v_half <= p / (2 * m)
    assert v_half < v_min <= 2 * p / (3 * m)
    assert bubble_rate("ZB-V", p, m) == 0


def test_exact_figures_of_the_reference_algorithm() -> None:
    # p=8, m=32, F = I = W = 1000 ns per chunk: worst span bubbles and peaks of the re-implemented
    # reference order (regression figures, not published ones).
    a = analyze(build_schedule("V-Half", 8, 32), CHUNK)
    assert (max(a.span_bubble_ns), a.peak_inflight) == (17000, [10] * 8)
    a = analyze(build_schedule("V-Min", 8, 32), CHUNK)
    assert (max(a.span_bubble_ns), a.peak_inflight) == (27000, [7] + [8] * 7)


@pytest.mark.parametrize("name", ["V-Half", "V-Min"])
def test_valid_v_placement_and_size_check(name: str) -> None:
    s = build_schedule(name, 4, 8)
    assert s.stage_to_rank == (0, 1, 2, 3, 3, 2, 1, 0)
    build_plan(s)
    with pytest.raises(ConfigError, match="needs m >= p"):
        build_schedule(name, 4, 3)
