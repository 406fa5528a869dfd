"""pytest-benchmark's --benchmark-compare / --benchmark-compare-fail work on our step times."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pytest_benchmark")

CASE = """
import os
from harness.case import PipelineCase
from harness.model.cost import FixedCost

def test_1f1b(pipeline):
    pipeline(PipelineCase("1F1B", stages=4, microbatches=8, cost=FixedCost.ms(F=float(os.environ["F_MS"]), B=2)))
"""


@pytest.mark.slow
def test_saved_run_then_compare_and_fail(pytester, monkeypatch):
    pytester.makepyfile(test_case=CASE)
    storage = pytester.path / "bench"
    common = ["--backend=sim", "--profile-steps=1:4", f"--benchmark-storage=file://{storage}", "-p", "no:cacheprovider"]

    monkeypatch.setenv("F_MS", "1")
    first = pytester.runpytest_subprocess(*common, "--benchmark-save=base")
    first.assert_outcomes(passed=1)
    saved = list(storage.rglob("0001_base.json"))
    assert len(saved) == 1
    bench = json.loads(saved[0].read_text())["benchmarks"][0]
    # Step times on the sim clock: (m+p-1)(F+B) = 11 * 3 ms = 33 ms, three recorded steps.
    assert bench["stats"]["median"] == pytest.approx(0.033) and bench["stats"]["rounds"] == 3
    assert bench["extra_info"]["schedule"] == "1F1B"

    monkeypatch.setenv("F_MS", "1.1")  # 11 * 3.1 ms = 34.1 ms: +3.3%
    ok = pytester.runpytest_subprocess(*common, "--benchmark-compare=0001", "--benchmark-compare-fail=median:5%")
    ok.assert_outcomes(passed=1)
    assert ok.ret == 0

    bad = pytester.runpytest_subprocess(*common, "--benchmark-compare=0001", "--benchmark-compare-fail=median:3%")
    assert bad.ret != 0
    output = bad.stdout.str() + bad.stderr.str()
    assert "Performance has regressed" in output
    assert "median" in output.lower()
