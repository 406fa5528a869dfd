"""Cases that never produced a run are in results.json (``session.not_run_cases``) and on the page,
beside every case that ran (harness.report.not_run, harness.pytest.not_run)."""

from __future__ import annotations

import html
import json
import re

import numpy  # noqa: F401 - imported before pytester's in-process runs, which drop modules first imported inside them (numpy cannot load twice)
import pytest

from harness.report.not_run import KINDS, not_run_entry, not_run_view
from harness.report.session_fields import session_problem

MIXED = """
import pytest
from harness.case import PipelineCase
from harness.errors import ConfigError, ExecutionError
from harness.model.cost import FixedCost
import harness.pytest.plugin as plugin

def test_good_a(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=3, cost=FixedCost.ms(F=1, B=2)))

def test_unknown_schedule(pipeline):
    pipeline(PipelineCase("Nope<&>", stages=4, microbatches=8))

def test_too_few_microbatches(pipeline):
    pipeline(PipelineCase("DualPipe", stages=4, microbatches=2))

def test_negative_cost(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=3, cost=FixedCost(forward_ns=-5, backward_ns=10)))

def test_typo(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=3, cost=FixedCost(forwrd_ns=1)))

def test_run_fails(pipeline, monkeypatch):
    def boom(*args, **kwargs):
        raise ExecutionError("the device went away")
    monkeypatch.setattr(plugin, "run_case", boom)
    pipeline(PipelineCase("1F1B", stages=2, microbatches=3, name="lost run"))

@pytest.mark.pipeline(schedule="1F1B", stages=0, microbatches=4)
def test_bad_marker(pipeline_result):
    pass

def test_expected_refusal(pipeline):  # passes: not listed
    with pytest.raises(ConfigError):
        pipeline(PipelineCase("Nope", stages=4, microbatches=8))

def test_ran_then_failed(pipeline):  # its case ran: reported among the cases, marked failed; not listed
    pipeline(PipelineCase("FThenB", stages=2, microbatches=3, cost=FixedCost.ms(F=1, B=2)))
    assert False

def test_good_b(pipeline):
    pipeline(PipelineCase("FThenB", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2)))
"""


