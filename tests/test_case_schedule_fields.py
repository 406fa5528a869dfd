"""A case's optimizer, options and chunks: applied to named schedules, refused (not ignored) for a given
schedule or file, and checked when the case is built, with errors that start with the case's line."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy  # noqa: F401 - imported before pytester's in-process runs, which drop modules first imported inside them (numpy cannot load twice)
import pytest

from harness.case import PipelineCase
from harness.errors import ConfigError, HarnessError, InputFormatError, ScheduleError
from harness.runner import run_case
from harness.schedule import build_schedule
from harness.schedule.model import JobKind

HERE = Path(__file__).name
CSV = Path(__file__).resolve().parents[1] / "cases" / "schedules" / "zb_like_p3_m4.csv"
INTERLEAVED = build_schedule("Interleaved1F1B", 2, 4, 2)  # v=2
GIVEN = "the given schedule carries its own"


def _line() -> int:
    """The caller's line number."""
    return sys._getframe(1).f_lineno


@pytest.fixture(autouse=True)
def in_tests_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).parent)


def _error(**fields: object) -> tuple[str, int]:
    """The message of the ConfigError constructing a case with ``fields`` raises, and the line that constructed it."""
    with pytest.raises(ConfigError) as info:
        line = _line(); PipelineCase(**fields)  # type: ignore[arg-type]  # noqa: E702
    return str(info.value), line


# -- a given Schedule or CSV file: optimizer and options refused, chunks only its own ---------------


@pytest.mark.parametrize("schedule", [INTERLEAVED, CSV, str(CSV)], ids=["Schedule", "Path", "str"])
def test_options_on_a_given_schedule_are_refused(schedule):
    message, line = _error(schedule=schedule, options={"optimizer": True})
    what = "the given schedule" if schedule is INTERLEAVED else f"the schedule file {CSV}"
    label = "Interleaved1F1B" if schedule is INTERLEAVED else "zb_like_p3_m4.csv"
    assert message == (f"{HERE}:{line}: case {label!r}: options={{'optimizer': True}} only apply to named (built-in) schedules, "
                       f"whose builder takes them; {what} carries its own jobs and placement")


@pytest.mark.parametrize("schedule", [INTERLEAVED, CSV], ids=["Schedule", "Path"])
def test_optimizer_on_a_given_schedule_is_refused(schedule):
    message, line = _error(schedule=schedule, optimizer=True)
    what = "the given schedule" if schedule is INTERLEAVED else f"the schedule file {CSV}"
    label = "Interleaved1F1B" if schedule is INTERLEAVED else "zb_like_p3_m4.csv"
    assert message == (f"{HERE}:{line}: case {label!r}: optimizer=True only applies to named (built-in) schedules; "
                       f"{what} carries its own jobs: add an OPT job per stage to it (a CSV cell such as 0OPT)")


def test_a_given_schedule_keeps_its_own_chunks():
    assert PipelineCase(INTERLEAVED).build().chunks_per_rank == 2  # the default: the schedule's own
    assert PipelineCase(INTERLEAVED, chunks=2).build().chunks_per_rank == 2  # repeating it is fine
    message, line = _error(schedule=INTERLEAVED, chunks=3)
    assert message == (f"{HERE}:{line}: case 'Interleaved1F1B v=3': the given schedule has 2 chunks per rank, but chunks=3; "
                       f"leave chunks out or give 2: a given schedule carries its own")


def test_a_given_schedule_is_compared_with_the_sizes_when_the_case_is_built():
    message, line = _error(schedule=INTERLEAVED, stages=3)
    assert message == f"{HERE}:{line}: case 'Interleaved1F1B p=3': the given schedule has 2 ranks, but stages=3"


def test_a_schedule_file_keeps_its_own_chunks_and_sizes():
    assert PipelineCase(CSV).build().chunks_per_rank == 1
    line = _line(); case = PipelineCase(CSV, chunks=2)  # noqa: E702 - read when built
    with pytest.raises(ConfigError) as info:
        case.build()
    assert str(info.value) == (f"{HERE}:{line}: case 'zb_like_p3_m4.csv v=2': {CSV} has 1 chunk per rank, but chunks=2; "
                               "leave chunks out or give 1: a given schedule carries its own")
    line = _line(); case = PipelineCase(CSV, microbatches=8)  # noqa: E702
    with pytest.raises(ConfigError) as info:
        case.build()
    assert str(info.value) == f"{HERE}:{line}: case 'zb_like_p3_m4.csv m=8': {CSV} has 4 micro-batches, but microbatches=8"


