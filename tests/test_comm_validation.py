"""Communication jobs that cannot happen are refused by build_plan, by the fast
path (which falls back) and the reference path alike, with messages that name
the jobs: a send/receive whose peer stage does not exist or shares its rank, a
send without its receive, and a job listed before a job it needs on its own
rank (PyTorch issues each rank's jobs in list order, whatever their stream)."""

from __future__ import annotations

import pytest
from _sched_helpers import build_any

import harness.plan.fast as plan_module  # the fast path, which falls back on the reference path
from harness.errors import ConfigError, ScheduleError
from harness.plan import groups as overlap
from harness.plan.build import build_plan
from harness.plan.reference import _build_plan_checked
from harness.schedule import build_schedule, schedule_names
from harness.schedule.model import JobKind
from harness.schedule.notation import loads_csv
from harness.schedule.passes import add_communication
from harness.schedule.registry import builder_info

ORDER_WHY = (
    "(each rank issues its jobs in list order, whatever their stream, so a job comes after the jobs it needs on its rank: "
    "a receive before the job that uses it, a send after the job whose output it sends)"
)


def _errors(text: str, name: str = "x.csv") -> ScheduleError:
    """The error both paths raise for ``text``; they must agree word for word."""
    s = loads_csv(text, name=name)
    with pytest.raises(ScheduleError) as fast:
        build_plan(s)
    with pytest.raises(ScheduleError) as ref:
        _build_plan_checked(s)
    assert str(fast.value) == str(ref.value)
    assert fast.value.jobs == ref.value.jobs
    return fast.value


def _lines(err: ScheduleError) -> list[str]:
    return str(err).splitlines()


# --- 1. a peer stage outside the pipeline ------------------------------------------


def test_send_b_from_the_first_stage_and_send_f_from_the_last_are_refused() -> None:
    err = _errors("0F0,0SEND_F0,0SEND_B0,0RECV_B0,0B0\n,1RECV_F0,1F0,1SEND_F0,1B0,1SEND_B0\n")
    assert _lines(err) == [
        "schedule 'x.csv' is invalid: 2 send/receive job(s) with no peer stage on another rank: "
        "0SEND_B0 sends to stage -1, but the pipeline's first stage is 0",
        "step  rank 0      rank 1",
        "0     0F0         .",
        "1     0SEND_F0    1RECV_F0",
        "2     >>0SEND_B0  1F0",
        "3     0RECV_B0    >>1SEND_F0",
        "4     0B0         1B0",
        "5     .           1SEND_B0",
        ">> rank 0, step 2: 0SEND_B0 sends to stage -1, but the pipeline's first stage is 0",
        ">> rank 1, step 3: 1SEND_F0 sends to stage 2, but the pipeline's last stage is 1",
    ]
    assert err.jobs == ("0SEND_B0", "1SEND_F0")


def test_receives_from_outside_the_pipeline_are_refused() -> None:
    err = _errors("0RECV_F0,0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1RECV_B0,1B0,1SEND_B0\n")
    assert _lines(err)[0] == (
        "schedule 'x.csv' is invalid: 2 send/receive job(s) with no peer stage on another rank: "
        "0RECV_F0 receives from stage -1, but the pipeline's first stage is 0"
    )
    assert ">> rank 1, step 2: 1RECV_B0 receives from stage 2, but the pipeline's last stage is 1" in _lines(err)
    assert err.jobs == ("0RECV_F0", "1RECV_B0")


def test_comm_jobs_on_a_single_rank_are_refused() -> None:
    err = _errors("0F0,0SEND_F0,0B0\n")
    assert _lines(err)[0] == (
        "schedule 'x.csv' is invalid: 1 send/receive job(s) with no peer stage on another rank: "
        "0SEND_F0 sends to stage 1, but the pipeline's last stage is 0"
    )


# --- 3. a peer stage on the job's own rank ---------------------------------------

# Stages 0 and 1 on rank 0, 2 and 3 on rank 1: 0 -> 1 and 2 -> 3 exchange nothing.
SAME_RANK_OK = "0F0,1F0,1SEND_F0,1RECV_B0,1B0,0B0\n2RECV_F0,2F0,3F0,3B0,2B0,2SEND_B0\n"
SAME_RANK_BAD = (
    "0F0,0SEND_F0,1RECV_F0,1F0,1SEND_F0,1RECV_B0,1B0,1SEND_B0,0RECV_B0,0B0\n"
    "2RECV_F0,2F0,3F0,3B0,2B0,2SEND_B0\n"
)


def test_add_communication_inserts_nothing_between_stages_on_one_rank() -> None:
    compute = loads_csv("0F0,1F0,1B0,0B0\n2F0,3F0,3B0,2B0\n", name="v.csv")
    assert compute.stage_to_rank == (0, 0, 1, 1)
    rows = [[str(j) for j in row] for row in add_communication(compute).ranks]
    assert rows == [r.split(",") for r in SAME_RANK_OK.splitlines()]
    build_plan(loads_csv(SAME_RANK_OK, name="v.csv"))


