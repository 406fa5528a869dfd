"""Builders against the published closed forms (each test cites its source)."""

from __future__ import annotations

import pytest
from _sched_helpers import build_any
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from harness.analysis.analytic import analyze
from harness.errors import ConfigError
from harness.plan.build import build_plan
from harness.schedule import build_schedule, schedule_names
from harness.schedule.model import Job, JobKind, loop_placement, v_placement
from harness.schedule.passes import add_communication
from tests._sched_helpers import cost

GRID_PM = [(1, 1), (2, 1), (2, 4), (3, 5), (4, 4), (4, 8), (8, 8), (8, 24)]
RATIOS_FB = [(1, 2), (1, 1), (3, 4), (2, 5)]


def test_names_case_insensitive_and_aliases() -> None:
    assert build_schedule("zb-h1", 2, 2).name == "ZB-H1"
    assert build_schedule("ZB1P", 2, 2).name == "ZB-H1"
    assert build_schedule("interleaved_1f1b", 2, 2, 2).name == "Interleaved1F1B"
    assert build_schedule("gpipe", 2, 2).name == "FThenB"
    assert set(schedule_names()) >= {"Eager-1F1B", "Interleaved1F1B", "LoopedBFS", "ZB-H1", "ZB-H2", "ZB-V", "DualPipeV"}


def test_unknown_name_lists_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown schedule 'zb-h9'.*ZB-H1"):
        build_schedule("zb-h9", 2, 2)


# Narayanan et al., SC'21, arXiv:2104.04473 §2.2.1: FThenB/1F1B makespan (m+p-1)(F+B),
# idle share of total (p-1)/(m+p-1). Eager-1F1B (PaddlePaddle) only moves forwards earlier.
@pytest.mark.parametrize("name", ["FThenB", "1F1B", "Eager-1F1B"])
@pytest.mark.parametrize(("p", "m"), GRID_PM)
@pytest.mark.parametrize(("f", "b"), RATIOS_FB)
def test_fthenb_1f1b_makespan_and_bubble(name: str, p: int, m: int, f: int, b: int) -> None:
    a = analyze(build_schedule(name, p, m), cost(1000 * f, 1000 * b))
    assert a.makespan_ns == (m + p - 1) * 1000 * (f + b)
    assert a.bubble_ratio == pytest.approx((p - 1) / (m + p - 1))
    assert a.bubble_over_ideal == pytest.approx((p - 1) / m)


# Narayanan et al., SC'21, arXiv:2104.04473 §2.2.2: interleaved bubble over ideal (p-1)/(v m),
# with per-chunk times makespan (v m + p - 1)(F + B). Megatron/PyTorch need p | m for this.
@pytest.mark.parametrize("v", [2, 3, 4])
@pytest.mark.parametrize(("p", "m"), [(2, 2), (2, 6), (4, 4), (4, 8), (4, 16), (8, 16)])
@pytest.mark.parametrize(("f", "b"), RATIOS_FB)
def test_interleaved_bubble_over_ideal(v: int, p: int, m: int, f: int, b: int) -> None:
    a = analyze(build_schedule("interleaved", p, m, v), cost(1000 * f, 1000 * b))
    assert a.bubble_over_ideal == pytest.approx((p - 1) / (v * m))
    assert a.makespan_ns == (v * m + p - 1) * 1000 * (f + b)


def test_interleaved_constraint_on_m() -> None:
    # PyTorch ScheduleInterleaved1F1B: m % max(1, m // p) == 0.
    build_schedule("interleaved", 4, 10, 2)  # 2 rounds of 5
    build_schedule("interleaved", 4, 3, 2)  # 1 round of 3
    with pytest.raises(ConfigError, match=r"multiple of its number of rounds.*p=4, m=9"):
        build_schedule("interleaved", 4, 9, 2)


# Qi et al., arXiv:2401.10241 Table 2: ZB-H1 bubble (p-1)(T_F+T_B-T_W) per rank; the paper
# assumes T_W <= T_B (T_B ~= T_W), so the ratios keep W <= I.
@pytest.mark.parametrize(("p", "m"), [(2, 2), (2, 8), (3, 7), (4, 8), (4, 16), (8, 16), (8, 32)])
@pytest.mark.parametrize(("f", "b", "w"), [(1, 1, 1), (2, 2, 1), (1, 2, 1), (3, 2, 2), (2, 3, 1)])
def test_zb_h1_bubble(p: int, m: int, f: int, b: int, w: int) -> None:
    a = analyze(build_schedule("ZB-H1", p, m), cost(1000 * f, 1000 * b, 1000 * w))
    bubble = (p - 1) * 1000 * (f + b - w)
    assert a.idle_ns == [bubble] * p
    assert a.max_span_bubble_ns == bubble
    assert a.makespan_ns == m * 1000 * (f + b + w) + bubble


