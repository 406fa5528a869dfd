"""PyTorch pipeline CSV and PaddlePaddle job names (torch/distributed/pipelining/schedules.py
``_dump_csv``/``_load_csv``; paddle/distributed/passes/pipeline_scheduler_pass)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _sched_helpers import build_any
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from harness.errors import InputFormatError, ScheduleError
from harness.schedule import build_schedule, schedule_names
from harness.schedule.model import Job, JobKind, Schedule
from harness.schedule.notation import (
    dumps_csv,
    from_paddle_jobs,
    load_csv,
    load_schedule_file,
    loads_csv,
    paddle_type,
    parse_paddle_type,
    to_paddle_jobs,
)
from harness.schedule.passes import add_communication


# Issue 3: CSV export -> import is the identity, compute-only and with SEND/RECV.
@settings(max_examples=80, deadline=None)
@given(name=st.sampled_from(sorted(schedule_names())), p=st.integers(1, 6), m=st.integers(1, 12), comm=st.booleans())
def test_csv_round_trip(name: str, p: int, m: int, comm: bool) -> None:
    v = 2 if name in ("Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble") else 1
    if name == "DualPipeV":
        m = max(m, 2 * p)
    if name == "DualPipe":  # p even, m even, m >= 2p
        p += p % 2
        m = max(m + m % 2, 2 * p)
    if name in ("V-Half", "V-Min"):
        m = max(m, p)
    if name in ("Interleaved1F1B", "InterleavedZeroBubble"):
        assume(m % max(1, m // p) == 0)
    s = build_any(name, p, m, v)
    if comm:
        s = add_communication(s)
    back = loads_csv(dumps_csv(s), name=s.name)
    assert back.ranks == s.ranks
    assert back.stage_to_rank == s.stage_to_rank
    assert back.num_microbatches == m
    assert back.params.get("chains") == s.params.get("chains")  # DualPipe's two directions, read from the file
    assert dumps_csv(back) == dumps_csv(s)


def test_csv_idle_slots_are_kept() -> None:
    text = "0F0,,0B0\n,1F0,1B0\n"
    s = loads_csv(text)
    assert s.ranks[0] == (Job(0, JobKind.F, 0), None, Job(0, JobKind.B, 0))
    assert s.ranks[1][0] is None
    assert dumps_csv(s) == text


def test_csv_layout_matches_pytorch() -> None:
    # _dump_csv: csv.writer rows of str(action); one row per rank.
    s = build_schedule("1F1B", 2, 2)
    assert dumps_csv(s) == "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n"


def test_b_with_w_is_read_as_input_backward() -> None:
    # Files in the wild write B with W for the split form: B then means I.
    s = loads_csv("0F0,0B0,0W0\n")
    assert [j.kind for j in s.ranks[0] if j] == [JobKind.F, JobKind.I, JobKind.W]
    # Without a W, B stays a full backward (PyTorch's meaning).
    assert loads_csv("0F0,0B0\n").ranks[0][1] == Job(0, JobKind.B, 0)


def test_order_error_in_a_file_says_which_b_was_read_as_i(tmp_path) -> None:
    f = tmp_path / "w_first.csv"
    f.write_text("0F0,0W0,0B0\n0F1,0B1,0W1\n".replace("\n0F1", ",0F1"))
    with pytest.raises(ScheduleError) as info:
        load_csv(f)
    msg = str(info.value)
    assert msg.startswith(f"schedule '{f}' is invalid: 1 job(s) out of order on their rank: 0W0 is listed before its 0I0 (step 2)")
    assert msg.endswith("so the file's 0B0 is 0I0 above)")
    # Several B read as I: the note names the one in the error, not the first in the file.
    with pytest.raises(ScheduleError) as many:
        loads_csv("0F0,0F1,0W0,0B1,0B0,0W1\n", name="many.csv")
    assert str(many.value).endswith("so the file's 0B0 is 0I0 above)")
    # Without the rewrite the message is the validator's alone.
    with pytest.raises(ScheduleError) as plain:
        loads_csv("0B0,0F0\n", name="plain.csv")
    assert "0B0 is listed before its 0F0" in str(plain.value) and "read as I" not in str(plain.value)


def test_fsdp_actions_are_kept_as_jobs() -> None:
    s = loads_csv("0UNSHARD,0F0,0B0,0RESHARD,0REDUCE_GRAD\n")
    assert s.ranks[0] == (Job(0, JobKind.UNSHARD, None), Job(0, JobKind.F, 0), Job(0, JobKind.B, 0),
                          Job(0, JobKind.RESHARD, None), Job(0, JobKind.REDUCE_GRAD, None))


def test_placement_inferred_v_shape() -> None:
    s = loads_csv("0F0,3F0,3B0,0B0\n1F0,2F0,2B0,1B0\n")
    assert s.stage_to_rank == (0, 1, 1, 0)


def test_microbatches_inferred_or_given(tmp_path: Path) -> None:
    f = tmp_path / "s.csv"
    f.write_text("0F0,0F1,0B0,0B1\n")
    s = load_schedule_file(f)
    assert (s.name, s.num_microbatches) == ("s.csv", 2)
    with pytest.raises(ScheduleError, match=r"(?s)s\.csv.*invalid.*missing jobs: 0F2, 0B2"):
        load_schedule_file(f, num_microbatches=3)


def test_malformed_cell_names_file_row_and_cell(tmp_path: Path) -> None:
    f = tmp_path / "bad.csv"
    f.write_text("0F0,0B0\n1F0,1X0\n")
    with pytest.raises(ScheduleError, match=r"bad\.csv: row 2 \(rank 1\), cell 2 \(step 1\): cannot read job '1X0'"):
        load_schedule_file(f)


def test_stage_on_two_rows_is_an_error() -> None:
    with pytest.raises(ScheduleError, match=r"row 2 \(rank 1\), cell 1.*stage 0 on rank 1.*exactly one rank"):
        loads_csv("0F0,0B0\n0F1,0B1\n")


def test_missing_stage_is_an_error() -> None:
    with pytest.raises(ScheduleError, match=r"stage\(s\) 1 appear on no row"):
        loads_csv("0F0,0B0\n2F0,2B0\n")


def test_empty_or_unknown_file(tmp_path: Path) -> None:
    (tmp_path / "e.csv").write_text("\n")
    with pytest.raises(InputFormatError, match="empty schedule file"):
        load_schedule_file(tmp_path / "e.csv")
    with pytest.raises(InputFormatError, match="unknown schedule file type"):
        load_schedule_file(tmp_path / "e.json")
    with pytest.raises(InputFormatError, match="cannot read"):
        load_schedule_file(tmp_path / "nope.csv")


# PaddlePaddle job types: forward, backward, backward_b, backward_w, optimizer (+ chunk suffix).
@pytest.mark.parametrize(
    ("text", "kind", "chunk"),
    [
        ("forward", JobKind.F, None),
        ("backward", JobKind.B, None),
        ("backward_b", JobKind.I, None),
        ("backward_w1", JobKind.W, 1),
        ("forward0", JobKind.F, 0),
        ("optimizer", JobKind.OPT, None),
    ],
)
def test_paddle_types(text: str, kind: JobKind, chunk: int | None) -> None:
    assert parse_paddle_type(text) == (kind, chunk)
    assert paddle_type(kind, chunk) == text


def test_paddle_bad_type() -> None:
    with pytest.raises(ScheduleError, match="cannot read PaddlePaddle job type 'backwards'"):
        parse_paddle_type("backwards")
    with pytest.raises(ScheduleError, match="no SEND_F job"):
        paddle_type(JobKind.SEND_F)


@pytest.mark.parametrize(("name", "placement", "v"), [("ZB-V", "v", 1), ("Interleaved1F1B", "loop", 2), ("1F1B", "loop", 1)])
def test_paddle_round_trip(name: str, placement: str, v: int) -> None:
    s = build_schedule(name, 3, 6, v, optimizer=True)
    rows = to_paddle_jobs(s)
    if s.chunks_per_rank > 1:
        assert rows[0][0][0].startswith("forward0")
    back = from_paddle_jobs(name, rows, placement=placement)
    assert back.ranks == s.ranks
    assert isinstance(back, Schedule)


def test_paddle_unknown_type_names_rank_and_position() -> None:
    with pytest.raises(ScheduleError, match=r"rank 1, job 0"):
        from_paddle_jobs("x", [[("forward", 0), ("backward", 0)], [("fwd", 0)]])


def test_csv_saved_with_a_byte_order_mark_reads(tmp_path):
    # Spreadsheet programs save UTF-8 CSV with a BOM; it is not part of the first cell.
    from harness.schedule.notation import load_schedule_file

    path = tmp_path / "bom.csv"
    path.write_text("\ufeff0F0,0B0\n,1F0,1B0\n", encoding="utf-8")
    schedule = load_schedule_file(path)
    assert schedule.to_text() == [["0F0", "0B0"], ["", "1F0", "1B0"]]


@pytest.mark.parametrize(("data", "row", "offset", "byte"), [
    (b"0F0,0B0\n,1F0,1B0\n\xff\xfe\n", 3, 17, 0xFF),  # it said "in row 1 or the next"
    (b"0F0,0B0\r\n,1F\xe90,1B0\r\n", 2, 12, 0xE9),  # inside a cell of row 2, after a Windows line end
    (b"0F0" + b"," * 1_200_000 + b"\n,1F0,\x80\n", 2, 1_200_004 + 5, 0x80),  # past the first 1 MiB chunk (idle cells)
])
def test_a_byte_that_is_not_utf8_names_its_row_and_offset(tmp_path, data, row, offset, byte):
    from harness.schedule.notation import load_schedule_file

    path = tmp_path / "bad.csv"
    path.write_bytes(data)
    with pytest.raises(InputFormatError) as info:
        load_schedule_file(path)
    assert str(info.value) == (f"{path}: row {row} (rank {row - 1}): byte 0x{byte:02x} at offset {offset:,} is not UTF-8 text; "
                               "a schedule file is UTF-8 text (saved as CSV, not a spreadsheet)")


def test_a_huge_stage_number_lists_only_the_first_missing_stages() -> None:
    with pytest.raises(ScheduleError) as info:
        loads_csv("10000000F0,10000000B0\n", name="big.csv")
    assert str(info.value) == (
        "big.csv: stage(s) 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 (and 9999988 more) appear on no row, "
        "but stage 10000000 does; stages must be numbered 0..S-1"
    )


def test_a_blank_line_inside_a_file_is_an_empty_rank_and_refused() -> None:
    with pytest.raises(ScheduleError, match=r"^blank.csv: row 2 \(rank 1\) has no jobs; every row is a rank that holds at least one "
                       r"stage \(a blank line inside the file\?\)$"):
        loads_csv("0F0,0B0\n\n1F0,1B0\n", name="blank.csv")
    assert loads_csv("0F0,1F0,1B0,0B0\n\n", name="trailing.csv").num_ranks == 1  # trailing blank lines are not ranks


def test_overlap_f_b_cells_are_read_as_their_sub_actions_in_order_and_kept_as_groups() -> None:
    # PyTorch writes DualPipeV's overlapped pairs as one cell, (F;B)OVERLAP_F_B (_Action.__repr__ with sub_actions).
    dual = build_schedule("DualPipeV", 2, 4)
    rows = [[str(j) for j in row] for row in dual.ranks]
    merged = []
    for row in rows:  # fold every forward followed directly by a backward of the other chunk into one cell
        out: list[str] = []
        k = 0
        while k < len(row):
            a, b = row[k], row[k + 1] if k + 1 < len(row) else ""
            if "F" in a and ("B" in b or "I" in b) and a[0] != b[0]:
                out.append(f"({a};{b})OVERLAP_F_B")
                k += 2
            else:
                out.append(a)
                k += 1
        merged.append(out)
    assert sum(cell.endswith("OVERLAP_F_B") for row in merged for cell in row) > 0  # the test does fold some pairs
    text = "\n".join(",".join(row) for row in merged) + "\n"
    read = loads_csv(text, name="dualpipev.csv")
    assert read.ranks == dual.ranks and read.stage_to_rank == dual.stage_to_rank
    folded = [cell[1:-len(")OVERLAP_F_B")].split(";") for row in merged for cell in row if cell.endswith("OVERLAP_F_B")]
    assert [[str(j) for j in g] for g in read.params["overlap"]] == folded  # one overlapped group per composite cell
    assert dumps_csv(read) == text  # written back as composite cells


def test_overlap_f_b_errors_name_the_cell_and_the_sub_action() -> None:
    with pytest.raises(ScheduleError, match=r"^x\.csv: row 1 \(rank 0\), cell 2 \(step 2\): in '\(0F1;0X0\)OVERLAP_F_B': "
                                            r"cannot read job '0X0'"):
        loads_csv("0F0,(0F1;0X0)OVERLAP_F_B,0B0,0B1\n", name="x.csv")
    # the step is the job's place in the row once earlier composite cells are unfolded
    with pytest.raises(ScheduleError, match=r"^x\.csv: row 1 \(rank 0\), cell 3 \(step 3\): cannot read job 'junk'"):
        loads_csv("0F0,( 0F1 ; 0B0 )OVERLAP_F_B,junk\n", name="x.csv")
    s = loads_csv("0F0,( 0F1 ; 0B0 )OVERLAP_F_B,0B1\n", name="x.csv")
    assert [str(j) for j in s.ranks[0]] == ["0F0", "0F1", "0B0", "0B1"]


@pytest.mark.parametrize("cell", ["０F0", "0F٣", "１B0"])  # full-width and Arabic-Indic digits
def test_only_ascii_digits_are_stage_and_micro_batch_numbers(cell: str) -> None:
    with pytest.raises(ScheduleError, match=rf"^x\.csv: row 1 \(rank 0\), cell 1 \(step 0\): cannot read job '{cell}'"):
        loads_csv(f"{cell},0B0\n", name="x.csv")


@pytest.mark.parametrize("mb", [-1, "0", None, True])
def test_paddle_micro_batch_ids_must_be_integers_from_zero(mb: object) -> None:
    with pytest.raises(ScheduleError, match=rf"^p: rank 0, job 1 \(backward\): micro_batch_id must be an integer >= 0, got {re.escape(repr(mb))}$"):
        from_paddle_jobs("p", [[("forward", 0), ("backward", mb), ("forward", 1), ("backward", 1)]])
    assert from_paddle_jobs("p", [[("forward", 0), ("backward", 0), ("optimizer", None)]]).ranks[0][-1] == Job(0, JobKind.OPT, None)
