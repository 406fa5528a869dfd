"""pytest-xdist (``-n``): sim cases in parallel workers, merged into the serial run's report; the refusals;
GPUs per worker on cuda; the merge of worker parts (:mod:`harness.report.parts`)."""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import sys
from types import SimpleNamespace

import numpy  # noqa: F401 - imported before pytester's in-process runs, which drop modules first imported inside them
import pytest

from harness.case import PipelineCase
from harness.errors import ConfigError, InputFormatError
from harness.pytest.xdist import check_split, gpu_groups
from harness.report.parts import SessionPart, make_part, merge_cases, merge_lines, worker_entries
from harness.runner import run_case

pytest.importorskip("xdist")

CASES = """
import dataclasses
import pytest
from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.model.transformer import TransformerCost

@pytest.mark.parametrize("schedule", ["FThenB", "1F1B", "ZB-H1", "Interleaved"])
@pytest.mark.parametrize("p", [2, 4])
def test_schedule(pipeline, schedule, p):
    v = 2 if schedule == "Interleaved" else 1
    pipeline(PipelineCase(schedule, stages=p, microbatches=2 * p, chunks=v, cost=FixedCost.ms(F=1, B=2, I=1, W=1)))

def test_two_cases(pipeline):  # ids test_two_cases and test_two_cases#2, in this order
    pipeline(PipelineCase("1F1B", stages=2, microbatches=4))
    pipeline(PipelineCase("ZB-V", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2, I=1, W=1)))

@pytest.mark.pipeline(schedule="1F1B", stages=4, microbatches=8, memory_limit_bytes=2**30,
                      cost=TransformerCost(hidden_size=1024, seq_len=512, micro_batch_size=1, num_layers=8, tflops=100.0))
def test_memory(pipeline_result):
    pass

def test_fails_after_its_case(pipeline):
    pipeline(PipelineCase("FThenB", stages=3, microbatches=3))
    assert False, "fails on purpose"

def test_broken_records(pipeline):  # ran, but cannot be reported: errored, as in a serial run
    r = pipeline(PipelineCase("FThenB", stages=2, microbatches=2))
    r.records.jobs[0] = dataclasses.replace(r.records.jobs[0], end_ns=r.records.jobs[0].start_ns - 5)

def test_no_case():
    pass
"""

SERIAL_ORDER = [
    *(f"test_cases.py::test_schedule[{p}-{s}]" for p in (2, 4) for s in ("FThenB", "1F1B", "ZB-H1", "Interleaved")),
    "test_cases.py::test_two_cases", "test_cases.py::test_two_cases#2", "test_cases.py::test_memory",
    "test_cases.py::test_fails_after_its_case",
]


def _without_times(doc: dict) -> dict:
    """The results document less what differs between any two runs: when it was made, the machine's
    facts, and per case the host's wall time and load (``usage``) and the window's host time."""
    doc = json.loads(json.dumps(doc))
    del doc["created"]
    doc["session"].pop("environment")
    for case in doc["cases"]:
        case.pop("usage", None)
        case["window"].pop("elapsed_ns")
    return doc


def _table(lines: list[str]) -> list[str]:
    """The "pipeline cases" section of pytest's output: the table, its legend, the assumptions and the
    notes, failed and errored cases; up to the lines that name the run's own report folder or workers."""
    start = next(k for k, line in enumerate(lines) if "pipeline cases" in line) + 1
    end = next(k for k in range(start, len(lines)) if lines[k].startswith(("reports: ", "pipeline-harness: pytest-benchmark")))
    return lines[start:end]