def test_send_and_receive_between_stages_on_one_rank_are_refused() -> None:
    err = _errors(SAME_RANK_BAD, name="v.csv")
    why = "but stages 0 and 1 share rank 0; send/receive jobs connect stages on different ranks"
    lines = _lines(err)
    assert lines[0] == f"schedule 'v.csv' is invalid: 4 send/receive job(s) with no peer stage on another rank: 0SEND_F0 sends to stage 1, {why}"
    assert lines[-4:] == [
        f">> rank 0, step 1: 0SEND_F0 sends to stage 1, {why}",
        f">> rank 0, step 2: 1RECV_F0 receives from stage 0, {why}",
        f">> rank 0, step 7: 1SEND_B0 sends to stage 0, {why}",
        f">> rank 0, step 8: 0RECV_B0 receives from stage 1, {why}",
    ]
    assert err.jobs == ("0SEND_F0", "1RECV_F0", "1SEND_B0", "0RECV_B0")


def test_the_v_placement_turn_exchanges_nothing() -> None:
    s = add_communication(build_schedule("ZB-V", 2, 4))
    turn = [(j.stage, j.kind) for _, _, j in s.jobs() if j.kind in (JobKind.SEND_F, JobKind.RECV_B) and j.stage == 1]
    assert turn == []  # stages 1 and 2 share rank 1
    build_plan(s)


# --- every send has its receive, every receive its send ----------------------------

GOOD = "0F0,0SEND_F0,0RECV_B0,0B0\n,1RECV_F0,1F0,1B0,1SEND_B0\n"


def test_a_correct_file_with_comm_jobs_passes() -> None:
    s = loads_csv(GOOD, name="x.csv")
    plan = build_plan(s)
    assert [str(plan.jobs[j]) for j in plan.order] == [
        "0F0", "0SEND_F0", "1RECV_F0", "1F0", "1B0", "1SEND_B0", "0RECV_B0", "0B0",
    ]
    ref = _build_plan_checked(s)
    assert (plan.jobs, plan.deps, plan.start_deps, plan.stream) == (ref.jobs, ref.deps, ref.start_deps, ref.stream)
    assert plan.stream_names == ("rank0/compute", "rank0/comm↔1", "rank1/compute", "rank1/comm↔0")


def test_a_send_without_its_receive_is_refused() -> None:
    # The consumer 1F0 is scheduled (counts) and, on another rank, needs the receive.
    err = _errors("0F0,0SEND_F0,0RECV_B0,0B0\n,1F0,1B0,1SEND_B0\n")
    assert _lines(err)[0] == "schedule 'x.csv': 1 job(s) depend on jobs that are not scheduled"
    assert ">> rank 1, step 1: 1F0 needs 1RECV_F0, which is not in the schedule" in _lines(err)
    err = _errors("0F0,0SEND_F0,0B0\n,1RECV_F0,1F0,1B0,1SEND_B0\n")
    assert ">> rank 0, step 2: 0B0 needs 0RECV_B0, which is not in the schedule" in _lines(err)


def test_a_receive_without_its_send_is_refused() -> None:
    err = _errors("0F0,0RECV_B0,0B0\n,1RECV_F0,1F0,1B0,1SEND_B0\n")
    assert _lines(err)[0] == "schedule 'x.csv': 1 job(s) depend on jobs that are not scheduled"
    assert ">> rank 1, step 1: 1RECV_F0 needs 0SEND_F0, which is not in the schedule" in _lines(err)


# --- 2. a job listed before a job it needs on its own rank ---------------------------


def test_a_consumer_listed_before_its_receive_is_refused() -> None:
    err = _errors("0F0,0SEND_F0,0RECV_B0,0B0\n,1F0,1RECV_F0,1B0,1SEND_B0\n")
    assert _lines(err) == [
        "schedule 'x.csv' is invalid: 1 job(s) out of order on their rank: "
        "1F0 is listed before 1RECV_F0, which it needs, on rank 1 (step 1 before step 2)",
        ORDER_WHY,
        "step  rank 0      rank 1",
        "0     0F0         .",
        "1     0SEND_F0    >>1F0",
        "2     0RECV_B0    >>1RECV_F0",
        "3     0B0         1B0",
        "4     .           1SEND_B0",
        ">> rank 1, step 1: 1F0 is listed before 1RECV_F0, which it needs, on rank 1 (step 1 before step 2)",
        ">> rank 1, step 2: 1RECV_F0 must come before 1F0",
    ]
    assert err.jobs == ("1F0", "1RECV_F0")


