"""The job model and its compact text form (PyTorch pipelining's ``_Action`` notation)."""

from __future__ import annotations

import pytest

from harness.errors import ScheduleError
from harness.schedule.model import Job, JobKind, Schedule, loop_placement, parse_job, v_placement


@pytest.mark.parametrize(
    ("text", "job"),
    [
        ("2F0", Job(2, JobKind.F, 0)),
        ("0B13", Job(0, JobKind.B, 13)),
        ("3I1", Job(3, JobKind.I, 1)),
        ("3W1", Job(3, JobKind.W, 1)),
        ("1SEND_F3", Job(1, JobKind.SEND_F, 3)),
        ("2RECV_B0", Job(2, JobKind.RECV_B, 0)),
        ("4OPT", Job(4, JobKind.OPT, None)),
    ],
)
def test_parse_and_print_round_trip(text, job):
    assert parse_job(text) == job
    assert str(job) == text


@pytest.mark.parametrize("text", ["", "F0", "2X0", "2F", "2OPT1", "a2F0", "2F-1", "2 F 0 1"])
def test_malformed_job_text_is_a_schedule_error(text):
    with pytest.raises(ScheduleError) as err:
        parse_job(text)
    assert repr(text) in str(err.value)


def test_placements():
    assert loop_placement(4, 2) == (0, 1, 2, 3, 0, 1, 2, 3)
    assert v_placement(4) == (0, 1, 2, 3, 3, 2, 1, 0)


def test_chunk_of_follows_placement():
    s = Schedule("v", 1, v_placement(2), ((Job(0, JobKind.F, 0), Job(3, JobKind.F, 0)), (Job(1, JobKind.F, 0), Job(2, JobKind.F, 0))))
    assert [s.chunk_of(k) for k in range(4)] == [0, 0, 1, 1]
    assert s.chunks_per_rank == 2
    assert s.stages_of(0) == [0, 3]


def test_job_on_wrong_rank_is_rejected_with_its_position():
    with pytest.raises(ScheduleError, match=r"1F0 is listed on rank 0 \(step 1\), but stage 1 is placed on rank 1"):
        Schedule.from_text("x", [["0F0", "1F0"], ["0B0"]], 1)


def test_from_text_names_rank_and_step_of_a_bad_cell():
    with pytest.raises(ScheduleError, match=r"rank 1, step 2: cannot read job '1Q0'"):
        Schedule.from_text("x", [["0F0"], ["1F0", "", "1Q0"]], 1)


def test_grid_marks_cells():
    s = Schedule.from_text("x", [["0F0", "", "0B0"], ["1F0", "1B0"]], 1)
    grid = s.format_grid({(1, 1): "look here"})
    lines = grid.splitlines()
    assert lines[0].split() == ["step", "rank", "0", "rank", "1"]
    assert lines[2].split() == ["1", ".", ">>1B0"]
    assert lines[-1] == ">> rank 1, step 1: look here"


def test_cut_grids_say_how_many_steps_they_hide() -> None:
    s = Schedule.from_text("long", [[f"0F{i}" for i in range(20)] + [f"0B{i}" for i in range(20)]], 20)
    lines = s.format_grid({(0, 20): "here"}, max_steps=10).splitlines()
    assert lines[1:6] == [f"{i:<5} 0F{i}" for i in range(5)]
    assert lines[6] == "  ... (12 steps not shown)"
    assert [ln.split()[0] for ln in lines[7:14]] == [str(i) for i in range(17, 24)]
    assert lines[14] == "  ... (16 more steps, 40 in all)"
    assert lines[15] == ">> rank 0, step 20: here"
    assert "steps not shown" not in Schedule.from_text("short", [["0F0", "0B0"]], 1).format_grid(max_steps=10)