def test_cases_that_did_not_run_are_in_results_and_on_the_page(pytester):
    pytester.makepyfile(test_mixed=MIXED, test_broken="import no_such_module_of_the_harness_tests\n",
                        test_unclosed="import pytest\n\n\ndef test_x(pipeline):\n    pipeline(schedule='1F1B', stages=2\n")
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "--report-dir=out", "--continue-on-collection-errors",
                                "-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=3, failed=6, errors=3)  # the marker's case fails in setup: an error
    doc = json.loads((pytester.path / "out" / "results.json").read_text())
    # every case that ran is there, in order, and only those
    assert [c["id"] for c in doc["cases"]] == ["test_mixed.py::test_good_a", "test_mixed.py::test_ran_then_failed",
                                               "test_mixed.py::test_good_b"]
    assert [c["outcome"] for c in doc["cases"]] == ["passed", "failed", "passed"]
    entries = doc["session"]["not_run_cases"]
    assert [(e["id"], e["kind"], e.get("site")) for e in entries] == [
        ("test_broken.py", "collection", "test_broken.py:1"),
        ("test_unclosed.py", "collection", "test_unclosed.py:5"),
        ("test_mixed.py::test_unknown_schedule", "config", "test_mixed.py:11"),
        ("test_mixed.py::test_too_few_microbatches", "config", "test_mixed.py:14"),
        ("test_mixed.py::test_negative_cost", "config", "test_mixed.py:17"),
        ("test_mixed.py::test_typo", "test", "test_mixed.py:20"),
        ("test_mixed.py::test_run_fails", "run", "test_mixed.py:26"),
        ("test_mixed.py::test_bad_marker", "config", "test_mixed.py:28"),
    ]
    by_id = {e["id"]: e for e in entries}
    assert by_id["test_broken.py"]["error"] == "ModuleNotFoundError: No module named 'no_such_module_of_the_harness_tests'"
    assert by_id["test_unclosed.py"]["error"] == "SyntaxError: '(' was never closed"
    assert by_id["test_mixed.py::test_unknown_schedule"]["error"].startswith(
        "ConfigError: test_mixed.py:11: case 'test_unknown_schedule': schedule name 'Nope<&>' holds the characters")
    assert "DualPipe needs an even p and an even m >= 2p" in by_id["test_mixed.py::test_too_few_microbatches"]["error"]
    assert by_id["test_mixed.py::test_negative_cost"]["error"] == "ConfigError: cost model: forward_ns must be positive, got -5"
    assert by_id["test_mixed.py::test_typo"]["error"] == "TypeError: FixedCost.__init__() got an unexpected keyword argument 'forwrd_ns'"
    assert by_id["test_mixed.py::test_run_fails"]["error"] == "ExecutionError: the device went away"
    assert by_id["test_mixed.py::test_run_fails"]["label"] == "lost run"  # the case's own name
    assert by_id["test_mixed.py::test_bad_marker"]["error"].startswith("ConfigError: test_mixed.py:28: ")

    page = (pytester.path / "out" / "index.html").read_text()
    block = re.search(r'<div class="failnote" id="not-run">(.*?)</div>', page, re.S)
    assert block is not None
    assert block.group(1).startswith("✗ 8 case(s) did not run")
    text = html.unescape(re.sub(r"<[^>]+>", "", block.group(1)))
    for e in entries:
        assert e["error"] in text and e["id"] in text
    assert "Nope<&>" not in page and "Nope&lt;&amp;&gt;" in block.group(1)  # the error text is escaped
    assert text.count("configuration refused at ") == 4 and text.count("file failed to collect at ") == 2
    assert text.count("run failed at ") == 1 and text.count("test failed before its case ran at ") == 1
    for case in ("test_good_a", "test_ran_then_failed", "test_good_b"):  # the cases that ran are all on the page still
        assert f"test_mixed.py::{case}" in page
    # the terminal's summary says so too, and its last line
    result.stdout.fnmatch_lines(["6 case(s) did not run (configuration refused, run failed, test failed before its case ran;*"])
    assert result.stdout.lines[-1].endswith("names these files among the cases that did not run")


def test_a_run_with_every_case_good_has_no_not_run_field(pytester):
    pytester.makepyfile(test_ok="""
from harness.case import PipelineCase

def test_ok(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=3))
""")
    pytester.runpytest("--profile-jobs", "--backend=sim", "--report-dir=out", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    doc = json.loads((pytester.path / "out" / "results.json").read_text())
    assert "not_run_cases" not in doc["session"]
    assert 'id="not-run"' not in (pytester.path / "out" / "index.html").read_text()


def test_not_run_view_groups_by_kind_and_fills_absent_fields():
    session = {"not_run_cases": [
        not_run_entry("a.py::t1", "t1", "test", "TypeError: x"),
        not_run_entry("b.py", "b.py", "collection", "SyntaxError: y", "b.py:3"),
        {"id": "a.py::t2", "kind": "future-kind"},
        not_run_entry("a.py::t3", "case three", "config", "ConfigError: z", "a.py:9"),
    ]}
    rows = not_run_view(session)
    assert [r["label"] for r in rows] == ["b.py", "case three", "t1", "a.py::t2"]
    assert [r["kind"] for r in rows] == [KINDS["collection"], KINDS["config"], KINDS["test"], "future-kind"]
    assert [r["id"] for r in rows] == ["", "a.py::t3", "a.py::t1", ""]  # the id only where it differs from the label
    assert [r["site"] for r in rows] == ["b.py:3", "a.py:9", "", ""]
    assert rows[3]["error"] == ""
    assert not_run_view({}) == []
    with pytest.raises(ValueError, match="not-run case kind 'oops'"):
        not_run_entry("x", "x", "oops", "e")


def test_a_wrong_typed_not_run_entry_is_refused_by_name():
    assert session_problem({"not_run_cases": [{"id": "x", "error": 3}]}) == (
        "session.not_run_cases[0].error is 3 (int), expected a string")
    assert session_problem({"not_run_cases": "x"}) == "session.not_run_cases is 'x' (str), expected a list of objects"
    assert session_problem({"not_run_cases": [not_run_entry("x", "x", "run", "e", "f.py:1")]}) is None
