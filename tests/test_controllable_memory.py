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


# Digests of each rank's (type, micro-batch) order from the step-for-step transcription of the reference's slot
# walks (every slot scanned, every queue head compared), before those walks were kept as heaps: the orders must not move.
ORDER_DIGESTS = {
    ("V-Half", 5, 7): "6c46f5361d34f290", ("V-Min", 5, 7): "6d5848892732301c",
    ("V-Half", 6, 20): "1f62249fd9270cd9", ("V-Min", 6, 20): "511da191182a0932",
    ("V-Half", 9, 31): "1702321ce0870ad8", ("V-Min", 9, 31): "41091775a0110881",
    ("V-Half", 16, 128): "cde2e5f5007f2e6d", ("V-Min", 16, 128): "a09253ead1f775fc",
}


@pytest.mark.parametrize(("name", "p", "m"), list(ORDER_DIGESTS))
def test_orders_equal_the_slot_walk_transcription(name: str, p: int, m: int) -> None:
    import hashlib

    from harness.schedule import controllable_memory as cm

    pattern = cm._pattern_v_half(p) if name == "V-Half" else cm._pattern_v_min(p)
    assert hashlib.sha256(repr(cm._orders(pattern, m)).encode()).hexdigest()[:16] == ORDER_DIGESTS[(name, p, m)]


def _memory_slot_walk(schedule: list[list[int]]) -> int:
    """The reference's ``get_peak_memory`` walk as transcribed: every slot 0..bound, the earliest queue head taken
    when it sits at that slot (ties: lower kind); a free slot frees one pending backward's activations without W."""
    delta, has_w = [1, 1, 0, 0, -1], len(schedule) > 4
    bound = max(x[-1] for x in schedule)
    pending = cur = peak = 0
    pos = [0] * len(schedule)
    for i in range(bound + 1):
        at, kind = min((q[pos[t]] if pos[t] < len(q) else 1 << 60, t) for t, q in enumerate(schedule))
        if at == i:
            pos[kind] += 1
            cur += delta[kind]
            pending += 2 <= kind < 4
        elif not has_w and pending:
            cur -= 1
            pending -= 1
        peak = max(peak, cur)
    return peak


def test_memory_walk_equals_the_slot_by_slot_walk() -> None:
    # random queues, sorted or not, with two jobs in one slot (where the reference's walk stops advancing)
    import random

    from harness.schedule.controllable_memory import _memory

    rng = random.Random(7)
    for _ in range(3000):
        queues = [[rng.randrange(0, 30) for _ in range(rng.randrange(1, 6))] for _ in range(rng.choice([4, 5]))]
        if rng.random() < 0.5:
            queues = [sorted(q) for q in queues]
        assert _memory(queues) == _memory_slot_walk(queues), queues