def test_a_backward_listed_before_its_receive_is_refused() -> None:
    err = _errors("0F0,0SEND_F0,0B0,0RECV_B0\n,1RECV_F0,1F0,1B0,1SEND_B0\n")
    assert _lines(err)[0] == (
        "schedule 'x.csv' is invalid: 1 job(s) out of order on their rank: "
        "0B0 is listed before 0RECV_B0, which it needs, on rank 0 (step 2 before step 3)"
    )


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("0SEND_F0,0F0,0RECV_B0,0B0\n,1RECV_F0,1F0,1B0,1SEND_B0\n",
         "0SEND_F0 is listed before 0F0, which it needs, on rank 0 (step 0 before step 1)"),
        ("0F0,0SEND_F0,0RECV_B0,0B0\n,1RECV_F0,1F0,1SEND_B0,1B0\n",
         "1SEND_B0 is listed before 1B0, which it needs, on rank 1 (step 3 before step 4)"),
    ],
    ids=["send_f", "send_b"],
)
def test_a_send_listed_before_its_producer_is_refused(text: str, first: str) -> None:
    err = _errors(text)
    assert _lines(err)[:2] == [f"schedule 'x.csv' is invalid: 1 job(s) out of order on their rank: {first}", ORDER_WHY]


def test_a_same_rank_producer_on_the_same_stream_listed_later_is_refused() -> None:
    # V placement: stages 0 and 3 on rank 0, 1 and 2 on rank 1; 2F0 needs 1F0, listed after it.
    err = _errors(
        "0F0,0SEND_F0,3RECV_F0,3F0,3B0,3SEND_B0,0RECV_B0,0B0\n1RECV_F0,2F0,1F0,2SEND_F0,2RECV_B0,2B0,1B0,1SEND_B0\n", name="v.csv"
    )
    assert _lines(err)[0] == (
        "schedule 'v.csv' is invalid: 1 job(s) out of order on their rank: 2F0 is listed before 1F0, which it needs, on rank 1 (step 1 before step 2)"
    )
    assert err.jobs == ("2F0", "1F0")


def test_several_out_of_order_jobs_are_counted_and_marked() -> None:
    err = _errors("0F0,0F1,0SEND_F1,0SEND_F0,0RECV_B0,0B0,0RECV_B1,0B1\n1F0,1RECV_F0,1F1,1RECV_F1,1B0,1SEND_B0,1B1,1SEND_B1\n")
    lines = _lines(err)
    assert lines[0] == (
        "schedule 'x.csv' is invalid: 2 job(s) out of order on their rank: "
        "1F0 is listed before 1RECV_F0, which it needs, on rank 1 (step 0 before step 1)"
    )
    assert ">> rank 1, step 2: 1F1 is listed before 1RECV_F1, which it needs, on rank 1 (step 2 before step 3)" in lines
    assert err.jobs == ("1F0", "1RECV_F0", "1F1", "1RECV_F1")


# --- every builder, with communication jobs, still validates ---------------------------


def _valid_sizes() -> list[tuple[str, int, int, int]]:
    out = []
    for name in sorted(schedule_names()):
        vs = (1, 2, 3) if builder_info(name).takes_chunks else (1,)
        found = 0
        for p in (1, 2, 3, 4, 5):
            for m in (1, 2, 3, 4, 6, 8, 10, 12):
                for v in vs:
                    try:
                        build_any(name, p, m, v)
                    except ConfigError:  # sizes this builder refuses
                        continue
                    out.append((name, p, m, v))
                    found += 1
        assert found, f"no valid sizes found for {name}"
    return out


def test_every_builder_with_communication_still_builds_plans_on_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fallback(schedule: object) -> None:
        raise AssertionError(f"the fast path fell back on the valid schedule {schedule!r}")

    cases = _valid_sizes()
    assert {name for name, *_ in cases} == set(schedule_names())
    with monkeypatch.context() as mp:
        mp.setattr(plan_module, "_build_plan_checked", no_fallback)
        for name, p, m, v in cases:
            for optimizer in (False, True):
                s = add_communication(build_any(name, p, m, v, optimizer=optimizer))
                plan = build_plan(s)
                assert len(plan.order) == plan.num_jobs == s.num_jobs, (name, p, m, v)
                for stream_name in plan.stream_names:  # no rank talks to itself
                    rank, _, peer = stream_name.partition("/comm↔")
                    assert rank != f"rank{peer}", (name, p, m, v, stream_name)
    for name, p, m, v in cases[::7]:  # and the reference path agrees
        s = add_communication(build_any(name, p, m, v))
        a, b = build_plan(s), overlap.apply(_build_plan_checked(s))  # DualPipeV's overlapped pairs applied to both
        assert (a.jobs, a.deps, a.start_deps, a.stream, a.stream_names) == (b.jobs, b.deps, b.start_deps, b.stream, b.stream_names), (name, p, m, v)
