"""A bad case's error names the file and line that declared it, and pytest shows it without a traceback into the harness."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy  # noqa: F401 - imported before pytester's in-process runs, which drop modules first imported inside them (numpy cannot load twice)
import pytest

from harness.case import PipelineCase, case_field_names
from harness.cli import main
from harness.errors import ConfigError

HERE = Path(__file__).name


def _line() -> int:
    """The caller's line number."""
    return sys._getframe(1).f_lineno


def _make_case(**fields: object) -> PipelineCase:
    return PipelineCase("1F1B", **fields)  # type: ignore[arg-type]


@pytest.fixture
def in_tests_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).parent)


@pytest.mark.usefixtures("in_tests_dir")
@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"stages": 2, "microbatches": 0}, "case '1F1B p=2 m=0': microbatches must be a positive integer, got 0"),
        ({"stages": -1, "microbatches": 4}, "case '1F1B p=-1 m=4': stages must be a positive integer, got -1"),
        ({"stages": 2, "microbatches": 4, "chunks": True}, "case '1F1B p=2 m=4': chunks must be a positive integer, got True"),
        ({"stages": 2, "microbatches": 4, "cost": "1ms"},
         "case '1F1B p=2 m=4': cost must be a cost model such as FixedCost.ms(F=1, B=2) or TransformerCost(...), got '1ms'"),
        # a truthy "no" must not add OPT or send/receive jobs
        ({"stages": 2, "microbatches": 4, "optimizer": "no"}, "case '1F1B p=2 m=4': optimizer must be True or False, got 'no'"),
        ({"stages": 2, "microbatches": 4, "optimizer": 1}, "case '1F1B p=2 m=4': optimizer must be True or False, got 1"),
        ({"stages": 2, "microbatches": 4, "options": {"optimizer": "yes"}},
         "case '1F1B p=2 m=4': option 'optimizer' of schedule '1F1B' must be True or False, got 'yes'"),
        ({"stages": 2, "microbatches": 4, "comm": "no"},
         "case '1F1B p=2 m=4': comm must be True, False or None (insert send/receive jobs when transfers cost time), got 'no'"),
        ({"stages": 2, "microbatches": 4, "comm": 0},
         "case '1F1B p=2 m=4': comm must be True, False or None (insert send/receive jobs when transfers cost time), got 0"),
        ({"stages": 2, "microbatches": 4, "name": 3}, "case: name must be a string (a label for reports) or None, got 3"),
        ({"stages": 2, "microbatches": 4, "chunks": None},
         "case '1F1B p=2 m=4 v=None': chunks must be a positive integer (1, the default, for one chunk per rank), got None"),
    ],
)
def test_construction_error_starts_with_the_declaring_line(fields, message):
    with pytest.raises(ConfigError) as info:
        line = _line(); PipelineCase("1F1B", **fields)  # noqa: E702 - the line number is the point
    assert str(info.value) == f"{HERE}:{line}: {message}"


@pytest.mark.usefixtures("in_tests_dir")
@pytest.mark.parametrize(("schedule", "name", "message"), [
    (7, None, "a case: schedule must be a name, a Schedule or a path, got int 7"),  # was "case '': ..."
    (None, "mine", "case 'mine': schedule must be a name, a Schedule or a path, got NoneType None"),
])
def test_a_schedule_of_the_wrong_type_is_named_with_its_value(schedule, name, message):
    with pytest.raises(ConfigError) as info:
        line = _line(); PipelineCase(schedule, name=name)  # type: ignore[arg-type]  # noqa: E702
    assert str(info.value) == f"{HERE}:{line}: {message}"


@pytest.mark.usefixtures("in_tests_dir")
def test_declaration_site_is_the_constructing_code_and_survives_replace():
    line = _line(); case = PipelineCase("1F1B", stages=2, microbatches=4)  # noqa: E702
    assert case.declared_at == f"{HERE}:{line}"
    assert replace(case, name="renamed").declared_at == f"{HERE}:{line}"
    assert replace(case, declared_at="elsewhere.py:3") == case  # not compared
    assert "declared_at" not in repr(case)
    helper_line = _make_case.__code__.co_firstlineno + 1  # a helper that builds cases: its own line
    assert _make_case(stages=2, microbatches=4).declared_at == f"{HERE}:{helper_line}"
    with pytest.raises(ConfigError, match=r"^given\.py:7: case '1F1B p=2 m=0': microbatches"):
        PipelineCase("1F1B", stages=2, microbatches=0, declared_at="given.py:7")


def test_from_fields_refuses_what_init_would_raise_a_type_error_for():
    fields = ", ".join(case_field_names())
    assert fields == ("schedule, stages, microbatches, chunks, cost, workload, comm, optimizer, options, name, device_options, "
                      "memory_limit_bytes, comm_model, comm_placement")
    case = PipelineCase.from_fields(("1F1B", 2), {"microbatches": 4}, declared_at="m.py:3", source="pipeline marker")
    assert (case.stages, case.microbatches, case.declared_at) == (2, 4, "m.py:3")
    with pytest.raises(ConfigError) as info:
        PipelineCase.from_fields(tuple(range(15)), {}, declared_at="m.py:3", source="pipeline marker")
    assert str(info.value) == (f"m.py:3: pipeline marker: takes at most 14 fields by position, got 15: {tuple(range(15))!r}; "
                               f"valid fields: {fields}")
    with pytest.raises(ConfigError) as info:
        PipelineCase.from_fields((), {"schedule": "1F1B", "v": 2, "zzz": 1}, declared_at=None, source="pipeline marker")
    assert str(info.value) == f"pipeline marker: unknown fields 'v' (did you mean 'chunks'?), 'zzz'; valid fields: {fields}"
    with pytest.raises(ConfigError) as info:  # the case's own checks still speak for the values
        PipelineCase.from_fields(("1F1B", 0, 4), {}, declared_at="m.py:3", source="pipeline marker")
    assert str(info.value) == "m.py:3: case '1F1B p=0 m=4': stages must be a positive integer, got 0"


