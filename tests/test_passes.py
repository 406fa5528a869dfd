"""Passes: communication lowering (PyTorch ``_add_send_recv``) and backward split/merge (``_merge_bw``)."""

from __future__ import annotations

import pytest
from _sched_helpers import build_any

from harness.analysis.analytic import analyze
from harness.errors import ScheduleError
from harness.plan.build import build_plan
from harness.schedule import build_schedule, schedule_names
from harness.schedule.model import JobKind
from harness.schedule.passes import add_communication, merge_backward, split_backward, strip_communication
from tests._sched_helpers import chunks_for, cost


def _count(s, kind: JobKind) -> int:  # type: ignore[no-untyped-def]
    return sum(1 for _, _, j in s.jobs() if j.kind is kind)


@pytest.mark.parametrize(("p", "m", "v"), [(2, 3, 2), (4, 8, 2), (3, 6, 3)])
def test_comm_jobs_per_cross_rank_edge_loop(p: int, m: int, v: int) -> None:
    s = add_communication(build_schedule("interleaved", p, m, v))
    edges = (p * v - 1) * m  # every stage boundary crosses ranks in the loop placement
    for kind in (JobKind.SEND_F, JobKind.RECV_F, JobKind.SEND_B, JobKind.RECV_B):
        assert _count(s, kind) == edges
    assert s.params["comm"] is True


def test_v_turn_needs_no_comm() -> None:
    # ZB-V: stages p-1 and p share the last rank, so that edge stays local.
    p, m = 4, 8
    s = add_communication(build_schedule("ZB-V", p, m))
    assert _count(s, JobKind.SEND_F) == (2 * p - 2) * m
    assert not any(j.stage == p - 1 and j.kind is JobKind.SEND_F for _, _, j in s.jobs())


def test_send_after_producer_recv_before_consumer() -> None:
    s = add_communication(build_schedule("1F1B", 2, 1))
    assert [str(j) for j in s.ranks[0]] == ["0F0", "0SEND_F0", "0RECV_B0", "0B0"]
    assert [str(j) for j in s.ranks[1]] == ["1RECV_F0", "1F0", "1B0", "1SEND_B0"]


def test_comm_cost_on_critical_path() -> None:
    # p=2, m=1: F, transfer L, F, B, transfer L, B  (transfer = latency + bytes / bandwidth).
    c = cost(1000, 2000, p2p_latency_ns=300, activation_bytes=4000, p2p_gbytes_per_s=20)
    transfer = 300 + 4000 // 20
    a = analyze(add_communication(build_schedule("1F1B", 2, 1)), c)
    assert a.makespan_ns == 2 * 1000 + 2 * 2000 + 2 * transfer
    assert (a.p2p_messages, a.p2p_bytes) == (2, 8000)


@pytest.mark.parametrize("name", sorted(schedule_names()))
def test_comm_lowering_keeps_plans_valid(name: str) -> None:
    v = chunks_for(name, 2)
    s = build_any(name, 4, 8, v, optimizer=True)
    lowered = add_communication(s)
    plan = build_plan(lowered)
    assert len(plan.order) == plan.num_jobs
    assert strip_communication(lowered).ranks == s.ranks
    # With free transfers the comm jobs cost nothing: same makespan as compute-only.
    assert analyze(lowered, cost(1000, 2000)).makespan_ns == analyze(s, cost(1000, 2000)).makespan_ns


def test_comm_twice_is_an_error() -> None:
    s = add_communication(build_schedule("1F1B", 2, 2))
    with pytest.raises(ScheduleError, match="already has communication jobs"):
        add_communication(s)


@pytest.mark.parametrize("name", ["FThenB", "1F1B", "Eager-1F1B", "Interleaved1F1B", "LoopedBFS"])
def test_split_then_merge_is_identity(name: str) -> None:
    s = build_any(name, 3, 6, chunks_for(name, 2))
    split = split_backward(s)
    assert _count(split, JobKind.B) == 0
    assert _count(split, JobKind.I) == _count(split, JobKind.W) == s.num_stages * 6
    assert merge_backward(split).ranks == s.ranks


def test_split_1f1b_takes_w_off_the_critical_path() -> None:
    # arXiv:2401.10241 §2: after the split, I of stage k waits only for I of stage k+1, not for W,
    # so 1F1B with adjacent I+W takes m(F+I+W) + (p-1)(F+I) instead of (m+p-1)(F+I+W).
    p, m = 4, 8
    a = analyze(split_backward(build_schedule("1F1B", p, m)), cost(1000, 1000, 1000))
    assert a.makespan_ns == m * 3000 + (p - 1) * 2000


def test_merge_keeps_non_adjacent_pairs_split() -> None:
    s = build_schedule("ZB-H1", 2, 2)
    assert [str(j) for j in s.ranks[0]] == ["0F0", "0F1", "0I0", "0W0", "0I1", "0W1"]
    assert [str(j) for j in s.ranks[1]] == ["1F0", "1I0", "1F1", "1I1", "1W0", "1W1"]
    merged = merge_backward(s)
    assert [str(j) for j in merged.ranks[0]] == ["0F0", "0F1", "0B0", "0B1"]
    assert merged.ranks[1] == s.ranks[1]  # no W right after its own I
    build_plan(merged)


def test_each_pair_of_ranks_has_its_own_comm_streams():
    # Transfers with one neighbour must not queue behind transfers with the other (per-pair NCCL streams).
    from harness.plan.build import build_plan
    from harness.schedule import build_schedule
    from harness.schedule.passes import add_communication

    plan = build_plan(add_communication(build_schedule("1F1B", 3, 2)))
    assert plan.stream_names == (
        "rank0/compute", "rank0/comm↔1",
        "rank1/compute", "rank1/comm↔0", "rank1/comm↔2",
        "rank2/compute", "rank2/comm↔1",
    )
    on = {str(job): plan.stream_names[plan.stream[j]] for j, job in enumerate(plan.jobs)}
    assert on["1RECV_F0"] == on["1SEND_B0"] == "rank1/comm↔0"
    assert on["1SEND_F0"] == on["1RECV_B0"] == "rank1/comm↔2"
    assert plan.stream_rank == (0, 0, 1, 1, 1, 2, 2)
