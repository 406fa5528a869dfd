"""Closed forms in harness.analysis.theory, checked against the simulated schedules."""

from __future__ import annotations

import pytest

from harness.analysis import theory
from harness.analysis.analytic import analyze
from harness.errors import ConfigError
from harness.schedule import build_schedule
from tests._sched_helpers import cost


@pytest.mark.parametrize(("p", "m"), [(1, 1), (2, 3), (4, 8), (8, 32)])
def test_1f1b_forms(p: int, m: int) -> None:
    # Narayanan et al., arXiv:2104.04473 §2.2.1.
    assert theory.bubble_fraction_1f1b(p, m) == pytest.approx((p - 1) / (m + p - 1))
    assert theory.bubble_over_ideal_1f1b(p, m) == pytest.approx((p - 1) / m)
    assert theory.makespan_fthenb(p, m, 1000, 2000) == (m + p - 1) * 3000
    for name in ("FThenB", "1F1B", "eager-1f1b"):
        assert theory.theoretical_bubble(name, p, m) == pytest.approx((p - 1) / (m + p - 1))


@pytest.mark.parametrize(("p", "m", "v"), [(2, 4, 2), (4, 8, 2), (4, 16, 3), (8, 16, 4)])
def test_interleaved_forms_match_simulation(p: int, m: int, v: int) -> None:
    # arXiv:2104.04473 §2.2.2: bubble over ideal (p-1)/(v m).
    a = analyze(build_schedule("interleaved", p, m, v), cost(1000, 2000))
    assert theory.bubble_over_ideal_interleaved(p, m, v) == pytest.approx(a.bubble_over_ideal)
    assert theory.bubble_fraction_interleaved(p, m, v) == pytest.approx(a.bubble_ratio)
    assert theory.theoretical_bubble("VPP", p, m, v) == pytest.approx(a.bubble_ratio)
    assert theory.makespan_interleaved(p, m, v, 1000, 2000) == a.makespan_ns


def test_interleaved_without_p_dividing_m_has_no_closed_form() -> None:
    assert theory.theoretical_bubble("Interleaved1F1B", 4, 6, 2) is None


@pytest.mark.parametrize(("f", "b", "w"), [(1, 1, 1), (2, 2, 1), (3, 2, 2)])
def test_zb_forms(f: int, b: int, w: int) -> None:
    # Qi et al., arXiv:2401.10241 Table 2.
    p, m = 4, 16
    c = cost(1000 * f, 1000 * b, 1000 * w)
    h1 = analyze(build_schedule("ZB-H1", p, m), c)
    assert theory.zb_h1_bubble_time(p, 1000 * f, 1000 * b, 1000 * w) == h1.max_span_bubble_ns
    assert theory.makespan_zb_h1(p, m, 1000 * f, 1000 * b, 1000 * w) == h1.makespan_ns
    assert theory.theoretical_bubble("zb-h1", p, m, 1, 1000 * f, 1000 * b, 1000 * w) == pytest.approx(h1.bubble_ratio)
    h2 = analyze(build_schedule("ZB-H2", p, m), c)
    assert theory.zb_h2_bubble_time(p, 1000 * f, 1000 * b, 1000 * w) == h2.max_span_bubble_ns


def test_zb_h1_needs_times_and_w_not_above_b() -> None:
    assert theory.theoretical_bubble("ZB-H1", 4, 8) is None
    assert theory.theoretical_bubble("ZB-H1", 4, 8, 1, 1.0, 1.0, 2.0) is None


@pytest.mark.parametrize(
    ("name", "v", "expected"),
    [
        ("FThenB", 1, [8, 8, 8, 8]),
        ("1F1B", 1, [4, 3, 2, 1]),
        ("Eager-1F1B", 1, [7, 5, 3, 1]),
        ("ZB-H1", 1, [4, 4, 4, 4]),
        ("ZB-H2", 1, [7, 7, 7, 7]),
        ("ZB-V", 1, [8, 8, 8, 8]),
        ("Interleaved1F1B", 2, [11, 9, 7, 5]),
    ],
)
def test_peak_inflight_forms_match_simulation(name: str, v: int, expected: list[int]) -> None:
    p, m = 4, 8
    got = [theory.peak_inflight(name, p, m, r, v) for r in range(p)]
    assert got == expected
    assert analyze(build_schedule(name, p, m, v), cost(1000, 1000, 1000)).peak_inflight == expected


