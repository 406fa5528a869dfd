"""End to end through pytest (pytester): options, reports, errors."""

from __future__ import annotations

import json
import os
import stat

import numpy  # noqa: F401 - imported before pytester's in-process runs, which drop modules first imported inside them (numpy cannot load twice)
import pytest

from harness.report.tracecheck import check_trace

CASES = """
import pytest
from harness.case import PipelineCase
from harness.model.cost import FixedCost

@pytest.mark.parametrize("schedule", ["FThenB", "1F1B"])
def test_case(pipeline, schedule):
    r = pipeline(PipelineCase(schedule, stages=2, microbatches=3, cost=FixedCost.ms(F=1, B=2)))
    assert r.metrics.step_time_median_ns == 12_000_000 or r.records.backend != "sim"

@pytest.mark.pipeline(schedule="1F1B", stages=3, microbatches=4)
def test_marker(pipeline_result):
    assert pipeline_result.num_ranks == 3
"""


def test_profile_jobs_writes_reports(pytester):
    pytester.makepyfile(test_cases=CASES)
    stale = pytester.path / "reports" / "traces" / "from_an_earlier_run.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    (pytester.path / "reports" / ".publish.lock").write_text("")  # an earlier render's (killed before its results.json)
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "--profile-steps=1:3", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "pipeline-harness: sim backend (requested); recording steps 1-2 (after 1 warm-up step) to reports/",
        "*pipeline cases*",
        "test_case?FThenB?*FThenB*2*3*1*sim*12.000 ms*25.0% / 25.0%*",
        "reports: reports/index.html*",
    ])
    reports = pytester.path / "reports"
    doc = json.loads((reports / "results.json").read_text())
    assert doc["schema_version"] == 1
    assert [c["id"] for c in doc["cases"]] == [
        "test_cases.py::test_case[FThenB]", "test_cases.py::test_case[1F1B]", "test_cases.py::test_marker"]
    fthenb = doc["cases"][0]
    assert fthenb["steps"] == [1, 2]
    assert len(fthenb["jobs"]["kind"]) == 2 * 12
    assert fthenb["metrics"]["bubble_ratio"] == pytest.approx(0.25)
    assert fthenb["theory"]["bubble_ratio"] == pytest.approx(0.25)
    traces = sorted(p.name for p in (reports / "traces").iterdir())
    assert len(traces) == 3  # the stale trace is gone, the index links these three
    assert sorted(p.name for p in (reports / "hta").iterdir()) == [t.removesuffix(".json") for t in traces]
    assert sorted(p.name for p in (reports / "hta" / traces[0].removesuffix(".json")).iterdir()) == ["rank0.json", "rank1.json"]
    assert all(e == 0 for e in fthenb["jobs"]["enqueue_ns"])  # sim replays the plan (harness/run/replay.py): nothing is enqueued
    for name in traces:
        trace = json.loads((reports / "traces" / name).read_text())
        assert check_trace(trace) == []
        assert "displayTimeUnit" not in trace
    html = (reports / "index.html").read_text()
    assert "test_cases.py::test_case[1F1B]" in html and "Content-Security-Policy" in html


