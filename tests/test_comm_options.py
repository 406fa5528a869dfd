"""--comm-model in pytest and on the command line; the report names each case's model."""

from __future__ import annotations

import json

import numpy  # noqa: F401 - imported before pytester's in-process runs (numpy cannot load twice)

from harness.cli import main

CASES = """
from harness.case import PipelineCase
from harness.model.cost import FixedCost

COST = FixedCost(forward_ns=1_000_000, backward_ns=2_000_000, p2p_latency_ns=100_000)

def test_default(pipeline):
    r = pipeline(PipelineCase("FThenB", stages=2, microbatches=1, cost=COST))
    # edge by hand: F [0,1] ms, F [1.1,2.1], B [2.1,4.1], B [4.2,6.2]
    assert r.comm_model == "edge" and r.metrics.step_time_median_ns == 6_200_000

def test_own(pipeline):
    r = pipeline(PipelineCase("FThenB", stages=2, microbatches=1, cost=COST, comm_model="stream"))
    assert r.comm_model == "stream"
"""


def test_pytest_comm_model_option_sets_cases_that_name_none(pytester):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "--comm-model=edge", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*backend*comm*", "*test_default*sim/virtual*edge*", "*test_own*sim/virtual*stream*"])
    doc = json.loads((pytester.path / "reports" / "results.json").read_text())
    assert [c["comm_model"] for c in doc["cases"]] == ["edge", "stream"]
    html = (pytester.path / "reports" / "index.html").read_text()
    assert "comm edge" in html and "comm stream" in html


def test_pytest_comm_model_option_is_checked(pytester):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("--backend=sim", "--comm-model=edges", "-p", "no:cacheprovider")
    result.stderr.fnmatch_lines(["*--comm-model must be one of free*"])
    result = pytester.runpytest("--backend=cpu", "--comm-model=edge", "-p", "no:cacheprovider")
    result.stderr.fnmatch_lines(["*use comm_model 'stream'*"])


def test_show_comm_model(capsys):
    assert main(["show", "FThenB", "-p", "2", "-m", "1", "--p2p-latency-ms", "0.1", "--comm-model", "edge"]) == 0
    assert "step time 6.200 ms (analytic timeline, comm model edge)" in capsys.readouterr().out
    assert main(["show", "FThenB", "-p", "2", "-m", "1", "--p2p-latency-ms", "0.1", "--comm-model", "free"]) == 0
    assert "step time 6.000 ms (analytic timeline, comm model free)" in capsys.readouterr().out
    assert main(["show", "FThenB", "-p", "2", "-m", "1", "--p2p-latency-ms", "0.1"]) == 0
    assert "comm model stream" in capsys.readouterr().out