def test_unknown_or_open_forms_are_none() -> None:
    assert theory.theoretical_bubble("LoopedBFS", 4, 8, 2) is None
    assert theory.theoretical_bubble("no-such", 4, 8) is None
    assert theory.peak_inflight("LoopedBFS", 4, 8, 0) is None
    assert theory.peak_inflight("DualPipeV", 4, 7, 0) is None  # m < 2p: not the README's setting
    assert theory.peak_inflight("Interleaved1F1B", 4, 8, 0) is None  # v not given


def test_bad_sizes() -> None:
    with pytest.raises(ConfigError):
        theory.bubble_fraction_fthenb(0, 4)


def test_zb_h1_figure_needs_a_full_steady_phase():
    # arXiv:2401.10241 Table 2 assumes m >= p; with m < p the drain dominates and no closed form is shown.
    from harness.analysis import theory as th

    assert th.theoretical_bubble("ZB-H1", 4, 4, 1, t_f=1, t_b=1, t_w=1) == pytest.approx(3 / 15)
    assert th.theoretical_bubble("ZB-H1", 4, 3, 1, t_f=1, t_b=1, t_w=1) is None


def test_zb_closed_forms_hold_wherever_the_harness_shows_them() -> None:
    # arXiv:2401.10241 Table 2 takes T_F ~ T_B ~ T_W. Over every F, I, W in 1..4 and p = 2..4, m = p..3p:
    # with W <= min(F, I) (ZB-H1) or W <= F (ZB-H2, m >= 2p-1) the worst rank's span bubble is exactly the
    # closed form; outside, the builders' cool-down is longer and the harness shows no theory.
    from harness.cli.show import _span_theory
    from harness.model.cost import FixedCost

    shown = wrong = 0
    for p in (2, 3, 4):
        for m in range(p, 3 * p + 1):
            for f in range(1, 5):
                for i in range(1, 5):
                    for w in range(1, 5):
                        c = FixedCost(forward_ns=f, backward_ns=i + w, backward_input_ns=i, backward_weight_ns=w)
                        for name in ("ZB-H1", "ZB-H2"):
                            th = _span_theory(name, p, m, c, p)
                            if th is None:
                                continue
                            shown += 1
                            wrong += max(analyze(build_schedule(name, p, m), c).span_bubble_ns) != th
    assert shown > 700 and wrong == 0
    over = FixedCost(forward_ns=1, backward_ns=6, backward_input_ns=4, backward_weight_ns=2)  # W > F
    assert _span_theory("ZB-H1", 4, 8, over, 4) is None and _span_theory("ZB-H2", 4, 8, over, 4) is None
    assert theory.theoretical_bubble("ZB-H1", 4, 8, 1, t_f=1, t_b=4, t_w=2) is None


def test_closed_forms_only_for_the_built_in_job_order() -> None:
    # A pass keeps the schedule's name (split_backward), and a user's schedule may borrow one: the closed forms of
    # the named built-in do not describe them.
    from harness.analysis.theory import is_builtin_order
    from harness.case import PipelineCase
    from harness.model.cost import FixedCost
    from harness.runner import run_case
    from harness.schedule.model import Schedule
    from harness.schedule.passes import add_communication, split_backward

    one = build_schedule("1F1B", 4, 8)
    assert is_builtin_order(one) and is_builtin_order(add_communication(one))
    assert is_builtin_order(build_schedule("Interleaved1F1B", 4, 8, 2, optimizer=True))
    assert not is_builtin_order(split_backward(one))
    gpipe = build_schedule("FThenB", 4, 8)
    borrowed = Schedule("1F1B", 8, gpipe.stage_to_rank, gpipe.ranks, {})
    assert not is_builtin_order(borrowed)
    c = FixedCost.ms(F=1, B=3, W=1)
    assert run_case(PipelineCase(schedule=borrowed, cost=c), "sim", range(0, 1)).theory == {}
    assert run_case(PipelineCase(schedule=split_backward(one), cost=c), "sim", range(0, 1)).theory == {}
    assert run_case(PipelineCase("1F1B", stages=4, microbatches=8, cost=c), "sim", range(0, 1)).theory == {
        "bubble_ratio": pytest.approx(3 / 11), "peak_inflight": [4, 3, 2, 1]}
