"""Bad schedules give a clear ScheduleError with the step x rank grid, never a traceback
from inside the library (issue 3, "Bad input")."""

from __future__ import annotations

import pytest

from harness.errors import ScheduleError
from harness.plan import groups as overlap
from harness.plan.build import build_plan, validate
from harness.plan.reference import _build_plan_checked
from harness.schedule import build_schedule
from harness.schedule.model import Job, JobKind, Schedule, loop_placement, parse_job
from harness.schedule.notation import loads_csv
from harness.schedule.passes import add_communication


def _sched(rows: list[list[str]], m: int, placement: tuple[int, ...] | None = None) -> Schedule:
    return Schedule.from_text("t", rows, m, placement)


@pytest.mark.parametrize("text", ["2X0", "F0", "0F", "0OPT3", "zz", "0SEND_F"])
def test_malformed_action(text: str) -> None:
    with pytest.raises(ScheduleError, match=f"cannot read job '{text}'"):
        parse_job(text)


def test_malformed_action_in_a_grid_names_rank_and_step() -> None:
    with pytest.raises(ScheduleError, match=r"t: rank 1, step 1: cannot read job '1Q0'"):
        _sched([["0F0", "0B0"], ["1F0", "1Q0"]], 1)


def test_csv_missing_microbatch() -> None:
    with pytest.raises(ScheduleError, match=r"(?s)x\.csv' is invalid: 2 missing job\(s\).*missing jobs: 1F1, 1B1\n") as exc:
        loads_csv("0F0,0F1,0F2,0B0,0B1,0B2\n1F0,1B0,,1F2,1B2\n", name="x.csv")
    assert "x.csv" in str(exc.value)
    assert "1F1" in exc.value.jobs


def test_w_before_its_i() -> None:
    s = _sched([["0F0", "0W0", "0I0"]], 1)
    with pytest.raises(ScheduleError, match=r"0W0 is listed before its 0I0") as exc:
        build_plan(s)
    msg = str(exc.value)
    assert ">>0W0" in msg and ">>0I0" in msg  # both cells marked in the grid
    assert exc.value.jobs[0] == "0W0"


def test_backward_before_forward() -> None:
    with pytest.raises(ScheduleError, match=r"0B0 is listed before its 0F0"):
        build_plan(_sched([["0B0", "0F0"]], 1))


def test_deadlock_is_found_and_drawn() -> None:
    # Rank 1 starts with 1F1, which needs 0F1, listed after 0B0 on rank 0; 0B0 needs 1B0,
    # listed after 1F1 on rank 1: a cycle.
    rows = [["0F0", "0B0", "0F1", "0B1"], ["1F1", "1B1", "1F0", "1B0"]]
    s = _sched(rows, 2)
    with pytest.raises(ScheduleError, match="deadlocks") as exc:
        build_plan(s)
    msg = str(exc.value)
    assert "stalled at" in msg and ">>" in msg
    assert "1F1" in exc.value.jobs


def test_cross_rank_deadlock_two_ranks_waiting_on_each_other() -> None:
    rows = [["0F0", "0B0", "0F1", "0B1"], ["1F1", "1B1", "1F0", "1B0"]]
    with pytest.raises(ScheduleError, match=r"deadlocks: \d+ of 8 jobs can never run"):
        validate(_sched(rows, 2))


def test_duplicate_and_out_of_range() -> None:
    with pytest.raises(ScheduleError, match="listed twice"):
        build_plan(_sched([["0F0", "0F0", "0B0"]], 1))
    with pytest.raises(ScheduleError, match=r"names micro-batch 5, valid are 0\.\.0"):
        build_plan(_sched([["0F0", "0B0", "0F5"]], 1))


def test_mixed_full_and_split_backward() -> None:
    with pytest.raises(ScheduleError, match="0B0 is a full backward, but 0I0 is also listed"):
        build_plan(_sched([["0F0", "0I0", "0B0", "0W0"]], 1))


def test_job_on_wrong_rank() -> None:
    with pytest.raises(ScheduleError, match="stage 1 is placed on rank 1"):
        _sched([["0F0", "1F0"], []], 1, loop_placement(2))


def test_missing_receive_in_comm_schedule() -> None:
    s = add_communication(build_schedule("1F1B", 2, 1))
    rows = [[str(j) for j in r if j is not None and str(j) != "1RECV_F0"] for r in s.ranks]
    with pytest.raises(ScheduleError, match="1F0 needs 1RECV_F0, which is not in the schedule"):
        build_plan(_sched(rows, 1))