# arXiv:2401.10241 Table 2: ZB-H2 bubble (p-1)(T_F+T_B-2T_W) when >= 0 (else 0), measured
# inside each rank's span (the paper drops the optimizer sync, §4); needs m >= 2p-1.
@pytest.mark.parametrize(("p", "m"), [(2, 3), (2, 8), (3, 5), (4, 8), (4, 16), (8, 15), (8, 32)])
@pytest.mark.parametrize(("f", "b", "w"), [(1, 1, 1), (2, 2, 1), (1, 2, 1), (3, 2, 2), (1, 1, 2), (3, 1, 1)])
def test_zb_h2_bubble(p: int, m: int, f: int, b: int, w: int) -> None:
    a = analyze(build_schedule("ZB-H2", p, m), cost(1000 * f, 1000 * b, 1000 * w))
    assert a.max_span_bubble_ns == max(0, (p - 1) * 1000 * (f + b - 2 * w))


# arXiv:2401.10241 §6 and sail-sg/zero-bubble-pipeline-parallelism README: ZB-V has zero bubble
# for T_F = T_B = T_W given enough micro-batches (here m >= 2p - 1, PyTorch ScheduleZBVZeroBubble).
@pytest.mark.parametrize(("p", "m"), [(1, 1), (2, 3), (2, 8), (3, 5), (4, 7), (4, 16), (8, 15), (8, 32)])
def test_zb_v_zero_bubble(p: int, m: int) -> None:
    s = build_schedule("ZB-V", p, m)
    assert s.stage_to_rank == v_placement(p)
    a = analyze(s, cost(1000, 1000, 1000))
    assert a.span_bubble_ns == [0] * p
    assert a.busy_ns == [2 * m * 3000] * p


def test_zb_v_has_bubble_when_times_differ() -> None:
    # The zero-bubble claim needs T_F = T_B = T_W (arXiv:2401.10241 §6); F:B:W = 2:2:1 leaves idle time.
    a = analyze(build_schedule("ZB-V", 4, 16), cost(2000, 2000, 1000))
    assert a.max_span_bubble_ns > 0


def test_dualpipev_needs_m_at_least_2p() -> None:
    # PyTorch ScheduleDualPipeV: "requires at least as many microbatches as stages" (2p stages).
    with pytest.raises(ConfigError, match="m >= 2p"):
        build_schedule("DualPipeV", 4, 7)
    s = build_schedule("DualPipeV", 4, 8)
    assert s.stage_to_rank == v_placement(4)
    assert build_plan(s).num_jobs > 0


def test_chunk_placement_loop() -> None:
    s = build_schedule("interleaved", 4, 8, 2)
    assert s.stage_to_rank == loop_placement(4, 2)
    assert s.ranks[0][0] is not None and s.rank_of(s.ranks[0][0].stage) == 0


# Peak in-flight micro-batches (activations held), per rank s.
@pytest.mark.parametrize(("p", "m"), [(1, 3), (2, 1), (4, 2), (4, 8), (8, 5), (8, 16)])
def test_peak_inflight(p: int, m: int) -> None:
    c = cost(1000, 2000)
    # GPipe, Huang et al. arXiv:1811.06965: all m micro-batches on every stage.
    assert analyze(build_schedule("FThenB", p, m), c).peak_inflight == [m] * p
    # 1F1B, arXiv:2104.04473 §2.2.1 / PyTorch Schedule1F1B warm-up: min(m, p-s).
    assert analyze(build_schedule("1F1B", p, m), c).peak_inflight == [min(m, p - s) for s in range(p)]
    # Eager-1F1B, PaddlePaddle pipeline_eager_1f1b.py warm-up: 2(p-s)-1, capped at m.
    assert analyze(build_schedule("Eager-1F1B", p, m), c).peak_inflight == [min(m, 2 * (p - s) - 1) for s in range(p)]
    # ZB-H1, arXiv:2401.10241 Table 2 / §2.1: peak p M_B, 1F1B's rank-0 peak; the deferred W keep
    # later ranks at that level too (min(m, p) on every rank).
    assert analyze(build_schedule("ZB-H1", p, m), c).peak_inflight == [min(m, p)] * p
    # ZB-H2, arXiv:2401.10241 Table 2: (2p-1) M_B.
    assert max(analyze(build_schedule("ZB-H2", p, m), c).peak_inflight) == min(m, 2 * p - 1)