def test_benchmark_json_carries_measured_step_times(pytester):
    pytester.makepyfile(test_cases=CASES)
    out = pytester.path / "bench.json"
    result = pytester.runpytest("--backend=sim", "--profile-steps=1:4", f"--benchmark-json={out}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    doc = json.loads(out.read_text())
    benches = {b["name"]: b for b in doc["benchmarks"]}
    b = benches["test_case[1F1B]"]
    assert b["stats"]["rounds"] == 3  # every recorded step is one round
    assert b["options"]["timer"] == "harness.pytest.plugin.replay_clock"  # an importable name, not an object's repr
    assert b["stats"]["median"] == pytest.approx(0.012)  # 12 ms simulated step, in seconds
    assert b["extra_info"]["bubble_ratio"] == pytest.approx(0.25)
    assert b["extra_info"]["stages"] == 2 and b["extra_info"]["backend"] == "sim"
    assert not (pytester.path / "reports" / "index.html").exists()  # no --profile-jobs, no reports


def test_auto_backend_says_why_in_the_header(pytester):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("--profile-jobs", "-k", "FThenB", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["pipeline-harness: cpu backend (auto: no usable GPU: *); measuring until stable: median step time "
                                 "to 1% after 1 warm-up (5-1000 steps, 10 s per case) to reports/"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend=tpu"], "*unknown backend 'tpu'; valid backends: auto, sim, cpu, cuda, mpi, torch*"),
        (["--profile-steps=3"], "*profile steps must look like START:END*"),
        (["--profile-steps=4:2"], "*need 0 <= START < END*"),
        (["--profile-steps=1:100000000000"], "*profile steps '1:100000000000': at most 10000 steps per run (END <= 10000)*"),
        (["--workload=gpu"], "ERROR: unknown workload 'gpu'; valid workloads: timed, compute (any backend), "
                             "or a backend's own name: sleep, matmul (cpu); spin, gemm (cuda)"),
        (["--backend=cuda"], "*the cuda backend cannot run here: *pip install -e .[[]cuda[]]*"),
    ],
)
def test_bad_options_stop_with_a_clear_message(pytester, args, message):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest(*args, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


@pytest.mark.skipif(os.geteuid() == 0 and not os.environ.get("HARNESS_TEST_AS_ROOT_CHMOD"), reason="root can write anywhere; uses a file instead")
def test_unwritable_report_dir(pytester):  # pragma: no cover - exercised as non-root
    pytester.makepyfile(test_cases=CASES)
    ro = pytester.mkdir("ro")
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    result = pytester.runpytest("--profile-jobs", "--backend=sim", f"--report-dir={ro}")
    result.stderr.fnmatch_lines(["*report directory*is not writable*"])


def test_report_dir_that_is_a_file(pytester):
    pytester.makepyfile(test_cases=CASES)
    pytester.makefile(".txt", blocker="x")
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "--report-dir=blocker.txt/reports", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*report directory 'blocker.txt/reports' cannot be created: 'blocker.txt' is a file, not a folder*"])


BAD_CASES = """
import pytest
from harness.case import PipelineCase

def test_unknown_schedule(pipeline):
    pipeline(PipelineCase("2F2B", stages=4, microbatches=8))

def test_zero_stages(pipeline):
    pipeline(PipelineCase("1F1B", stages=0, microbatches=8))

def test_too_few_microbatches(pipeline):
    pipeline(PipelineCase("DualPipeV", stages=4, microbatches=6))

def test_too_many_stages_for_layers(pipeline):
    from harness import TransformerCost
    pipeline(PipelineCase("1F1B", stages=8, microbatches=8, cost=TransformerCost(256, 128, 1, 4, 100.0)))
"""


def test_bad_cases_fail_with_clear_messages(pytester):
    pytester.makepyfile(test_bad=BAD_CASES)
    result = pytester.runpytest("--backend=sim", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines([
        "*ConfigError: test_bad.py:5: case 'test_unknown_schedule': unknown schedule '2F2B'; valid schedules: *1F1B*FThenB*",
        "ConfigError: test_bad.py:8: case '1F1B p=0 m=8': stages must be a positive integer, got 0",
        "*ConfigError: test_bad.py:11: case 'test_too_few_microbatches': DualPipeV needs m >= 2p micro-batches (one per stage); "
        "got p=4, m=6*",
        "*ConfigError: test_bad.py:15: cost model: 4 layers cannot be split over 8 stages*",  # the cost model's error names the case's line
    ])
    out = result.stdout.str()
    assert "Traceback" not in out and "harness/case.py" not in out and "PytestBenchmarkWarning" not in out
    # The failures section shows each message once; the short summary repeats it in full only where
    # pytest sees a CI (the CI / BUILD_NUMBER variables), so count before it.
    failures = out.split("short test summary info")[0]
    assert failures.count("test_bad.py:15: cost model: 4 layers") == 1


def test_failed_run_keeps_previous_reports(pytester):
    pytester.makepyfile(test_cases=CASES)
    pytester.runpytest("--profile-jobs", "--backend=sim", "-p", "no:cacheprovider").assert_outcomes(passed=3)
    index = pytester.path / "reports" / "index.html"
    before = index.read_text()
    pytester.makepyfile(test_cases="""
import pytest
from harness.case import PipelineCase
def test_interrupt(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2))
    raise KeyboardInterrupt
""")
    result = pytester.runpytest_subprocess("--profile-jobs", "--backend=sim", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["run interrupted: reports in reports/ were left as they were; nothing of this run was written"])
    assert index.read_text() == before
    leftovers = [p.name for p in (pytester.path / "reports").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_failed_case_is_marked_and_errors_print_once(pytester):
    pytester.makepyfile(test_cases="""
from harness.case import PipelineCase

def test_runs_then_fails(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2))
    assert False, "checked something after the run"

def test_bad(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2, chunks=3))
""")
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "-rN", "-p", "no:cacheprovider")  # -rN: no short summary
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert out.count("ConfigError: test_cases.py:8: case 'test_bad': schedule '1F1B' has one chunk per rank") == 1  # once, not chained twice
    assert "During handling of the above exception" not in out and "(case run at" not in out  # the message names the line
    result.stdout.fnmatch_lines(["1 case(s) ran but their test failed; reports mark them: test_runs_then_fails"])
    doc = json.loads((pytester.path / "reports" / "results.json").read_text())
    assert [(c["id"], c["outcome"]) for c in doc["cases"]] == [("test_cases.py::test_runs_then_fails", "failed")]


def test_benchmark_only_runs_the_cases(pytester):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("--backend=sim", "--benchmark-only", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_default_report_dir_is_in_the_root_folder(pytester):
    pytester.makepyfile(test_cases=CASES)
    pytester.makeini("[pytest]\n")
    sub = pytester.mkdir("sub")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(sub)
        result = pytester.runpytest_subprocess(str(pytester.path / "test_cases.py"), "--profile-jobs", "--backend=sim",
                                               f"--rootdir={pytester.path}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    assert (pytester.path / "reports" / "index.html").exists()
    assert not (sub / "reports").exists()


def test_ctrl_c_while_publishing_completes_the_report_and_exits_interrupted(pytester):
    pytester.makepyfile(test_cases=CASES)
    pytester.makeconftest("""
import os, signal
from harness.report import render

_real = os.replace
_sent = []

def _replace(src, dst):
    if ".render-" not in str(dst) and not _sent:
        _sent.append(1)
        os.kill(os.getpid(), signal.SIGINT)
    _real(src, dst)

render.os.replace = _replace
""")
    result = pytester.runpytest_subprocess("--profile-jobs", "--backend=sim", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["run interrupted while the report was being published; it was completed first, so reports/ holds this run"])
    doc = json.loads((pytester.path / "reports" / "results.json").read_text())
    assert len(doc["cases"]) == 3
    assert len(list((pytester.path / "reports" / "traces").iterdir())) == 3


def test_failed_cases_get_no_benchmark_fixture_warning(pytester):
    pytester.makepyfile(test_cases="""
from harness.case import PipelineCase

def test_zero_microbatches(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=0))

def test_unknown_schedule(pipeline):
    pipeline(PipelineCase("2F2B", stages=2, microbatches=4))

def test_runs(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=4))

def test_own_benchmark_unused(benchmark):
    pass
""")
    out = pytester.path / "bench.json"
    result = pytester.runpytest("--profile-jobs", "--backend=sim", f"--benchmark-json={out}", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert (outcomes["failed"], outcomes["passed"]) == (2, 2)
    # pytest-benchmark's warning is left where the test asked for the fixture itself, and only there
    # (other warnings, e.g. pytester's assertion-rewrite note in an editable install, are not ours to count)
    assert result.stdout.str().count("Benchmark fixture was not used at all in this test!") == 1
    result.stdout.fnmatch_lines(["test_cases.py::test_own_benchmark_unused", "*PytestBenchmarkWarning: Benchmark fixture was not used at all*"])
    assert [b["name"] for b in json.loads(out.read_text())["benchmarks"]] == ["test_runs"]


def test_pipeline_result_without_a_marker_fails_that_test_with_the_fix(pytester):
    pytester.makepyfile(test_cases="""
import pytest

def test_forgot_the_marker(pipeline_result):
    pass

@pytest.mark.parametrize("m", [4])
def test_forgot_it_too(pipeline_result, m):
    pass

def test_other():
    pass

class TestGroup:
    def test_forgot_in_a_class(self, pipeline_result):
        pass
""")
    result = pytester.runpytest("--backend=sim", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=3)  # the session goes on: only those tests fail
    result.stdout.fnmatch_lines([
        "*_ ERROR at setup of test_forgot_the_marker _*",
        "test_cases.py::test_forgot_the_marker: the pipeline_result fixture runs the case declared by a pipeline marker, "
        "and this test has none; declare the case above the test:",
        "",
        '    @pytest.mark.pipeline(schedule="1F1B", stages=4, microbatches=8)',
        "    def test_forgot_the_marker(pipeline_result):",
        "",
        "or take the pipeline fixture instead and run a case with pipeline(PipelineCase(...))",
        "*_ ERROR at setup of test_forgot_it_too[[]4[]] _*",
        "test_cases.py::test_forgot_it_too[[]4[]]: the pipeline_result fixture *",
        "    def test_forgot_it_too(pipeline_result):",
        "*_ ERROR at setup of TestGroup.test_forgot_in_a_class _*",
        "test_cases.py::TestGroup::test_forgot_in_a_class: the pipeline_result fixture *",
        "    def test_forgot_in_a_class(self, pipeline_result):",  # a method's hint keeps self
    ])
    out = result.stdout.str()
    assert "UsageError" not in out and "harness/pytest/plugin.py" not in out and "Traceback" not in out
    assert "Benchmark fixture was not used" not in out


FIELDS = ("valid fields: schedule, stages, microbatches, chunks, cost, workload, comm, optimizer, options, name, device_options, "
          "memory_limit_bytes, comm_model, comm_placement")


def test_a_bad_marker_or_fixture_call_names_its_line_the_field_and_the_valid_ones(pytester):
    pytester.makepyfile(test_cases="""
import pytest
from harness.case import PipelineCase

@pytest.mark.pipeline(schedule="1F1B", stages=4, microbatch=8)
def test_misspelt(pipeline_result):
    pass

@pytest.mark.pipeline
def test_empty(pipeline_result):
    pass

@pytest.mark.pipeline("1F1B", schedule="FThenB", stages=2, microbatches=2)
def test_twice(pipeline_result):
    pass

@pytest.mark.pipeline("1F1B", p=2, m=4)
def test_pm(pipeline_result):
    pass

@pytest.mark.pipeline("1F1B", 2, 4)
def test_positional(pipeline_result):
    assert pipeline_result.num_ranks == 2

def test_fixture_keywords(pipeline):
    pipeline(schedule="1F1B", stage=2, microbatches=4)

def test_fixture_string(pipeline):
    pipeline("1F1B")

def test_fixture_both(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2), stages=3)
""")
    result = pytester.runpytest("--backend=sim", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=3, errors=4)
    example = 'e.g. pipeline(PipelineCase("1F1B", stages=4, microbatches=8)) or pipeline(schedule="1F1B", stages=4, microbatches=8)'
    result.stdout.fnmatch_lines([
        "*_ ERROR at setup of test_misspelt _*",
        f"ConfigError: test_cases.py:4: pipeline marker: unknown field 'microbatch' (did you mean 'microbatches'?); {FIELDS}",
        "*_ ERROR at setup of test_empty _*",
        "ConfigError: test_cases.py:8: pipeline marker: missing field 'schedule' "
        f'(a schedule name such as "1F1B", a Schedule or a CSV path); {FIELDS}',
        "*_ ERROR at setup of test_twice _*",
        f"ConfigError: test_cases.py:12: pipeline marker: field 'schedule' given both by position and by name; {FIELDS}",
        "*_ ERROR at setup of test_pm _*",
        "ConfigError: test_cases.py:16: pipeline marker: unknown fields 'p' (did you mean 'stages'?), "
        f"'m' (did you mean 'microbatches'?); {FIELDS}",
        "*_ test_fixture_keywords _*",
        f"ConfigError: test_cases.py:25: pipeline(...): unknown field 'stage' (did you mean 'stages'?); {FIELDS}",
        "*_ test_fixture_string _*",
        f"ConfigError: test_cases.py:28: pipeline(...) takes a PipelineCase or its fields as keywords, {example}; got '1F1B'",
        "*_ test_fixture_both _*",
        f"ConfigError: test_cases.py:31: pipeline(...) takes a PipelineCase or its fields as keywords, {example}; "
        "got a PipelineCase and keywords too",
    ])
    out = result.stdout.str()
    assert "Traceback" not in out and "harness/" not in out and "TypeError" not in out and "(raised at" not in out


def test_interrupted_case_gets_no_benchmark_fixture_warning(pytester):
    pytester.makepyfile(test_cases="""
import pytest
import harness.runner
from harness.case import PipelineCase

def test_runs(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2))

def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt  # as Ctrl-C in the middle of the case's run

def test_interrupted(pipeline, monkeypatch):
    monkeypatch.setattr(harness.runner, "execute", _interrupt)
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2))

@pytest.mark.pipeline(schedule="1F1B", stages=2, microbatches=2)
def test_never_reached(pipeline_result):
    pass
""")
    result = pytester.runpytest_subprocess("--profile-jobs", "--backend=sim", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*test_cases.py:9: KeyboardInterrupt", "*1 passed*"])
    assert "Benchmark fixture was not used" not in result.stdout.str() + result.stderr.str()


def test_interrupted_test_that_asked_for_benchmark_keeps_its_warning(pytester):
    pytester.makepyfile(test_cases="""
def test_own_benchmark(benchmark):
    raise KeyboardInterrupt
""")
    result = pytester.runpytest_subprocess("--backend=sim", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "Benchmark fixture was not used at all" in result.stdout.str() + result.stderr.str()


SIGINT_ON_SUMMARY_LINE = """
import os, signal
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    real = terminalreporter.write_line

    def write_line(line, **kw):
        if line.startswith({start!r}):
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while this line is written
        real(line, **kw)

    terminalreporter.write_line = write_line
"""


def test_ctrl_c_during_the_summary_table_prints_one_line(pytester):
    pytester.makepyfile(test_cases=CASES)
    pytester.makeconftest(SIGINT_ON_SUMMARY_LINE.format(start="bubble ="))
    result = pytester.runpytest_subprocess("--profile-jobs", "--backend=sim", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "test_case?FThenB?  FThenB*",
        "pipeline cases summary interrupted (Ctrl-C); the report was already complete: reports/index.html",
        "*3 passed*",
    ])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert "KeyboardInterrupt" not in result.stderr.str() + result.stdout.str()
    assert len(json.loads((pytester.path / "reports" / "results.json").read_text())["cases"]) == 3


def test_ctrl_c_during_the_summary_without_reports(pytester):
    pytester.makepyfile(test_cases=CASES)
    pytester.makeconftest(SIGINT_ON_SUMMARY_LINE.format(start="case "))
    result = pytester.runpytest_subprocess("--backend=sim", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert result.stdout.str().count("pipeline cases summary interrupted (Ctrl-C)\n") == 1
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not (pytester.path / "reports" / "index.html").exists()


@pytest.mark.timeout(300)  # a run that never says it waits would block the read
def test_a_run_says_when_it_waits_for_another_render(pytester):
    # Another process holds the report folder's publish lock: the run says it waits, then publishes whole.
    # The lock is released only once the run has said so (a timer made this fail on a busy machine, where
    # the run reached its publish after the timer had fired).
    import subprocess
    import sys

    from filelock import FileLock

    pytester.makepyfile(test_cases="""
from harness.case import PipelineCase

def test_runs(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2))
""")
    reports = pytester.path / "reports"
    reports.mkdir()
    lock = FileLock(str(reports / ".publish.lock"), thread_local=False)
    lock.acquire()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "--profile-jobs", "--backend=sim", "-p", "no:cacheprovider",
                             "-p", "no:randomly"], cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("waiting:"):
                lock.release()
        proc.wait(timeout=120)
    finally:
        if lock.is_locked:
            lock.release()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, "\n".join(lines)
    assert f"waiting: another render is publishing into {reports} (lock {reports / '.publish.lock'})" in lines
    assert not any(line.startswith("test_cases.py") and "waiting" in line for line in lines)  # a line of its own
    assert len(json.loads((reports / "results.json").read_text())["cases"]) == 1


def test_two_pipeline_markers_on_one_test_are_refused(pytester):
    pytester.makepyfile(test_cases="""
import pytest

@pytest.mark.pipeline(schedule="1F1B", stages=2, microbatches=2)
@pytest.mark.pipeline(schedule="FThenB", stages=2, microbatches=2)
def test_two(pipeline_result):
    pass
""")
    result = pytester.runpytest("--backend=sim", "-p", "no:cacheprovider")
    assert result.parseoutcomes().get("errors") == 1
    result.stdout.fnmatch_lines(
        ["*test_cases.py:3: 2 pipeline markers on one test; it runs one case (parametrize the test, or split it, to run several)"]
    )


def test_a_pipeline_marker_on_a_test_that_takes_only_the_pipeline_fixture_is_refused(pytester):
    pytester.makepyfile(test_cases="""
import pytest
from harness import PipelineCase

@pytest.mark.pipeline(schedule="1F1B", stages=2, microbatches=2)
def test_marker_ignored(pipeline):
    pipeline(PipelineCase("FThenB", stages=2, microbatches=2))

@pytest.mark.pipeline(schedule="1F1B", stages=2, microbatches=2)
def test_both(pipeline, pipeline_result):
    assert pipeline_result.schedule.name == "1F1B"
    assert pipeline(PipelineCase("FThenB", stages=2, microbatches=2)).schedule.name == "FThenB"

def test_no_marker(pipeline):
    pipeline(PipelineCase("FThenB", stages=2, microbatches=2))
""")
    result = pytester.runpytest("--backend=sim", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines([
        "*_ ERROR at setup of test_marker_ignored _*",
        "test_cases.py:4: this test has a pipeline marker but takes the pipeline fixture, which runs only the cases "
        "the test passes to it; the marker's case would not run. Take pipeline_result to run the marker's case, or drop the marker",
    ])


def test_a_refused_case_raises_its_error_so_tests_can_expect_it(pytester):
    pytester.makepyfile(test_cases="""
import pytest
from harness import PipelineCase
from harness.errors import ConfigError, ScheduleError

def test_unknown_name_is_refused(pipeline):
    with pytest.raises(ConfigError, match="unknown schedule '1F1C'"):
        pipeline(PipelineCase("1F1C", stages=4, microbatches=8))

def test_builder_constraint_is_refused(pipeline):
    with pytest.raises(ConfigError, match="DualPipeV needs m >= 2p"):
        pipeline(schedule="DualPipeV", stages=4, microbatches=4)
    assert pipeline(PipelineCase("1F1B", stages=2, microbatches=2)).schedule.name == "1F1B"  # the fixture still runs cases

def test_uncaught(pipeline):
    pipeline(PipelineCase("1F1C", stages=4, microbatches=8))
""")
    result = pytester.runpytest("--backend=sim", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*_ test_uncaught _*",
        "ConfigError: test_cases.py:15: case 'test_uncaught': unknown schedule '1F1C'; valid schedules: *",
        "*short test summary info*",
    ])
    assert "Traceback" not in result.stdout.str() and "(case" not in result.stdout.str()  # its own line starts the message


def test_a_methods_pipeline_marker_overrides_its_classes(pytester):
    pytester.makepyfile(test_cases="""
import pytest

@pytest.mark.pipeline(schedule="FThenB", stages=2, microbatches=2)
class TestCases:
    def test_class_case(self, pipeline_result):
        assert pipeline_result.schedule.name == "FThenB"

    @pytest.mark.pipeline(schedule="1F1B", stages=2, microbatches=4)
    def test_own_case(self, pipeline_result):
        assert (pipeline_result.schedule.name, pipeline_result.schedule.num_microbatches) == ("1F1B", 4)
""")
    result = pytester.runpytest("--backend=sim", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_a_subclass_marker_overrides_the_inherited_one(pytester):
    pytester.makepyfile(test_cases="""
import pytest

@pytest.mark.pipeline(schedule="FThenB", stages=2, microbatches=2)
class TestBase:
    def test_case(self, pipeline_result):
        assert pipeline_result.schedule.name == type(self).expected

    expected = "FThenB"

@pytest.mark.pipeline(schedule="1F1B", stages=2, microbatches=2)
class TestDerived(TestBase):
    expected = "1F1B"

@pytest.mark.pipeline(schedule="1F1B", stages=2, microbatches=2)
@pytest.mark.pipeline(schedule="FThenB", stages=2, microbatches=2)
class TestTwo:
    def test_case(self, pipeline_result):
        pass
""")
    result = pytester.runpytest("--backend=sim", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*test_cases.py::TestTwo: 2 pipeline markers on one class; it runs one case*"])


def test_a_refused_case_takes_no_case_id(pytester):
    pytester.makepyfile(test_cases="""
import pytest
from harness import PipelineCase
from harness.errors import ConfigError

def test_refused_then_ok(pipeline):
    with pytest.raises(ConfigError):
        pipeline(PipelineCase("DualPipeV", stages=4, microbatches=4))
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2))
    pipeline(PipelineCase("FThenB", stages=2, microbatches=2))
""")
    result = pytester.runpytest("--backend=sim", "--profile-jobs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    cases = json.loads((pytester.path / "reports" / "results.json").read_text())["cases"]
    assert [(c["id"], c["label"]) for c in cases] == [
        ("test_cases.py::test_refused_then_ok", "test_refused_then_ok"),
        ("test_cases.py::test_refused_then_ok#2", "test_refused_then_ok#2"),
    ]


@pytest.mark.parametrize(("option", "message"), [
    ("--report-dir=", "--report-dir is empty; give a folder, or leave the option out for reports/ in the project root"),
    ("--profile-steps=０:３", "profile steps must look like START:END (e.g. 1:4), got '０:３'"),
])
def test_empty_report_dir_and_non_ascii_steps_are_refused_at_start(pytester, option, message):
    pytester.makepyfile(test_cases="def test_nothing():\n    pass\n")
    result = pytester.runpytest("--profile-jobs", "--backend=sim", option, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {message}" in result.stderr.str()


def test_another_tools_report_dir_is_refused_before_any_case_runs(pytester):
    pytester.makepyfile(test_cases=CASES)
    (pytester.path / "theirs").mkdir()
    (pytester.path / "theirs" / "index.html").write_text("<html>mine</html>")
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "--report-dir=theirs", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "theirs is not a pipeline-harness report folder (it holds index.html but no pipeline-harness results.json)" in result.stderr.str()
    assert (pytester.path / "theirs" / "index.html").read_text() == "<html>mine</html>"


def test_pytest_help_lists_every_harness_option(pytester):
    # argparse formats help strings with %: a bare "%" in one of them made `pytest --help` crash.
    result = pytester.runpytest("--help")
    assert result.ret == 0
    out = result.stdout.str()
    for option in ("--profile-jobs", "--backend", "--profile-steps", "--profile-target", "--profile-max-time",
                   "--profile-min-steps", "--report-dir"):
        assert option in out, option
    assert "(default 1%)" in out


def test_report_dir_without_profile_jobs_says_no_report_is_written(pytester):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("--backend=sim", "--report-dir", "out", "-p", "no:randomly")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["pipeline-harness: sim backend (*); note: --report-dir does nothing without --profile-jobs (no report is written)"])
    assert not (pytester.path / "out").exists()


def test_trace_options_without_profile_jobs_say_they_do_nothing(pytester):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("--backend=sim", "--trace-gzip", "--trace-steps=1", "-p", "no:randomly")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["pipeline-harness: sim backend (*); note: --trace-gzip, --trace-steps do nothing without "
                                 "--profile-jobs (no report is written)"])


def test_a_bad_trace_option_is_refused_without_profile_jobs_too(pytester):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("--backend=sim", "--trace-steps=abc", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--trace-steps" in result.stderr.str()


def test_files_that_fail_to_collect_are_named_with_what_became_of_the_report(pytester):
    pytester.makepyfile(test_cases=CASES, test_broken="def test_x(:\n    pass\n")
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert result.stdout.lines[-1] == (
        "pipeline-harness: 1 file(s) failed to collect (test_broken.py), so pytest ran no case and reports in reports/ were left "
        "as they were; fix them, or pass --continue-on-collection-errors to run and report the other cases")
    assert not (pytester.path / "reports" / "index.html").exists()
    # with pytest's flag the other cases run and are reported, and the last line says the report lacks the file's
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "-p", "no:randomly", "--continue-on-collection-errors")
    assert (pytester.path / "reports" / "index.html").exists()
    assert result.stdout.lines[-1] == ("pipeline-harness: 1 file(s) failed to collect (test_broken.py): the report in reports/ "
                                       "holds the other cases only, and names these files among the cases that did not run")


def test_a_workload_error_caused_by_the_command_line_option_says_so(pytester):
    pytester.makepyfile(test_w="""
from harness.case import PipelineCase
from harness.model.cost import FixedCost

def test_fixed(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2, cost=FixedCost.ms(F=1, B=2)))
""")
    result = pytester.runpytest("--backend=cpu", "--workload=compute", "--profile-steps=0:1", "-p", "no:cacheprovider")
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "ConfigError: test_w.py:5: case 'test_fixed': the compute workload runs each job's FLOPs as real matrix products*",
        "(the case's workload 'compute' came from --workload=compute on the command line)",
    ])


def test_a_case_refused_at_module_level_shows_its_message_not_a_traceback(pytester):
    pytester.makepyfile(test_m="""
from harness.case import PipelineCase
from harness.model.cost import FixedCost
C = PipelineCase("1F1B", stages=4, microbatches=0, cost=FixedCost.ms(F=1, B=2))
""")
    result = pytester.runpytest("--backend=sim", "-p", "no:cacheprovider")
    assert result.ret == 2
    result.stdout.fnmatch_lines([
        "*ERROR collecting test_m.py*",
        "ConfigError: test_m.py:3: case '1F1B p=4 m=0': microbatches must be a positive integer, got 0",
    ])
    assert "harness/case.py" not in result.stdout.str()  # it showed a traceback through the dataclass code
    full = pytester.runpytest("--backend=sim", "-p", "no:cacheprovider", "--fulltrace")
    assert "harness/case.py" in full.stdout.str()  # --fulltrace keeps it
    # an error whose message names no line (a cost model's own check) gets the test file's line
    pytester.makepyfile(test_m="""
from harness.model.cost import FixedCost
COST = FixedCost(forward_ns=-1, backward_ns=2)
""")
    result = pytester.runpytest("--backend=sim", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["ConfigError: cost model: forward_ns must be positive, got -1", "(raised at test_m.py:2)"])


def test_the_collection_hook_knows_every_harness_error_class():
    import inspect

    from harness import errors
    from harness.pytest.plugin import _HARNESS_ERRORS

    assert _HARNESS_ERRORS == {name for name, cls in inspect.getmembers(errors, inspect.isclass)
                               if issubclass(cls, errors.HarnessError)}