def test_comm_order_deadlock() -> None:
    # Receive listed on the comm stream before a send it (transitively) enables.
    s = Schedule(
        "c",
        1,
        loop_placement(2),
        (
            (Job(0, JobKind.F, 0), Job(0, JobKind.RECV_B, 0), Job(0, JobKind.SEND_F, 0), Job(0, JobKind.B, 0)),
            (Job(1, JobKind.RECV_F, 0), Job(1, JobKind.F, 0), Job(1, JobKind.B, 0), Job(1, JobKind.SEND_B, 0)),
        ),
    )
    with pytest.raises(ScheduleError, match=r"deadlocks.*0RECV_B0"):
        build_plan(s)


@pytest.mark.parametrize("name", ["1F1B", "ZB-V", "Interleaved1F1B", "DualPipeV"])
def test_fast_and_checked_plans_agree(name: str) -> None:
    s = add_communication(build_schedule(name, 3, 6, 2 if name == "Interleaved1F1B" else 1, optimizer=True))
    a, b = build_plan(s), overlap.apply(_build_plan_checked(s))  # DualPipeV's overlapped pairs applied to both
    assert (a.jobs, a.deps, a.start_deps, a.stream, a.chunk) == (b.jobs, b.deps, b.start_deps, b.stream, b.chunk)


def test_big_grids_are_cut_around_marks() -> None:
    s = build_schedule("1F1B", 2, 200)
    rows = [[str(j) for j in r if j is not None] for r in s.ranks]
    rows[1][300], rows[1][301] = rows[1][301], rows[1][300]  # 1F? and 1B? swapped far down
    with pytest.raises(ScheduleError) as exc:
        build_plan(_sched(rows, 200))
    msg = str(exc.value)
    assert "  ..." in msg and len(msg.splitlines()) < 60


def test_only_opt_jobs_go_without_a_micro_batch_on_both_plan_paths() -> None:
    # Job tuples built in code can leave the micro-batch out; the text forms cannot.
    f, b = JobKind.F, JobKind.B
    s = Schedule("x", 1, (0, 1), ((Job(0, f, None), Job(0, f, 0), Job(0, b, 0)), (Job(1, f, 0), Job(1, b, 0))), {})
    for path in (build_plan, _build_plan_checked):
        with pytest.raises(ScheduleError) as info:
            path(s)
        assert str(info.value).splitlines()[-1] == (
            ">> rank 0, step 0: 0F names no micro-batch; "
            "only OPT, UNSHARD, RESHARD and REDUCE_GRAD jobs go without one")


@pytest.mark.parametrize(("entry", "message"), [
    ((0, JobKind.F, 0), "(0, <JobKind.F: 'F'>, 0) is not a Job; write Job(stage, JobKind.F, microbatch), or None for an idle slot"),
    (Job(0, "F", 0), "Job(0, 'F', 0) has kind 'F', not a JobKind (e.g. JobKind.F)"),
    (Job(0.0, JobKind.F, 0), "Job(0.0, JobKind.F, 0) has stage 0.0, not an integer"),
    (Job(0, JobKind.F, 0.0), "Job(0, JobKind.F, 0.0) has micro-batch 0.0, not an integer >= 0"),
    (Job(0, JobKind.OPT, 0), "Job(0, JobKind.OPT, 0): an OPT job takes no micro-batch (write Job(0, JobKind.OPT, None))"),
])
def test_rows_built_in_code_are_checked_job_by_job(entry: object, message: str) -> None:
    # Raw AttributeErrors came later before (analyze: "'str' object has no attribute 'is_comm'"), and an OPT with a
    # micro-batch ran, then wrote a CSV cell ("0OPT0") that cannot be read back.
    rows = ((Job(0, JobKind.F, 0), Job(0, JobKind.B, 0), entry), (Job(1, JobKind.F, 0), Job(1, JobKind.B, 0)))
    with pytest.raises(ScheduleError) as info:
        Schedule("x", 1, loop_placement(2), rows)  # type: ignore[arg-type]
    assert str(info.value) == f"schedule 'x': rank 0, step 2: {message}"


def test_a_job_on_a_rank_that_does_not_hold_its_stage_is_drawn_in_the_grid() -> None:
    with pytest.raises(ScheduleError) as info:
        Schedule.from_text("t", [["0F0", "1F0", "1B0"], ["1F1", "0B0"]], 1)
    assert str(info.value).splitlines() == [
        "schedule 't': job 1F0 is listed on rank 0 (step 1), but stage 1 is placed on rank 1",
        "step  rank 0    rank 1",
        "0     0F0       1F1",
        "1     >>1F0     0B0",
        "2     1B0       .",
        ">> rank 0, step 1: stage 1 lives on rank 1: a stage's jobs are all on its rank",
    ]