# Interleaved, arXiv:2104.04473 §2.2.2 / Korthikanti et al. arXiv:2205.05198: rank 0 holds
# p(1 + (p-1)/(p v)) whole-stage micro-batch equivalents = (v-1)p + 2p - 1 chunk activations.
@pytest.mark.parametrize(("p", "m", "v"), [(2, 4, 2), (4, 8, 2), (4, 8, 4), (8, 16, 2)])
def test_peak_inflight_interleaved(p: int, m: int, v: int) -> None:
    a = analyze(build_schedule("interleaved", p, m, v), cost(1000, 2000))
    assert a.peak_inflight[0] == (v - 1) * p + 2 * p - 1
    assert a.peak_inflight[0] / v == pytest.approx(p * (1 + (p - 1) / (p * v)))


def _valid_args(name: str, p: int, m: int, v: int) -> tuple[int, int, int]:
    if name == "DualPipeV":
        m = max(m, 2 * p)
    if name == "DualPipe":  # DeepSeek's asserts: p even, m even, m >= 2p
        p += p % 2
        m = max(m + m % 2, 2 * p)
    if name in ("V-Half", "V-Min"):
        m = max(m, p)
    if name not in ("Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble"):
        v = 1
    if name in ("Interleaved1F1B", "InterleavedZeroBubble"):
        assume(m % max(1, m // p) == 0)
    if name == "Interleaved1F1B":
        v = max(v, 2)  # v=1 is refused (use 1F1B)
    return p, m, v


# Every builder gives a valid, deadlock-free schedule for every valid (p, m, v), with and
# without communication jobs (issue 3, "What must hold").
@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(sorted(schedule_names())),
    p=st.integers(1, 9),
    m=st.integers(1, 20),
    v=st.integers(1, 4),
    comm=st.booleans(),
)
def test_every_builder_valid_and_deadlock_free(name: str, p: int, m: int, v: int, comm: bool) -> None:
    p, m, v = _valid_args(name, p, m, v)
    s = build_any(name, p, m, v, optimizer=True)
    if comm:
        s = add_communication(s)
    plan = build_plan(s)
    assert len(plan.order) == plan.num_jobs
    forwards = sum(1 for j in plan.jobs if j.kind is JobKind.F)
    assert forwards == s.num_stages * m // (2 if name == "DualPipe" else 1)  # DualPipe: each stage runs one direction's m/2
    assert s.num_stages == p * (2 if name in ("ZB-V", "DualPipeV", "DualPipe", "V-Half", "V-Min") else v)


@pytest.mark.parametrize("name", ["ZB-V", "DualPipeV", "DualPipe"])
def test_v_placement_schedules_accept_their_own_chunk_count(name):
    # The V placement fixes two chunks per rank; v=1 (the default) and v=2 both mean that.
    assert build_schedule(name, 4, 8, 2) == build_schedule(name, 4, 8)
    assert build_schedule(name, 4, 8).chunks_per_rank == 2
    with pytest.raises(ConfigError, match=rf"schedule '{name}' has 2 chunks \(its placement fixes them\) per rank; got v=3"):
        build_schedule(name, 4, 8, 3)


def test_unknown_builder_option_is_a_config_error_listing_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"schedule '1F1B' has no option 'frobnicate'; its options are optimizer$"):
        build_schedule("1F1B", 4, 8, frobnicate=1)
    expected = r"schedule 'Interleaved1F1B' has no option 'a', 'b'; its options are optimizer, microbatch_group_size_per_vp_stage$"
    with pytest.raises(ConfigError, match=expected):
        build_schedule("Interleaved1F1B", 4, 8, 2, b=1, a=2)
    assert build_schedule("1F1B", 2, 2, optimizer=True).ranks[1][-1] == Job(1, JobKind.OPT, None)


def test_interleaved_m_hint_lists_the_nearest_valid_values() -> None:
    # p=4, m=9: rounds = 2 does not divide 9; the valid m closest to 9 are 8 and 10.
    with pytest.raises(ConfigError, match=r"Nearby valid m: 3, 4, 5, 6, 7, 8, 10, 12$"):
        build_schedule("Interleaved1F1B", 4, 9, 2)