# -- a schedule file's own errors (reading, parsing, validating) start with the case's line too ----


def _write(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(
    ("name", "content", "error", "rest"),
    [
        ("missing.csv", None, InputFormatError,
         "missing.csv: cannot read schedule file: [Errno 2] No such file or directory: 'missing.csv'"),
        ("folder.csv", "dir", InputFormatError, "folder.csv: is a directory, not a schedule file (a PyTorch pipeline .csv)"),
        ("undecodable.csv", b"\xff\xfe0F0", InputFormatError,
         "undecodable.csv: row 1 (rank 0): byte 0xff at offset 0 is not UTF-8 text; a schedule file is UTF-8 text (saved as CSV, "
         "not a spreadsheet) (it starts as UTF-16 text does: save it as CSV UTF-8)"),
        ("cell.csv", b"0XX\n", ScheduleError, "cell.csv: row 1 (rank 0), cell 1 (step 0): cannot read job '0XX': "),
        ("order.csv", b"0F0,0B0\n1B0,1F0\n", ScheduleError,
         "schedule 'order.csv' is invalid: 1 job(s) out of order on their rank: 1B0 is listed before its 1F0 (step 1)\n"),
        ("dead.csv", b"0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n", ScheduleError,
         "schedule 'dead.csv' deadlocks: 7 of 8 jobs can never run; stalled at 0B0, 1F1\n"),
    ],
    ids=["missing", "directory", "undecodable", "cell", "out-of-order", "deadlock"],
)
def test_schedule_file_errors_start_with_the_case_line(tmp_path, monkeypatch, name, content, error, rest):
    monkeypatch.chdir(tmp_path)
    if content == "dir":
        (tmp_path / name).mkdir()
    elif content is not None:
        _write(tmp_path, name, content)
    line = 7; case = PipelineCase(Path(name), declared_at=f"{HERE}:{line}")  # noqa: E702 - absolute paths outside tests/ here
    with pytest.raises(error) as info:
        run_case(case, "sim", range(1, 2))
    assert isinstance(info.value, HarnessError)
    assert str(info.value).startswith(f"{HERE}:{line}: {rest}")
    assert str(info.value).count(f"{HERE}:{line}: ") == 1
    if isinstance(info.value, ScheduleError) and name != "cell.csv":
        assert info.value.jobs  # the copy keeps the jobs at fault


def test_schedule_file_errors_are_unchanged_without_a_declaration_site(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the command line builds cases with declared_at None: the file's own words
    with pytest.raises(InputFormatError, match=r"^missing\.csv: cannot read schedule file"):
        run_case(PipelineCase(Path("missing.csv"), declared_at=""), "sim")


# -- options for a named schedule ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"chunks": 2}, "option 'chunks' is not a builder option: the case's own field gives it; give chunks=2 instead"),
        ({"name": "ZB-H1"}, "option 'name' is not a builder option: the case's own field gives it; give schedule='ZB-H1' instead"),
        ({"num_ranks": 4}, "option 'num_ranks' is not a builder option: the case's own field gives it; give stages=4 instead"),
        ({"num_microbatches": 8},
         "option 'num_microbatches' is not a builder option: the case's own field gives it; give microbatches=8 instead"),
        ({"num_ranks": 4, "chunks": 2},
         "options 'num_ranks', 'chunks' are not builder options: the case's own fields give them; give stages=4, chunks=2 instead"),
        ("frobnicate",
         "options must map the schedule builder's option names to values, e.g. {'optimizer': True}, got 'frobnicate'"),
        ([("optimizer", True)],
         "options must map the schedule builder's option names to values, e.g. {'optimizer': True}, got [('optimizer', True)]"),
        ({1: 2}, "option names must be strings, got 1 in options={1: 2}"),
        ({"frobnicate": 1}, "schedule '1F1B' has no option 'frobnicate'; its options are optimizer"),
        ({"b": 1, "a": 2}, "schedule '1F1B' has no option 'a', 'b'; its options are optimizer"),
    ],
)
def test_bad_options_fail_when_the_case_is_built(options, message):
    got, line = _error(schedule="1F1B", stages=2, microbatches=4, options=options)
    assert got == f"{HERE}:{line}: case '1F1B p=2 m=4': {message}"