def test_outside_the_current_folder_the_path_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _line(); case = PipelineCase("1F1B", stages=2, microbatches=4)  # noqa: E702
    assert case.declared_at == f"{Path(__file__).resolve()}:{line}"


def test_command_line_errors_carry_no_harness_location(capsys):
    assert main(["show", "1F1B", "-p", "4", "-m", "4", "-v", "2"]) == 2
    assert capsys.readouterr().err.strip() == ("error: case '1F1B p=4 m=4 v=2': schedule '1F1B' has one chunk per rank; got v=2 "
                                               "(use an interleaved schedule for v > 1)")


CASES = """
import pytest
from harness.case import PipelineCase
from harness.model.cost import FixedCost

def test_zero_microbatches(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=0))

def test_keywords(pipeline):
    pipeline(schedule="1F1B", stages=0, microbatches=4)

UNKNOWN = PipelineCase("2F2B", stages=2, microbatches=4)

def test_declared_elsewhere(pipeline):
    pipeline(UNKNOWN)

@pytest.mark.pipeline(schedule="1F1B", stages=3, microbatches=0)
def test_marker(pipeline_result):
    pass

@pytest.mark.pipeline(schedule="4F4B", stages=3, microbatches=3)
def test_marker_unknown(pipeline_result):
    pass

def test_bad_cost(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2, cost=FixedCost.ms(F=-1, B=2)))

@pytest.mark.xfail(raises=ValueError, strict=True)
def test_expected_to_fail(pipeline):
    PipelineCase("1F1B", stages=2, microbatches=0)
"""


def test_pytest_shows_the_case_line_not_a_traceback(pytester):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=4, errors=2, xfailed=1)
    result.stdout.fnmatch_lines([
        "*_ ERROR at setup of test_marker _*",
        "ConfigError: test_cases.py:16: case '1F1B p=3 m=0': microbatches must be a positive integer, got 0",
        "*_ ERROR at setup of test_marker_unknown _*",
        "ConfigError: test_cases.py:20: case 'test_marker_unknown': unknown schedule '4F4B'; valid schedules: *",
        "*_ test_zero_microbatches _*",
        "ConfigError: test_cases.py:6: case '1F1B p=2 m=0': microbatches must be a positive integer, got 0",
        "*_ test_keywords _*",
        "ConfigError: test_cases.py:9: case '1F1B p=0 m=4': stages must be a positive integer, got 0",
        "*_ test_declared_elsewhere _*",
        "ConfigError: test_cases.py:11: case 'test_declared_elsewhere': unknown schedule '2F2B'; valid schedules: *",
        "(case run at test_cases.py:14)",  # declared at is the message's own start
        "*_ test_bad_cost _*",
        "ConfigError: cost model: F must be positive, got -1 ms",
        "(raised at test_cases.py:25)",
        "*short test summary info*",
        "FAILED test_cases.py::test_zero_microbatches - ConfigError: test_cases.py:6*",
    ])
    out = result.stdout.str()
    assert "harness/" not in out and "Traceback" not in out and "PytestBenchmarkWarning" not in out
    assert "raise self._error" not in out and "case declared at" not in out


def test_fulltrace_keeps_the_traceback(pytester):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("--backend=sim", "--fulltrace", "-k", "zero_microbatches", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*harness/case.py:*: ConfigError"])


def test_cases_are_hashable_and_equal_cases_hash_alike():
    from harness.model.cost import FixedCost
    from harness.schedule import build_schedule

    fields = {"options": {"optimizer": True}, "device_options": {"cuda": {"devices": [0, 1]}}, "cost": FixedCost.ms(F=1, B=2)}
    a = PipelineCase("1F1B", 2, 4, **fields)  # type: ignore[arg-type]
    b = PipelineCase("1F1B", 2, 4, **fields, declared_at="elsewhere.py:3")  # type: ignore[arg-type]
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    c = replace(a, microbatches=8)
    assert {a: 1, c: 2}[c] == 2
    given = build_schedule("1F1B", 2, 4)
    assert hash(PipelineCase(given)) == hash(PipelineCase(build_schedule("1F1B", 2, 4)))
    assert len({PipelineCase(Path("x.csv")), PipelineCase("x.csv")}) == 1  # a path-like string is a Path


def test_a_custom_cost_models_error_names_the_case_once():
    import math

    from harness import PipelineCase
    from harness.errors import ConfigError
    from harness.runner import run_case

    class Weird:
        def duration_ns(self, job, num_stages):
            return math.nan if job.kind.is_comm else 1000

        def flops(self, job, num_stages):
            return 0.0

        def nbytes(self, job, num_stages):
            return 0

        def is_uniform(self, num_stages):
            return True

        def describe(self):
            return {"model": "Weird"}

    case = PipelineCase("1F1B", stages=2, microbatches=2, cost=Weird(), name="weird")  # comm=None asks the transfer's cost
    with pytest.raises(ConfigError) as info:
        run_case(case, "sim")
    message = str(info.value)
    site = f"{Path(__file__).relative_to(Path.cwd())}:" if Path(__file__).is_relative_to(Path.cwd()) else ""
    assert "case 'weird': cost model Weird: duration_ns(0SEND_F0) gave nan ns" in message, message
    assert message.count("case 'weird'") == 1 and message.count(": case ") <= 1 and (not site or message.startswith(site)), message
