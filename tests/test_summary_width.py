"""The pytest summary fits the terminal (issue 26 items 4 and 5): COLUMNS=120 and 80, long test ids, skipped cases said
without -rs, no cut that makes two cases read the same, and pytest-benchmark's table narrowed to the width."""

from __future__ import annotations

import re

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
    assert section[1] == "every case: p 4 · m 8 · backend sim/virtual · comm stream · steps 1 · CI exact · vs sim —"
    header = section[2].split()
    assert header == ["case", "sched", "v", "step", "ms", "bubble/th", "span", "mem"]
    rows = section[3:9]
    # the test's parameters stay when its name is cut; the schedule is whole
    assert [r.split()[0].rsplit("…", 1)[-1] for r in rows] == [
        "[1-ZB-V-2]", "[1-Interleaved1F1B-2]", "[1-ZB-H1-1]", "[2-ZB-V-2]", "[2-Interleaved1F1B-2]", "[2-ZB-H1-1]"]
    assert [r.split()[1] for r in rows] == ["ZB-V", "Interleaved1F1B", "ZB-H1"] * 2
    assert "(case cut to fit 120 columns with …; the report's page has the table whole)" in section


NEAR = """
import pytest
from harness import PipelineCase
from harness.model.cost import FixedCost

COST = FixedCost.ms(F=1, B=2, mem_F=2**28, mem_static=2**30, p2p_latency_ns=20_000)

@pytest.mark.parametrize("s", ["1F1B", "ZB-H1", "Interleaved1F1B"])
def test_gpt_over_infiniband(pipeline, s):
    pipeline(PipelineCase(s, stages=4, microbatches=8, chunks=2 if s.startswith("Inter") else 1, cost=COST))

@pytest.mark.parametrize("s", ["1F1B", "ZB-H1"])
def test_gpt_over_infiniband_edge_model(pipeline, s):
    pipeline(PipelineCase(s, stages=4, microbatches=8, cost=COST, comm_model="edge"))
"""


def test_the_summary_fits_80_columns_and_no_cut_makes_two_cases_read_the_same(pytester, monkeypatch):
    # names that read the same cut at their end with their parameters kept (test_gpt_ov…[1F1B] twice), and cases that
    # differ only in their comm model (sim/virtual stream against sim/virtual edge: cut at 10, both sim/virtu…)
    monkeypatch.setenv("COLUMNS", "80")
    pytester.makepyfile(test_cases=NEAR)
    # pytest's own warning that the in-process run cannot rewrite the already imported plugin names this checkout's
    # path (as wide as the checkout is deep): not the harness's output, so left out
    result = pytester.runpytest("-q", "--profile-jobs", "--backend=sim", "-p", "no:cacheprovider", "-p", "no:benchmark",
                                "-W", "ignore::pytest.PytestAssertRewriteWarning")
    result.assert_outcomes(passed=5)
    assert max(len(line) for line in result.outlines) <= 80, "\n".join(line for line in result.outlines if len(line) > 80)
    section = _section(result.outlines)
    assert section[1] == "every case: p 4 · m 8 · backend sim/virtual · steps 1 · CI exact · vs sim —"
    assert section[2].split() == ["case", "sched", "v", "comm", "step", "ms", "bubble/th", "span", "mem"]
    rows = [line.split() for line in section[3:8]]
    assert len({r[0] for r in rows}) == 5  # five cases, five names
    assert [r[0] for r in rows] == ["test_gpt_ov…niband[1F1B]", "test_gpt_ov…iband[ZB-H1]", "test_gpt_ov…rleaved1F1B]",
                                    "test_gpt_ov…_model[1F1B]", "test_gpt_ov…model[ZB-H1]"]  # cut in the middle: the ends tell them apart
    assert [r[3] for r in rows] == ["stream"] * 3 + ["edge"] * 2  # the comm model whole
    assert [r[4] for r in rows] == ["33.600", "27.440", "57.880", "33.320", "27.240"]  # ms, in the header
    assert "(case, schedule cut to fit 80 columns with …; the report's page has the table whole)" in re.sub(r"\s+", " ", " ".join(section))


def _benchmark_header(lines: list[str]) -> list[str]:
    at = next(k for k, line in enumerate(lines) if " benchmark: " in line and line.startswith("-"))
    return lines[at + 1].split()


def test_the_default_run_with_pytest_benchmark_fits_120_columns(pytester, monkeypatch):
    # issue 26 item 5: pytest-benchmark's table of every column was 219 characters wide for the cases/ folder
    monkeypatch.setenv("COLUMNS", "120")
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("-q", "--profile-jobs", "--backend=sim", "-p", "no:cacheprovider",
                                "-W", "ignore::pytest.PytestAssertRewriteWarning")  # as above: pytest's, not ours
    result.assert_outcomes(passed=6, skipped=1)
    assert max(len(line) for line in result.outlines) <= 120, "\n".join(line for line in result.outlines if len(line) > 120)
    header = _benchmark_header(result.outlines)
    assert header[:4] == ["Name", "(time", "in", "ms)"] and "Median" in header
    kept = header[4:]
    assert kept == [c for c in ("Min", "Max", "Mean", "StdDev", "Median", "IQR", "Outliers", "OPS", "Rounds", "Iterations") if c in kept]
    assert 1 <= len(kept) < 10  # some, not all: all ten do not fit
    note = next(line for line in result.outlines if line.startswith("pipeline-harness: pytest-benchmark's table shows "))
    assert f"shows {', '.join(c.lower() for c in kept)}: the columns that fit 120 columns (of " in note


def test_columns_the_user_chose_are_left_as_they_are(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("-q", "--profile-jobs", "--backend=sim", "-p", "no:cacheprovider", "--benchmark-columns=min,max,mean,stddev,ops")
    result.assert_outcomes(passed=6, skipped=1)
    assert _benchmark_header(result.outlines)[4:] == ["Min", "Max", "Mean", "StdDev", "OPS"]  # wider than 120: the user's choice
    assert not any("pytest-benchmark's table shows" in line for line in result.outlines)


def test_too_narrow_a_terminal_is_said_and_no_case_is_cut_past_telling_apart() -> None:
    cases = [run_case(PipelineCase(s, stages=4, microbatches=8, cost=FixedCost.ms(F=1, B=2)), "sim", range(0, 1),
                      case_id=f"t.py::test_a_long_name_shared_by_both_cases_{k}[{s}]") for k, s in enumerate(("1F1B", "1F1B", "ZB-H1"))]
    lines = case_table(cases, 40)
    head = next(k for k, line in enumerate(lines) if line.startswith("case "))
    rows = [line.split()[0] for line in lines[head + 1:head + 4]]
    assert len(set(rows)) == 3 and all(len(r) >= 14 for r in rows), rows  # each whole enough to read, all three apart
    note = " ".join(x.strip() for x in lines[head + 4:head + 8])
    assert note.startswith("(the table needs ") and "more than 40: cut further, its cells would no longer be read or tell the " in note


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