def test_interleaved_with_one_chunk_is_refused_with_a_pointer_to_1f1b() -> None:
    # PyTorch's warm-up formula with v=1 gives 2(p-1-s) forwards (rank 0 of p=4: 6), 1F1B gives p-s (4).
    expected = r"Interleaved1F1B needs v >= 2 .*rank 0 of p=4: 6\), a deeper schedule than 1F1B's p-s \(4\): use schedule '1F1B'"
    with pytest.raises(ConfigError, match=expected):
        build_schedule("Interleaved1F1B", 4, 8, 1)


def test_megatron_microbatch_group_size_per_vp_stage() -> None:
    # p=2, m=5, v=2, g=3, by hand from Megatron-LM's get_schedule_table (chunks 0 0 0 1 1 1 0 0 1 1: a last
    # group of m % g = 2): rank 0 warm-up (v-1) g + 2(p-1-s) = 5 forwards, then F of table entry k with the
    # backward of entry k - warm-up on chunk v-1-chunk, micro-batches per chunk in order.
    s = build_schedule("Interleaved1F1B", 2, 5, 2, microbatch_group_size_per_vp_stage=3)
    assert [str(j) for j in s.ranks[0]] == [
        "0F0", "0F1", "0F2", "2F0", "2F1", "2F2", "2B0", "0F3", "2B1", "0F4", "2B2", "2F3", "0B0", "2F4", "0B1",
        "0B2", "2B3", "2B4", "0B3", "0B4"]
    assert [str(j) for j in s.ranks[1]][:5] == ["1F0", "1F1", "1F2", "3F0", "3B0"]  # warm-up 3
    # Megatron's default g = p is PyTorch's round size when p | m
    assert build_schedule("Interleaved1F1B", 4, 8, 2, microbatch_group_size_per_vp_stage=4).ranks == build_schedule("Interleaved1F1B", 4, 8, 2).ranks


@pytest.mark.parametrize("m", [4, 8, 16])
def test_every_group_size_builds_a_runnable_schedule_or_is_refused_by_name(m: int) -> None:
    # issue 26: g=2 at p=4, v=2, m=8 was accepted and then deadlocked (97 of 128 jobs never ran). Megatron-LM's rule:
    # p <= g <= m and m % g in {0} or >= p; every value it allows builds a valid plan, every other is refused.
    from harness.schedule.interleaved import valid_group_sizes

    valid = valid_group_sizes(4, m)
    assert valid == {4: [4], 8: [4, 8], 16: [4, 6, 8, 9, 10, 11, 12, 16]}[m]
    for g in range(1, m + 1):
        if g in valid:
            s = build_schedule("Interleaved1F1B", 4, m, 2, microbatch_group_size_per_vp_stage=g)
            plan = build_plan(s)  # validates: counts, order, no deadlock
            assert plan.num_jobs == 2 * 4 * 2 * m
            from harness.case import PipelineCase
            from harness.runner import run_case

            r = run_case(PipelineCase("Interleaved1F1B", stages=4, microbatches=m, chunks=2,
                                      options={"microbatch_group_size_per_vp_stage": g}), "sim", range(0, 1))
            assert r.records.num_jobs == plan.num_jobs
            assert r.metrics.step_time_median_ns >= 2 * m * 3_000_000  # every job ran: at least v m (F + B) per rank
        else:
            with pytest.raises(ConfigError, match=rf"microbatch_group_size_per_vp_stage={g} breaks Megatron-LM's rule "
                                                  rf"for p=4, m={m}: p <= g <= m.*valid values: {', '.join(map(str, valid))}$"):
                build_schedule("Interleaved1F1B", 4, m, 2, microbatch_group_size_per_vp_stage=g)


def test_a_group_below_p_would_deadlock() -> None:
    # Why g < p is refused: the order Megatron's formulas give for g=2 (p=4, v=2, m=8) cannot run.
    from harness.errors import ScheduleError
    from harness.schedule.builders import _from_parts
    from harness.schedule.interleaved import _rank_ops_1f1b, megatron_chunk_table

    table = megatron_chunk_table(8, 2, 2)
    parts = [_rank_ops_1f1b(s, 4, 2, 8, 2, 2 + 2 * (3 - s), zero_bubble=False, chunk_table=table) for s in range(4)]
    with pytest.raises(ScheduleError, match="deadlock"):
        build_plan(_from_parts("Interleaved1F1B", 8, loop_placement(4, 2), parts, False, {"v": 2}))
    with pytest.raises(ConfigError, match=r"valid values: none: m=3 is below p=4"):
        build_schedule("Interleaved1F1B", 4, 3, 2, microbatch_group_size_per_vp_stage=3)