def test_options_are_checked_against_the_named_builder():
    got, line = _error(schedule="interleaved", stages=2, microbatches=4, chunks=2, options={"chunk": 2})
    assert got == (f"{HERE}:{line}: case 'Interleaved1F1B p=2 m=4 v=2': schedule 'Interleaved1F1B' has no option 'chunk'; "
                   "its options are optimizer, microbatch_group_size_per_vp_stage")


def test_optimizer_field_and_option_must_agree():
    got, line = _error(schedule="1F1B", stages=2, microbatches=4, optimizer=True, options={"optimizer": False})
    assert got == (f"{HERE}:{line}: case '1F1B p=2 m=4': optimizer=True and options={{'optimizer': False}} disagree; "
                   "give only the optimizer field")


def test_optimizer_and_options_apply_to_a_named_schedule():
    for case in (PipelineCase("1F1B", stages=2, microbatches=4, optimizer=True),
                 PipelineCase("1F1B", stages=2, microbatches=4, options={"optimizer": True}),
                 PipelineCase("1F1B", stages=2, microbatches=4, optimizer=True, options={"optimizer": True})):
        ranks = case.build().ranks
        assert [r[-1].kind if r[-1] else None for r in ranks] == [JobKind.OPT, JobKind.OPT]


def test_build_errors_start_with_the_case_line():
    line = _line(); case = PipelineCase("2F2B", stages=2, microbatches=4, options={"frobnicate": 1})  # noqa: E702 - unknown name: at build
    with pytest.raises(ConfigError, match=rf"^{HERE}:{line}: case '2F2B p=2 m=4': unknown schedule '2F2B'; valid schedules: 1F1B \("):
        case.build()
    line = _line(); case = PipelineCase("DualPipeV", stages=4, microbatches=6)  # noqa: E702
    with pytest.raises(ConfigError) as info:
        case.build()
    assert str(info.value) == f"{HERE}:{line}: case 'DualPipeV p=4 m=6': DualPipeV needs m >= 2p micro-batches (one per stage); got p=4, m=6"
    line = _line(); case = PipelineCase("1F1B", microbatches=6)  # noqa: E702
    with pytest.raises(ConfigError) as info:
        case.build()
    assert str(info.value) == f"{HERE}:{line}: case '1F1B m=6': give stages (p) and microbatches (m) for schedule '1F1B'"


def test_without_a_declaring_line_the_message_is_unprefixed():
    case = PipelineCase("DualPipeV", stages=4, microbatches=6)
    object.__setattr__(case, "declared_at", None)  # as the command line's cases, built inside the harness
    with pytest.raises(ConfigError) as info:
        case.build()
    assert str(info.value) == "case 'DualPipeV p=4 m=6': DualPipeV needs m >= 2p micro-batches (one per stage); got p=4, m=6"


CASES = """
import pytest
from harness.case import PipelineCase

def test_unknown_option(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=4, options={"frobnicate": 1}))

def test_clash(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=4, options={"chunks": 2}))

@pytest.mark.pipeline(schedule="1F1B", stages=2, microbatches=4, options="frobnicate")
def test_marker(pipeline_result):
    pass

def test_builder_constraint(pipeline):
    pipeline(PipelineCase("DualPipeV", stages=4, microbatches=6))
"""


def test_pytest_shows_option_errors_as_the_case_line(pytester):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("--backend=sim", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=3, errors=1)
    result.stdout.fnmatch_lines([
        "*_ ERROR at setup of test_marker _*",
        "ConfigError: test_cases.py:10: case '1F1B p=2 m=4': options must map the schedule builder's option names to values, "
        "e.g. {'optimizer': True}, got 'frobnicate'",
        "*_ test_unknown_option _*",
        "ConfigError: test_cases.py:5: case '1F1B p=2 m=4': schedule '1F1B' has no option 'frobnicate'; its options are optimizer",
        "*_ test_clash _*",
        "ConfigError: test_cases.py:8: case '1F1B p=2 m=4': option 'chunks' is not a builder option: the case's own field gives it; "
        "give chunks=2 instead",
        "*_ test_builder_constraint _*",
        "ConfigError: test_cases.py:15: case 'test_builder_constraint': DualPipeV needs m >= 2p micro-batches (one per stage); "
        "got p=4, m=6",
    ])
    out = result.stdout.str()
    assert "Traceback" not in out and "harness/" not in out and "TypeError" not in out and "(case " not in out