def test_a_split_sim_run_writes_the_serial_runs_results(pytester):
    pytester.makepyfile(test_cases=CASES)
    serial = pytester.runpytest("--profile-jobs", "--backend=sim", "--report-dir=serial", "-p", "no:cacheprovider")
    split = pytester.runpytest("--profile-jobs", "--backend=sim", "--report-dir=split", "-n", "2", "-p", "no:cacheprovider")
    serial.assert_outcomes(passed=12, failed=1)
    split.assert_outcomes(passed=12, failed=1)
    one, two = (json.loads((pytester.path / d / "results.json").read_text()) for d in ("serial", "split"))
    assert [c["id"] for c in two["cases"]] == SERIAL_ORDER  # the serial order, not the order the workers finished in
    workers = two["session"].pop("workers")
    assert "workers" not in one["session"]
    assert [w["id"] for w in workers] == ["gw0", "gw1"]
    ran = [cid for w in workers for cid in w["cases"]]
    assert sorted(ran) == sorted([*SERIAL_ORDER, "test_cases.py::test_broken_records"])  # each case once, on one worker
    assert all(w["cases"] for w in workers)  # both workers ran cases: the merge had something to order
    assert _without_times(two) == _without_times(one)
    assert two["session"]["errored_cases"] == [{
        "id": "test_cases.py::test_broken_records", "label": "test_broken_records",
        "error": "jobs.end_ns[0] (-5) is before jobs.start_ns[0] (0)"}]
    assert next(c for c in two["cases"] if c["id"] == "test_cases.py::test_fails_after_its_case")["outcome"] == "failed"
    for d in ("serial", "split"):  # sim's traces are exact: the same files, byte for byte
        assert sorted(p.name for p in (pytester.path / d / "traces").iterdir()) == sorted(
            p.name for p in (pytester.path / "serial" / "traces").iterdir())
    for trace in (pytester.path / "serial" / "traces").iterdir():
        assert (pytester.path / "split" / "traces" / trace.name).read_bytes() == trace.read_bytes()
    split.stdout.fnmatch_lines([
        "pipeline-harness: sim backend (requested); 2 pytest-xdist workers, their cases merged into one report; recording*",
        "*pipeline cases*",
    ])
    table = _table(serial.outlines)
    assumptions_at = next(i for i, line in enumerate(table) if line.startswith("assumptions ("))
    assert table[14].startswith("bubble = ") and all(line.startswith("  ") for line in table[15:assumptions_at])  # the legend, wrapped
    assert "1 case(s) ran but their test failed; reports mark them: test_fails_after_its_case" in table
    assert _table(split.outlines) == table  # the summary, line for line: header, 13 rows, legend, assumptions, notes
    split.stdout.fnmatch_lines([
        "1 case(s) ran but could not be reported (listed as errored in the report; every other case was written):",
        "  test_cases.py::test_broken_records: jobs.end_ns[0] (-5) is before jobs.start_ns[0] (0)",
        "pipeline-harness: pytest-benchmark turns itself off under pytest-xdist (-n), so the cases' step times were not handed to it*",
        "reports: split/index.html*",
    ])
    serial.stdout.no_fnmatch_line("*pytest-benchmark turns itself off*")


CRASH = """
import os
import pytest
from harness.case import PipelineCase

@pytest.mark.parametrize("m", [2, 3, 4, 5, 6, 7])
def test_case(pipeline, m):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=m))

def test_crash(pipeline):
    pipeline(PipelineCase("FThenB", stages=2, microbatches=2))
    os._exit(3)  # the worker process dies, as on a segfault
"""


def test_a_worker_that_dies_costs_only_its_own_cases_and_is_named(pytester):
    pytester.makepyfile(test_cases=CRASH)
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, passed=6)
    doc = json.loads((pytester.path / "reports" / "results.json").read_text())
    (lost,) = doc["session"]["workers_lost"]
    assert lost["error"] == "went down: Not properly terminated"
    assert lost["tests"][-1] == "test_cases.py::test_crash"  # the test it died in, after those it finished
    reported = [c["id"] for c in doc["cases"]]
    assert reported, "the other worker's cases are in the report"
    assert sorted([*reported, *lost["tests"]]) == sorted([*(f"test_cases.py::test_case[{m}]" for m in range(2, 8)), "test_cases.py::test_crash"])
    assert reported == sorted(reported, key=lambda cid: int(cid[-2]))  # still in the serial order
    page = (pytester.path / "reports" / "index.html").read_text()  # the page warns of the lost worker, by name
    assert (f"<li>worker <bdi>{lost['worker']}</bdi> sent no cases (<bdi>went down: Not properly terminated</bdi>): "
            f"{len(lost['tests'])} test(s): ") in page
    assert "⚠ 1 pytest-xdist worker(s) went down before sending their cases" in page
    unwrapped = "\n".join(result.outlines).replace("\n  ", " ").splitlines()  # the summary wraps long lines at pytest's width
    assert fnmatch.filter(unwrapped, f"pytest-xdist worker {lost['worker']} sent no cases (went down: Not properly terminated): the cases "
                                     f"of the {len(lost['tests'])} test(s) it ran are missing here and from the report: *test_crash")


