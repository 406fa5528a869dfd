"""--trace-steps past the steps a case recorded says so, naming the case and its recorded steps (pytest, report, run),
and the trace holds every recorded step."""

from __future__ import annotations

import json
import warnings

import numpy  # noqa: F401 - imported before pytester's in-process runs (numpy cannot load twice)
import pytest

from harness.case import PipelineCase
from harness.cli import main
from harness.report.output import TraceOptions, TraceStepsWarning, trace_steps_note
from harness.report.render import write_report
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case


def _case(case_id: str, steps: range) -> dict:
    return case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2), "sim", steps, case_id=case_id))


def test_the_note_names_each_short_case_and_its_steps():
    assert trace_steps_note(None, {"a": 1}) is None
    assert trace_steps_note(2, {"a": 2, "b": 3}) is None  # as many as recorded, or fewer: nothing to say
    assert trace_steps_note(3, {"a": 2, "b": 3}) == "--trace-steps=3 asks for more steps than case 'a' recorded (2); its trace holds all 2 of them"
    assert trace_steps_note(3, {"a": 1}) == "--trace-steps=3 asks for more steps than case 'a' recorded (1); its trace holds its one step"
    many = {f"c{i}": 1 for i in range(7)}
    assert trace_steps_note(4, many) == ("--trace-steps=4 asks for more steps than 7 cases recorded (steps per case: 'c0' (1), 'c1' (1), 'c2' (1), "
                                         "'c3' (1), 'c4' (1), ... (2 more)); their traces hold every step they recorded")


def test_report_says_it_once_and_traces_every_recorded_step(tmp_path, capsys):
    src = tmp_path / "results.json"
    src.write_text(json.dumps(results_document([_case("two", range(0, 2)), _case("three", range(0, 3))])))
    assert main(["report", str(src), "--out", str(tmp_path / "out"), "--trace-steps=3", "-q", "--no-hta"]) == 0
    assert capsys.readouterr().err == "warning: --trace-steps=3 asks for more steps than case 'two' recorded (2); its trace holds all 2 of them\n"
    trace = json.loads((tmp_path / "out" / "traces" / "two.json").read_text())
    assert [e["name"] for e in trace["traceEvents"] if e.get("cat") == "step"] == ["ProfilerStep#0", "ProfilerStep#1"]


def test_from_python_it_is_a_trace_steps_warning(tmp_path):
    doc = results_document([_case("one", range(0, 1))])
    with pytest.warns(TraceStepsWarning, match=r"^--trace-steps=2 asks for more steps than case 'one' recorded \(1\)"):
        write_report(tmp_path / "a", doc, hta=False, trace_options=TraceOptions(steps=2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TraceStepsWarning)
        write_report(tmp_path / "b", doc, hta=False, trace_options=TraceOptions(steps=1))


def test_run_says_it_as_a_line(tmp_path, capsys):
    assert main(["run", "1F1B", "-p", "2", "-m", "2", "--backend", "sim", "--trace-steps=4", "--out", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    assert "warning: --trace-steps=4 asks for more steps than case '1F1B p=2 m=2' recorded (1); its trace holds its one step\n" in err


def test_pytest_says_it_in_the_summary(pytester):
    pytester.makepyfile(test_cases="""
from harness.case import PipelineCase
from harness.model.cost import FixedCost

def test_case(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2, cost=FixedCost.ms(F=1, B=2)))
""")
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "--trace-steps=5", "-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["warning: --trace-steps=5 asks for more steps than case 'test_cases.py::test_case' recorded (1); "
                                 "its trace holds its one step"])


def test_a_trace_cut_to_its_first_steps_says_so_in_the_trace_and_on_the_page(tmp_path):
    # neither the trace's otherData nor the page said that 3 of 5 steps were left out of the trace
    doc = results_document([_case("five", range(0, 5)), _case("one", range(0, 1))])
    with pytest.warns(TraceStepsWarning, match="than case 'one' recorded"):
        files = write_report(tmp_path / "out", doc, trace_options=TraceOptions(steps=2), hta=False)
    trace = json.loads(files.traces["five"].read_text())
    assert [e["name"] for e in trace["traceEvents"] if e.get("cat") == "step"] == ["ProfilerStep#0", "ProfilerStep#1"]
    assert trace["otherData"]["traced_steps"] == ("the first 2 of the case's 5 recorded steps (--trace-steps 2); results.json, "
                                                  "the HTA files and the report page hold all 5")
    assert "traced_steps" not in json.loads(files.traces["one"].read_text())["otherData"]  # nothing was cut
    page = files.index.read_text()
    assert page.count('<span class="hint">first 2 of 5 steps</span>') == 1
    assert "it holds the first 2 of 5 steps (--trace-steps): this page and results.json hold them all" in page
    assert len(json.loads((tmp_path / "out" / "results.json").read_text())["cases"][0]["steps"]) == 5
