"""Measuring until stable through pytest: window options, flags in the summary and results, pytest-benchmark's gates,
and the benchmark cases on a busy machine."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import time
from pathlib import Path

import numpy  # noqa: F401 - loaded before pytester's in-process runs (numpy cannot be imported twice)
import pytest

CASE = """
from harness.case import PipelineCase
from harness.model.cost import FixedCost

def test_case(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=3, cost=FixedCost.ms(F={f}, B=2)))
"""

GEMMS = """
from harness.case import PipelineCase
from harness import TransformerCost

def test_gemms(pipeline):
    small = TransformerCost(hidden_size=64, seq_len=32, micro_batch_size=1, num_layers=4, tflops=0.05)
    pipeline(PipelineCase("1F1B", stages=4, microbatches=4, cost=small, workload="compute"))
"""


def test_timed_cases_measure_until_stable_and_say_why_they_stopped(pytester):
    pytester.makepyfile(test_cases=CASE.format(f=1))
    result = pytester.runpytest("--profile-jobs", "--backend=cpu", "--profile-min-steps=4", "--profile-max-time=3s",
                                "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["pipeline-harness: cpu backend (requested); measuring until stable: median step time to 1% "
                                 "after 1 warm-up (4-1000 steps, 3 s per case) to reports/"])
    doc = json.loads((pytester.path / "reports" / "results.json").read_text())
    (case,) = doc["cases"]
    window, stats = case["window"], case["metrics"]["stats"]["step_time_ns"]
    assert window["reason"] in ("target", "budget") and window["recorded_steps"] == len(case["steps"]) >= 4
    assert window["target"] == 0.01 and window["min_steps"] == 4 and window["max_time_ns"] == 3 * 10**9
    assert stats["n"] == len(case["steps"]) and stats["ci_low"] <= stats["median"] <= stats["ci_high"]
    assert stats["median"] == case["metrics"]["step_time_median_ns"]
    assert len(case["metrics"]["stats"]["idle_ns"]) == 2 and case["metrics"]["stats"]["bubble_ratio"]["n"] == stats["n"]
    assert case["fidelity"]["predicted_step_ns"] == 12_000_000  # (m+p-1)(F+B) = 4 x 3 ms
    assert case["usage"]["cores"] >= 1 and "loadavg_before" in case["usage"]
    env = doc["session"]["environment"]
    assert env["cpu_count"] >= 1 and env["python"] and env["numpy"] and isinstance(env["blas"], list)
    assert doc["session"]["profile_steps"] == "adaptive: 1 warm-up, target 1%, 4-1000 steps, 3 s"
    if window["reason"] == "budget":
        assert any(f["kind"] == "unstable" for f in case["flags"])


def test_sim_records_one_step_and_says_it_is_exact(pytester):
    pytester.makepyfile(test_cases=CASE.format(f=1))
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*recording 1 step after 1 warm-up (sim is exact) to reports/"])
    (case,) = json.loads((pytester.path / "reports" / "results.json").read_text())["cases"]
    assert case["steps"] == [1] and case["window"]["reason"] == "exact" and case["flags"] == []


def test_more_gemm_streams_than_cores_are_flagged_contended_in_summary_and_results(pytester, monkeypatch):
    monkeypatch.setattr("harness.run.environment.usable_cores", lambda: 2)  # 4 streams of GEMMs on 2 cores, on any machine
    pytester.makepyfile(test_gemms=GEMMS)
    result = pytester.runpytest("--profile-jobs", "--backend=cpu", "--profile-max-time=1s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "contended: test_gemms: 4 streams run real work on 2 usable core(s)*",
        "1 of 1 case(s) flagged contended*: their figures may not repeat; `python -m harness compare` reports them "
        "and does not gate them unless --strict",
    ])
    (case,) = json.loads((pytester.path / "reports" / "results.json").read_text())["cases"]
    assert any(f["kind"] == "contended" and f["reason"].startswith("4 streams run real work on 2") for f in case["flags"])
    html = (pytester.path / "reports" / "index.html").read_text()
    assert "contended" in html


@pytest.mark.parametrize(("args", "message"), [
    (["--profile-steps=1:4", "--profile-target=1%"], "*--profile-steps fixes the window exactly; --profile-target applies only to the*"),
    (["--profile-target=0"], "*--profile-target '0': must be above 0 and below 100%*"),
    (["--profile-max-time=soon"], "*--profile-max-time 'soon': expected a duration like 10s, 500ms, 2min or 1h (units: ns, us, ms, s, min, h)*"),
    (["--profile-min-steps=1"], "*--profile-min-steps: the minimum of recorded steps*one step tells nothing of the noise*"),
    (["--profile-min-steps=x"], "*--profile-min-steps 'x': expected a whole number of steps*"),
])
def test_bad_window_options_stop_with_a_clear_message(pytester, args, message):
    pytester.makepyfile(test_cases=CASE.format(f=1))
    result = pytester.runpytest("--profile-jobs", "--backend=sim", *args, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_first_benchmark_compare_fail_run_without_a_baseline_passes_with_a_warning(pytester):
    pytester.makepyfile(test_cases=CASE.format(f=1))
    result = pytester.runpytest_subprocess("--backend=sim", "--benchmark-compare", "--benchmark-compare-fail=median:5%",
                                           "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1)
    text = result.stdout.str() + result.stderr.str()
    assert "Can't compare. No benchmark files" in text  # pytest-benchmark's own warning
    assert "--benchmark-compare-fail has no stored baseline to compare with (first run?): nothing was gated this time" in text
    assert "Traceback" not in text and "UsageError" not in text


def test_a_benchmark_regression_fails_the_run_in_one_line_without_a_traceback(pytester):
    pytester.makepyfile(test_cases=CASE.format(f=1))
    assert pytester.runpytest("--backend=sim", "--benchmark-autosave", "-p", "no:cacheprovider").ret == 0
    pytester.makepyfile(test_cases=CASE.format(f=2))  # 16 ms instead of 12 ms per step: +33%
    result = pytester.runpytest_subprocess("--backend=sim", "--benchmark-compare", "--benchmark-compare-fail=median:5%",
                                           "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = result.stdout.str() + result.stderr.str()
    assert "Performance has regressed" in text
    assert "pytest-benchmark: performance has regressed past --benchmark-compare-fail (the regressions are listed above); the run fails" in text
    result.stdout.fnmatch_lines(["*1 passed*"])  # pytest's final line is there
    assert "Traceback" not in text and "INTERNALERROR" not in text


def _busy(deadline: float) -> None:
    while time.monotonic() < deadline:
        pass


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_benchmark_cases_pass_on_a_busy_machine(pytester):
    """Every case in cases/ on the cpu backend with two busy loops beside it (the 2-core machine saturated):
    the cases assert nothing timed, so they pass; the summary says the runs were contended."""
    cases = Path(__file__).resolve().parents[1] / "cases"
    shutil.copytree(cases, pytester.path / "cases", ignore=shutil.ignore_patterns("__pycache__"))
    ctx = multiprocessing.get_context("spawn")
    loops = [ctx.Process(target=_busy, args=(time.monotonic() + 300,), daemon=True) for _ in range(2)]
    for p in loops:
        p.start()
    try:
        time.sleep(1.0)  # let them take the cores
        result = pytester.runpytest_subprocess("cases", "--profile-jobs", "--backend=cpu", "--profile-min-steps=3",
                                               "--profile-max-time=1s", "-p", "no:cacheprovider", timeout=480)
    finally:
        for p in loops:
            p.terminate()
            p.join(5)
    outcomes = result.parseoutcomes()
    collected = len(list((pytester.path / "cases").glob("test_*.py")))
    assert result.ret == 0 and outcomes.get("failed", 0) == 0 and outcomes.get("errors", 0) == 0, result.stdout.str()[-3000:]
    assert outcomes["passed"] >= 20 and collected >= 6
    assert "contended:" in result.stdout.str()