def test_exitfirst_under_xdist_says_why_nothing_was_written(pytester):
    pytester.makepyfile(test_cases="def test_fails(pipeline):\n    pipeline(schedule='1F1B', stages=2, microbatches=2)\n    assert False\n")
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "-n", "2", "-x", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # pytest-xdist's rule; a serial -x run ends as failed and is reported
    result.stdout.fnmatch_lines(["run interrupted (pytest-xdist ends a run it stops early as interrupted: stopping after 1 failures; "
                                 "run without -x/--maxfail for a report): reports in reports/ were left as they were*"])
    assert not (pytester.path / "reports" / "results.json").exists()


def test_without_profile_jobs_the_controller_shows_the_workers_cases(pytester):
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("--backend=sim", "-n", "2", "-p", "no:cacheprovider", "-k", "test_schedule")
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["*pipeline cases*", "case *", "test_schedule?2-FThenB?*FThenB*2*4*sim/virtual*stream*"])
    assert not (pytester.path / "reports").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--backend=cpu", "-n", "2"], "ERROR: --profile-jobs with pytest-xdist (-n 2) on the cpu backend: cpu cases measure real time on "
                                   "this machine's cores, and parallel workers would take cores, caches and memory bandwidth*"),
    (["--backend=mpi", "-n", "2"], "ERROR: --profile-jobs with pytest-xdist (-n) and --backend=mpi: the mpi backend runs one pipeline "
                                   "rank per process that mpirun starts*"),
    (["--backend=sim", "-n", "2", "--dist", "each"], "ERROR: --profile-jobs with pytest-xdist's --dist each: every test would run on "
                                                     "each of the 2 workers, so every case would be reported that many times*"),
])
def test_splits_that_cannot_give_the_serial_report_are_refused(pytester, args, message):
    pytester.makepyfile(test_cases="def test_x():\n    pass\n")
    result = pytester.runpytest("--profile-jobs", *args, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_one_worker_on_cpu_is_its_one_device(pytester):
    pytester.makepyfile(test_cases="def test_x(pipeline):\n    pipeline(schedule='1F1B', stages=2, microbatches=2)\n")
    result = pytester.runpytest("--profile-jobs", "--backend=cpu", "--profile-steps=1:2", "-n", "1", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["pipeline-harness: cpu backend (requested); 1 pytest-xdist worker, their cases merged into one report*"])
    doc = json.loads((pytester.path / "reports" / "results.json").read_text())
    assert [c["backend"] for c in doc["cases"]] == ["cpu"]


# ---- cuda: GPUs per worker (no GPU needed: the split is checked against a given list) ----------------------------------

def _config(tx: list[str], dist: str = "load") -> SimpleNamespace:
    option = SimpleNamespace(tx=tx, dist=dist)
    return SimpleNamespace(option=option, getoption=lambda name, default=None: getattr(option, name, default))


def test_gpu_groups_give_each_worker_its_own_gpus():
    assert gpu_groups(["0", "1", "2", "3"], 4) == ["0", "1", "2", "3"]
    assert gpu_groups(["0", "1", "2", "3"], 2) == ["0,1", "2,3"]
    assert gpu_groups(["3", "GPU-a1", "5"], 2) == ["3", "GPU-a1"]  # the third is unused
    with pytest.raises(ConfigError, match=r"1 GPU\(s\) are visible here.* for 2 workers: use -n 1 or fewer"):
        gpu_groups(["0"], 2)


def test_cuda_workers_get_cuda_visible_devices_in_their_specs():
    config = _config(["2*popen", "popen//python=python3"])
    words = check_split(config, "cuda", "1 CUDA device(s)", visible=["0", "1", "2", "3", "4"])  # type: ignore[arg-type]
    assert config.option.tx == ["popen//env:CUDA_VISIBLE_DEVICES=0", "popen//env:CUDA_VISIBLE_DEVICES=1",
                                "popen//python=python3//env:CUDA_VISIBLE_DEVICES=2"]
    assert words == "3 pytest-xdist workers, one GPU each (CUDA_VISIBLE_DEVICES=0 | 1 | 2); 2 GPU(s) unused, their cases merged into one report"
    config = _config(["popen", "popen"])
    assert "2 GPUs each (CUDA_VISIBLE_DEVICES=0,1 | 2,3)" in check_split(config, "cuda", "", visible=["0", "1", "2", "3"])  # type: ignore[arg-type]


@pytest.mark.parametrize(("tx", "visible", "message"), [
    (["4*popen"], ["0", "1"], r"2 GPU\(s\) are visible here.* for 4 workers: use -n 2 or fewer"),
    (["popen", "ssh=gpu-host"], ["0", "1"], r"worker spec 'ssh=gpu-host' runs elsewhere"),
    (["popen//env:CUDA_VISIBLE_DEVICES=1"], ["0", "1"], r"sets CUDA_VISIBLE_DEVICES itself"),
    (["popen"], [], r"no GPU is visible here"),
])
def test_cuda_splits_the_harness_cannot_place_are_refused(tx, visible, message):
    with pytest.raises(ConfigError, match=message):
        check_split(_config(tx), "cuda", "", visible=visible)  # type: ignore[arg-type]


def test_the_env_key_reaches_the_worker_process():
    """What pytest-xdist's workers are started with: execnet sets ``env:`` keys in the new process
    before it runs anything (so before any CUDA initialisation there)."""
    execnet = pytest.importorskip("execnet")
    gw = execnet.makegateway(f"popen//python={sys.executable}//env:CUDA_VISIBLE_DEVICES=GPU-a1,3")
    try:
        seen = gw.remote_exec("import os; channel.send(os.environ.get('CUDA_VISIBLE_DEVICES'))").receive()
    finally:
        gw.exit()
    assert seen == "GPU-a1,3"


# ---- the merge of parts ---------------------------------------------------------------------------------------------

def _result(case_id: str, m: int = 2):
    return run_case(PipelineCase("1F1B", stages=2, microbatches=m), "sim", range(1, 2), case_id=case_id)


def test_parts_merge_in_the_serial_order_whatever_order_they_come_in():
    a, b, c, d = (_result(f"t::{x}", m) for x, m in zip("abcd", (2, 3, 4, 5)))
    c2 = _result("t::c#2", 6)
    first = make_part("gw0", [(3, d), (0, a)])  # a worker's own order: d ran before a
    second = make_part("gw1", [(2, c), (2, c2), (1, b)])
    for parts in ([first, second], [second, first]):
        wired = [SessionPart.from_wire(p.to_wire(), p.worker) for p in parts]  # as pytest-xdist carries them
        cases, errored = merge_cases(wired)
        assert [x["id"] for x in cases] == ["t::a", "t::b", "t::c", "t::c#2", "t::d"]  # c before c#2: its worker's order
        assert errored == []
        assert [line.case_id for line in merge_lines(wired)] == ["t::a", "t::b", "t::c", "t::c#2", "t::d"]
    assert [x["schedule"]["m"] for x in cases] == [2, 3, 4, 6, 5]
    assert worker_entries([second, first]) == [{"id": "gw0", "cases": ["t::d", "t::a"]}, {"id": "gw1", "cases": ["t::c", "t::c#2", "t::b"]}]


def test_a_case_that_cannot_be_reported_travels_as_errored_in_its_place():
    good, bad = _result("t::good"), _result("t::bad")
    bad.records.jobs[0] = dataclasses.replace(bad.records.jobs[0], end_ns=bad.records.jobs[0].start_ns - 5)  # as a faulty backend would
    part = make_part("gw3", [(1, good), (0, bad)], facts={"CUDA_VISIBLE_DEVICES": "3"})
    broken = SessionPart.from_wire(part.to_wire(), "gw3")
    broken.cases.append((2, "t::garbled", "garbled", b"{not json"))
    cases, errored = merge_cases([broken])
    assert [c["id"] for c in cases] == ["t::good"]
    assert [e["id"] for e in errored] == ["t::bad", "t::garbled"]
    assert errored[0]["error"] == "jobs.end_ns[0] (-5) is before jobs.start_ns[0] (0)"
    assert errored[1]["error"].startswith("its worker's data could not be read back")
    assert worker_entries([broken]) == [{"id": "gw3", "cases": ["t::good", "t::bad"], "CUDA_VISIBLE_DEVICES": "3"}]


def test_a_part_in_another_form_names_its_worker():
    with pytest.raises(InputFormatError, match=r"pytest-xdist worker gw1: its cases came in another form \(2; this harness reads format 1\)"):
        SessionPart.from_wire({"format": 2}, "gw1")
    wire = make_part("gw1", [(0, _result("t::a"))]).to_wire()
    wire["lines"][0][1]["row"] = ["too", "short"]
    with pytest.raises(InputFormatError, match=r"pytest-xdist worker gw1: a case's summary line is malformed"):
        SessionPart.from_wire(wire, "gw1")
