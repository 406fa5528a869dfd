"""The pytest summary fits the terminal (issue 26 item 4): COLUMNS=120, long test ids, skipped cases said without -rs."""

from __future__ import annotations

import numpy  # noqa: F401 - imported before pytester's in-process runs, which drop modules first imported inside them
import pytest

from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.report.summary import case_table
from harness.runner import run_case

CASES = """
import pytest
from harness import PipelineCase
from harness.model.cost import FixedCost

@pytest.mark.parametrize("s,v", [("ZB-V", 2), ("Interleaved1F1B", 2), ("ZB-H1", 1)])
@pytest.mark.parametrize("mem", [1, 2])
def test_schedule_by_time_and_memory_with_a_rather_long_name(pipeline, s, v, mem):
    cost = FixedCost.ms(F=1, B=2, mem_F=2**30 * mem, mem_static=2**31)
    pipeline(PipelineCase(s, stages=4, microbatches=8, chunks=v, cost=cost, memory_limit_bytes=9 * 2**30,
                          name=f"{s} with a name its user gave it, {mem}"))

def test_needs_a_gpu(pipeline):
    pytest.skip("needs a GPU: no CUDA device here")
"""


def _section(lines: list[str]) -> list[str]:
    start = next(i for i, line in enumerate(lines) if "pipeline cases" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("reports: "))
    return [line for line in lines[start:end + 1] if line.strip()]  # pytest's terminal writer may put a blank line under the title


def test_the_summary_fits_120_columns_and_says_why_a_case_was_skipped(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "-p", "no:cacheprovider", "-p", "no:benchmark")
    result.assert_outcomes(passed=6, skipped=1)
    section = _section(result.outlines)
    assert max(len(line) for line in section) <= 120, "\n".join(line for line in section if len(line) > 120)
    assert "skipped: test_needs_a_gpu: needs a GPU: no CUDA device here" in section  # without -rs
    assert section[1] == "every case: p 4 · m 8 · backend comm sim/virtual stream · steps 1 · CI exact · vs sim —"
    header = section[2].split()
    assert header == ["case", "sched", "v", "step", "bubble/th", "span", "mem"]
    rows = section[3:9]
    # the test's parameters stay when its name is cut; the schedule is whole
    assert [r.split()[0].rsplit("…", 1)[-1] for r in rows] == [
        "[1-ZB-V-2]", "[1-Interleaved1F1B-2]", "[1-ZB-H1-1]", "[2-ZB-V-2]", "[2-Interleaved1F1B-2]", "[2-ZB-H1-1]"]
    assert [r.split()[1] for r in rows] == ["ZB-V", "Interleaved1F1B", "ZB-H1"] * 2
    assert "(case cut to fit 120 columns with …; the report's page has the table whole)" in section


def test_a_table_that_fits_is_as_before() -> None:
    r = run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=FixedCost.ms(F=1, B=2)), "sim", range(0, 1), case_id="t.py::test_a")
    wide, fitted = case_table([r]), case_table([r], 200)
    assert wide[:2] == fitted[:2]
    assert wide[0].split("  ")[0] == "case" and "step median" in wide[0]
    narrow = case_table([r, r], 70)
    assert all(len(line) <= 70 for line in narrow), [line for line in narrow if len(line) > 70]


@pytest.mark.parametrize(("full", "test", "width", "expected"), [
    ("test_a[x] (my name)", "test_a[x]", 30, "test_a[x] (my name)"),
    ("test_a[x] (my name)", "test_a[x]", 12, "test_a[x]"),
    ("test_abcdefghij[ZB-V-1] (n)", "test_abcdefghij[ZB-V-1]", 16, "test_ab…[ZB-V-1]"),
    ("test_abcdefghijklmnop", "test_abcdefghijklmnop", 9, "test…mnop"),
])
def test_a_case_name_keeps_its_parameters_when_cut(full: str, test: str, width: int, expected: str) -> None:
    from harness.report.summary import _cut_name

    assert _cut_name(full, test, width) == expected
    assert len(expected) <= width
