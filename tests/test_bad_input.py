"""Bad input from real bug reports (issue 12): nothing lost, nothing unbounded, every refusal a clear message."""

from __future__ import annotations

import configparser
import csv
import io
import json
import os
import re
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy  # noqa: F401 - imported before pytester's in-process runs (numpy cannot load twice)
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import PipelineCase, run_case
from harness.cli import main as cli_main
from harness.errors import ConfigError, InputFormatError, ResourceError, ScheduleError
from harness.imports.paddle import PaddleLogWarning, import_paddle_logs
from harness.model.checked import CheckedCost
from harness.model.cost import FixedCost
from harness.model.transformer import TransformerCost
from harness.report.hta import hta_rank_trace
from harness.report.render import write_report
from harness.report.results import case_to_dict, results_document
from harness.report.trace import RANK_STEP_TID, case_trace
from harness.report.tracecheck import check_trace
from harness.schedule import registry
from harness.schedule.model import Job, JobKind
from harness.schedule.notation import load_schedule_file, loads_csv
from harness.text import UnsafeTextWarning, shown_in_terminal


class _Custom:
    """A user's cost model: F lasts ``forward`` (whatever it is), everything else sensible."""

    def __init__(self, forward: object = 1000, flops: object = 0.0, nbytes: object = 0, comm: object = 0) -> None:
        self.forward, self._flops, self._nbytes, self.comm = forward, flops, nbytes, comm

    def duration_ns(self, job, num_stages):
        if job.kind.is_comm:
            return self.comm
        return self.forward if job.kind is JobKind.F else 2000

    def flops(self, job, num_stages):
        return self._flops

    def nbytes(self, job, num_stages):
        return self._nbytes

    def is_uniform(self, num_stages):
        return True

    def describe(self):
        return {"model": "custom"}


# ---- item 1: a custom cost model's answers are checked where they enter --------------------------------------------

@pytest.mark.parametrize(("forward", "why"), [
    (-5, "gave -5 ns for the F job of stage 0; it is negative"),
    (1e20, "gave 1e+20 ns for the F job of stage 0; durations must be below 2**53 ns (about 104 days)"),
    (float("nan"), "gave nan ns for the F job of stage 0; it is NaN"),
    (float("inf"), "gave inf ns for the F job of stage 0; durations must be below 2**53 ns"),
    (None, "gave None for the F job of stage 0; it is NoneType, not a number"),
    (0, "gave 0 ns for the F job of stage 0; compute jobs must last at least 1 ns"),
])
def test_custom_cost_answers_are_checked_naming_case_model_job_and_value(forward, why):
    case = PipelineCase("1F1B", stages=2, microbatches=2, cost=_Custom(forward), name="neg")
    with pytest.raises(ConfigError) as err:
        run_case(case, backend="sim")
    message = str(err.value)
    assert message.startswith(f"{case.declared_at}: case 'neg': cost model _Custom: duration_ns(0F0) ")
    assert "test_bad_input.py:" in case.declared_at
    assert why in message


@pytest.mark.parametrize(("method", "kw", "why"), [
    ("flops", {"flops": float("inf")}, "flops(0F0) gave inf FLOPs for the F job of stage 0; it is not finite"),
    ("nbytes", {"nbytes": 1.5}, "nbytes(0SEND_F0) gave 1.5 bytes for the SEND_F job of stage 0; it is not a whole number"),
])
def test_checked_cost_checks_flops_and_bytes(method, kw, why):
    checked = CheckedCost(_Custom(**kw), "here")
    job = Job(0, JobKind.SEND_F if method == "nbytes" else JobKind.F, 0)
    with pytest.raises(ConfigError, match=r"^here: cost model _Custom: ") as err:
        getattr(checked, method)(job, 2)
    assert why in str(err.value)


@pytest.mark.parametrize("backend", ["sim", "cpu"])
def test_bad_bytes_or_flops_stop_the_case_on_every_backend_though_sim_never_uses_them(backend):
    for kw, why in (({"nbytes": -10}, "nbytes(0F0) gave -10 bytes for the F job of stage 0; it is negative"),
                    ({"flops": float("nan")}, "flops(0F0) gave nan FLOPs for the F job of stage 0; it is NaN")):
        case = PipelineCase("1F1B", stages=2, microbatches=2, cost=_Custom(**kw), name="bad", comm=True)
        with pytest.raises(ConfigError) as err:
            run_case(case, backend=backend, steps=range(0, 1))
        assert str(err.value) == f"{case.declared_at}: case 'bad': cost model _Custom: {why}"


def test_analyze_checks_a_custom_cost_model_as_a_run_does():
    from harness.analysis.analytic import analyze
    from harness.schedule.registry import build_schedule

    with pytest.raises(ConfigError) as err:
        analyze(build_schedule("1F1B", 2, 2), _Custom(nbytes=-10), comm=True)  # it reported -40 point-to-point bytes
    assert str(err.value) == "cost model _Custom: nbytes(0SEND_F0) gave -10 bytes for the SEND_F job of stage 0; it is negative"
    with pytest.raises(ConfigError, match=r"duration_ns\(0F0\) gave -5 ns for the F job of stage 0; it is negative"):
        analyze(build_schedule("1F1B", 2, 2), _Custom(forward=-5))
    assert analyze(build_schedule("1F1B", 2, 2), _Custom(nbytes=64), comm=True).p2p_bytes == 4 * 64  # 2 sends each way


def test_a_subclass_of_a_shipped_cost_model_is_checked_as_a_custom_one():
    # FixedCost and TransformerCost check their values when made; a subclass's own methods may answer anything
    class Negative(FixedCost):
        def duration_ns(self, job, num_stages):
            return -7

    class NotANumber(TransformerCost):
        def duration_ns(self, job, num_stages):
            return float("nan")

    with pytest.raises(ConfigError, match=r"case '1F1B p=2 m=4': cost model Negative: duration_ns\(0\w+0\) gave -7 ns for the \w+ job "
                                          r"of stage 0; it is negative"):
        run_case(PipelineCase("1F1B", stages=2, microbatches=4, cost=Negative(forward_ns=10, backward_ns=20)), backend="sim")
    gpt = NotANumber(hidden_size=256, seq_len=128, micro_batch_size=1, num_layers=4, tflops=10)
    with pytest.raises(ConfigError, match=r"cost model NotANumber: duration_ns\(0\w+0\) gave nan ns for the \w+ job of stage 0; it is NaN"):
        run_case(PipelineCase("1F1B", stages=2, microbatches=4, cost=gpt), backend="sim")


def test_checked_cost_passes_valid_answers_through():
    checked = CheckedCost(_Custom(forward=1500, flops=3, nbytes=64, comm=0))
    assert checked.duration_ns(Job(0, JobKind.F, 0), 2) == 1500
    assert checked.duration_ns(Job(0, JobKind.SEND_F, 0), 2) == 0  # free transfers are fine
    assert checked.flops(Job(0, JobKind.F, 0), 2) == 3.0
    assert checked.nbytes(Job(0, JobKind.SEND_F, 0), 2) == 64
    result = run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=_Custom(1500)), backend="sim")
    assert result.cost == {"model": "custom"}
    assert result.metrics.step_time_median_ns == 3 * (1500 + 2000)  # 1F1B p=2 m=2: (m+p-1)(F+B)


UNREPORTABLE = """
import dataclasses
import pytest
from harness.case import PipelineCase
from harness.model.cost import FixedCost

class Neg:
    def duration_ns(self, job, n): return -5 if job.kind.name == "F" else 0 if job.kind.is_comm else 2000
    def flops(self, job, n): return 0.0
    def nbytes(self, job, n): return 0
    def is_uniform(self, n): return True
    def describe(self): return {"model": "neg"}

def test_good(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2, cost=FixedCost.ms(F=1, B=2)))

def test_negative_cost(pipeline):
    pipeline(PipelineCase("1F1B", stages=2, microbatches=2, cost=Neg()))

def test_broken_records(pipeline):
    r = pipeline(PipelineCase("FThenB", stages=2, microbatches=2, cost=FixedCost.ms(F=1, B=2)))
    r.records.jobs[0] = dataclasses.replace(r.records.jobs[0], end_ns=r.records.jobs[0].start_ns - 5)  # as a faulty backend would
"""


def test_one_unreportable_case_does_not_lose_the_others(pytester):
    pytester.makepyfile(test_cases=UNREPORTABLE)
    result = pytester.runpytest("--profile-jobs", "--backend=sim", "-p", "no:cacheprovider")
    assert result.ret == 1  # the negative cost's test failed; no exit 4 "could not write the report"
    result.stdout.fnmatch_lines([
        "*ConfigError: test_cases.py:17: case 'test_negative_cost': cost model Neg: duration_ns(0F0) gave -5 ns "
        "for the F job of stage 0; it is negative",
        "1 case(s) ran but could not be reported (listed as errored in the report; every other case was written):",
        "  test_cases.py::test_broken_records: jobs.end_ns[0] (-5) is before jobs.start_ns[0] (0)",
    ])
    reports = pytester.path / "reports"
    doc = json.loads((reports / "results.json").read_text())
    assert [c["id"] for c in doc["cases"]] == ["test_cases.py::test_good"]
    assert doc["session"]["errored_cases"] == [{
        "id": "test_cases.py::test_broken_records", "label": "test_broken_records",
        "error": "jobs.end_ns[0] (-5) is before jobs.start_ns[0] (0)",
    }]
    assert (reports / "traces" / "test_cases.py__test_good.json").is_file()
    page = (reports / "index.html").read_text()
    assert "1 case(s) could not be reported" in page and "<bdi>test_broken_records</bdi>" in page


# ---- item 3: schedule files are bounded ----------------------------------------------------------------------------

def test_a_cell_over_the_csv_field_limit_is_an_input_format_error(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text("0F0,0B0\n1F0," + "x" * 140_000 + ",1B0\n")  # over csv's 131,072-character field limit
    with pytest.raises(InputFormatError) as err:
        load_schedule_file(path)
    assert str(err.value).startswith(f"{path}: row 2 (rank 1), cell 2: more than 1,024 characters (starts 'xxxxxxxxxxxxxxxxxxxx')")


@pytest.mark.skipif(not os.path.exists("/dev/zero") or not hasattr(os, "mkfifo"), reason="needs /dev/zero and FIFOs")
def test_only_regular_files_are_read(tmp_path):
    link = tmp_path / "zero.csv"
    link.symlink_to("/dev/zero")
    with pytest.raises(InputFormatError, match=r"is a character device \(a link to /dev/zero\), not a schedule file; only regular files"):
        load_schedule_file(link)
    fifo = tmp_path / "f.csv"
    os.mkfifo(fifo)  # opening it would block until a writer came: it is refused before
    with pytest.raises(InputFormatError, match=r"f\.csv: is a FIFO \(named pipe\), not a schedule file"):
        load_schedule_file(fifo)


def test_show_refuses_a_fifo(tmp_path, capsys):
    if not hasattr(os, "mkfifo"):
        pytest.skip("needs FIFOs")
    fifo = tmp_path / "f.csv"
    os.mkfifo(fifo)
    assert cli_main(["show", str(fifo)]) == 2
    assert f"{fifo}: is a FIFO (named pipe), not a schedule file" in capsys.readouterr().err


def test_the_size_cap_follows_the_job_limit_and_is_stated(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "MAX_JOBS", 10)  # cap: 10 jobs x 32 bytes = 320 bytes
    path = tmp_path / "big.csv"
    path.write_text("0F0," + " " * 400 + "\n")
    with pytest.raises(InputFormatError) as err:
        load_schedule_file(path)
    assert str(err.value) == f"{path}: 405 bytes, more than the 320 a schedule file may have (32 bytes per job of the 10-job limit)"
    with pytest.raises(InputFormatError, match=r"^<csv>: more than 320 bytes, the most a schedule file is read for"):
        loads_csv("0F0," + " " * 100_000)  # text given directly, streamed likewise
    many = ",".join(f"0F{i}" for i in range(11))  # 11 jobs in 54 bytes
    with pytest.raises(InputFormatError, match=r"^<csv>: row 1 \(rank 0\), cell 11: more than the 10 jobs this harness builds"):
        loads_csv(many)


def test_repeated_cells_stop_at_the_first_duplicate_with_memory_of_the_valid_jobs(tmp_path):
    path = tmp_path / "dup.csv"
    with open(path, "w") as fh:
        for _ in range(13):
            fh.write("0F0," * 1_000_000)  # 52 MB on one line
    tracemalloc.start()
    try:
        with pytest.raises(ScheduleError) as err:
            load_schedule_file(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(err.value) == f"{path}: row 1 (rank 0), cell 2 (step 1): 0F0 is listed twice (first at row 1, step 0)"
    assert peak < 4_000_000  # a chunk and a few cells, not the 52 MB line (6.2 GB before)


def test_streamed_csv_reads_quotes_and_line_endings_as_the_csv_module_does():
    text = '"0F0",,"0B0"\r\n,1F0,1B0\r\n\r\n'
    s = loads_csv(text)
    assert s.to_text() == [["0F0", "", "0B0"], ["", "1F0", "1B0"]]
    assert [row for row in csv.reader(io.StringIO(text)) if row] == [["0F0", "", "0B0"], ["", "1F0", "1B0"]]
    with pytest.raises(InputFormatError, match=r"^<csv>: row 1 \(rank 0\), cell 2: a quote that does not close"):
        loads_csv('0F0,"0B0\n1F0,1B0\n')


# ---- item 2: lone surrogates ----------------------------------------------------------------------------------------

def test_a_lone_surrogate_in_a_case_name_is_replaced_once_with_a_warning(tmp_path):
    with pytest.warns(UnsafeTextWarning, match=r"case name 'sur\\ud800x' holds surrogate code points .* written as 'sur\ufffdx'"):
        case = PipelineCase("1F1B", stages=2, microbatches=2, name="sur\ud800x")
    assert case.name == "sur\ufffdx"
    result = run_case(case, backend="sim")
    write_report(tmp_path / "rep", results_document([case_to_dict(result)]))
    doc = json.loads((tmp_path / "rep" / "results.json").read_text(encoding="utf-8"))
    assert doc["cases"][0]["label"] == "sur\ufffdx"
    assert "sur\ufffdx" in (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")


def test_write_report_refuses_a_surrogate_with_a_message_not_a_unicode_error(tmp_path):
    result = run_case(PipelineCase("1F1B", stages=2, microbatches=2), backend="sim")
    case = case_to_dict(result)
    case["label"] = "\ud800"  # a document built by hand, past the case's own check
    with pytest.raises(InputFormatError) as err:
        write_report(tmp_path / "rep", results_document([case]))
    assert str(err.value) == ("results: case '1F1B p=2 m=2' (cases[0]): label holds a surrogate code point (U+D800..U+DFFF, "
                              "e.g. from a \\ud800 escape), which is not valid Unicode text")
    assert not (tmp_path / "rep").exists()


def test_a_results_file_with_a_lone_surrogate_escape_is_refused_by_report_and_compare(tmp_path, capsys):
    result = run_case(PipelineCase("1F1B", stages=2, microbatches=2), backend="sim")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(results_document([case_to_dict(result)])))
    bad = tmp_path / "bad.json"
    bad.write_text(good.read_text().replace('"label":"1F1B p=2 m=2"', '"label":"sur\\ud800x"').replace(
        '"label": "1F1B p=2 m=2"', '"label": "sur\\ud800x"'))
    assert "\\ud800" in bad.read_text()
    message = (f"{bad}: cases[0].label holds a lone surrogate (a \\uD800..\\uDFFF escape that is not half of a pair), "
               "which is not valid Unicode text and cannot be written to a report; fix that string in the file")
    for argv in (["report", str(bad), "--out", str(tmp_path / "out")], ["compare", str(good), str(bad)]):
        assert cli_main(argv) == 2
        assert message in capsys.readouterr().err
    paired = tmp_path / "paired.json"  # an escaped pair is one character, and fine
    paired.write_text(bad.read_text().replace("\\ud800", "\\ud83d\\ude00"))
    assert cli_main(["report", str(paired), "--out", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))["cases"][0]["label"] == "sur\U0001f600x"


# ---- item 8: the job limit counts the jobs that will exist -----------------------------------------------------------

def test_the_job_limit_counts_send_receive_jobs_and_states_the_memory(monkeypatch):
    monkeypatch.setattr(registry, "MAX_JOBS", 1000)
    # 1F1B p=8 m=60: 960 compute jobs (under the limit), plus 4 x 60 x 7 = 1,680 send/receive jobs
    case = PipelineCase("1F1B", stages=8, microbatches=60, comm=True, name="big")
    with pytest.raises(ConfigError) as err:
        case.build()
    assert str(err.value) == (
        f"{case.declared_at}: case 'big': schedule '1F1B' (960 compute jobs) with its send/receive jobs added would have about "
        "2,640 jobs, more than the 1,000 this harness builds (they would need about 950.4 kB (360 bytes per job); the limit is "
        "about 360.0 kB (360 bytes per job); raise harness.schedule.registry.MAX_JOBS if the machine has the memory)"
    )
    assert PipelineCase("1F1B", stages=8, microbatches=60, comm=False).build().num_jobs == 960  # compute only: allowed


def test_the_default_limit_message_states_the_measured_bytes_per_job():
    with pytest.raises(ConfigError) as err:
        registry.build_schedule("Interleaved1F1B", 64, 100_000, 2)
    assert ("would have about 25,600,000 jobs, more than the 20,000,000 this harness builds (they would need about 9.2 GB "
            "(360 bytes per job); the limit is about 7.2 GB (360 bytes per job)") in str(err.value)


def test_out_of_memory_in_the_analytic_path_is_a_clear_error(monkeypatch):
    from harness.analysis import analytic as analytics

    def no_memory(*args, **kwargs):
        raise MemoryError("Unable to allocate 15.2 GiB for an array with shape (2038000000,) and data type int64")

    monkeypatch.setattr(analytics, "simulate", no_memory)
    schedule = registry.build_schedule("1F1B", 4, 8)
    with pytest.raises(ResourceError) as err:
        analytics.analyze(schedule, FixedCost.ms(F=1, B=2, p2p_latency_ns=10))
    assert str(err.value) == (
        "schedule '1F1B': analysing its timeline: out of memory with 160 jobs, which need about 57.6 kB (360 bytes per job); "
        "run a smaller case (fewer micro-batches or ranks) or on a machine with more memory"
    )  # 64 compute jobs + 4 x 8 x 3 send/receive jobs
    assert isinstance(err.value, MemoryError)


# ---- item 9: trace identity -----------------------------------------------------------------------------------------

def test_ranks_are_pid_rank_plus_one_and_hta_keeps_the_rank():
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2), backend="sim"))
    doc = case_trace(case)
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert names == {1: "rank 0 (sim)", 2: "rank 1 (sim)", 3: "Steps"}
    assert {e["pid"] for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] == "0F0"} == {1}
    assert check_trace(doc) == []
    assert "time_base_epoch_ns" not in doc["otherData"]  # sim time is virtual: no host clock to place it on
    rank1 = hta_rank_trace(case, 1)
    assert rank1["distributedInfo"]["rank"] == 1
    assert {e["pid"] for e in rank1["traceEvents"]} == {2}
    assert {e["args"]["device"] for e in rank1["traceEvents"] if e.get("cat") == "kernel"} == {1}


def test_the_time_base_epoch_is_kept_in_results_and_traces():
    before = time.time_ns()
    result = run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=FixedCost.ms(F=1, B=2)), backend="cpu", steps=range(0, 1))
    after = time.time_ns()
    case = case_to_dict(result)
    epoch = case["device"]["host_anchor_ns"]  # in results.json: the epoch time of time base 0
    assert before <= epoch <= after
    assert case_trace(case)["otherData"]["time_base_epoch_ns"] == epoch
    assert hta_rank_trace(case, 0)["otherData"]["time_base_epoch_ns"] == epoch


# ---- item 6: bidirectional and control characters --------------------------------------------------------------------

def test_shown_in_terminal_escapes_controls_and_bidi():
    assert shown_in_terminal("rtl\u202eVSC.exe.csv") == "rtl\\u202eVSC.exe.csv"
    assert shown_in_terminal("a\nb\x1b[31m\u2067") == "a\\nb\\x1b[31m\\u2067"
    assert shown_in_terminal("ZB-H1 p=4 ü 中") == "ZB-H1 p=4 ü 中"


BIDI_CASES = """
from pathlib import Path
from harness.case import PipelineCase

HERE = Path(__file__).parent

def test_rtl(pipeline):
    pipeline(PipelineCase(HERE / "rtl\\u202eVSC.exe.csv"))

def test_newline(pipeline):
    pipeline(PipelineCase(HERE / "two\\nlines.csv", name="case\\u202ename"))
"""


def test_summary_rows_escape_bidi_and_newlines(pytester):
    for name in ("rtl\u202eVSC.exe.csv", "two\nlines.csv"):
        (pytester.path / name).write_text("0F0,0F1,,0B0,0B1\n,1F0,1B0,1F1,1B1\n")
    pytester.makepyfile(test_cases=BIDI_CASES)
    result = pytester.runpytest("--backend=sim", "-p", "no:cacheprovider", "-p", "no:randomly")
    assert result.ret == 0
    rows = [line for line in result.outlines if line.startswith(("test_rtl", "test_newline")) and "sim/virtual" in line]
    assert [row.split()[0] for row in rows] == ["test_rtl", "test_newline"] and len(rows) == 2
    assert "rtl\\u202eVSC.exe.csv" in rows[0] and "two\\nlines.csv" in rows[1]
    assert "(case\\u202ename)" in rows[1]  # the case's own name, after its test's, escaped too
    assert not any("\u202e" in line for line in result.outlines)


# ---- item 4: PaddlePaddle logs ---------------------------------------------------------------------------------------

def _paddle_line(job_type: str, mb: int, start_ms: float, end_ms: float) -> str:
    return (f"I1020 09:15:07.265326 22317 standalone_executor.cc:217] Profiler Info: Job (1), type = {job_type}, "
            f"micro_batch_id = {mb}, job_start_time = {start_ms:.6f}, job_end_time = {end_ms:.6f}\n")


def _paddle_log(base: float, types: tuple[str, ...] = ("forward", "backward")) -> str:
    return "".join(_paddle_line(t, mb, base + 10 * k + 5 * i, base + 10 * k + 5 * i + 4)
                   for k, mb in enumerate(range(2)) for i, t in enumerate(types))


def test_two_logs_of_one_device_are_refused(tmp_path):
    for name in ("workerlog.0", "workerlog.1", "workerlog.01"):
        (tmp_path / name).write_text(_paddle_log(1_697_793_307_000.0))
    with pytest.raises(InputFormatError) as err:
        import_paddle_logs(tmp_path)
    assert str(err.value) == f"{tmp_path}: workerlog.01 and workerlog.1 both name device 1; one log per device: remove or rename the other"


def test_a_folder_named_like_a_log_and_an_optimizer_only_log_are_warned_about(tmp_path):
    (tmp_path / "workerlog.0").write_text(_paddle_log(1_697_793_307_000.0))
    (tmp_path / "workerlog.1").mkdir()
    (tmp_path / "workerlog.2").write_text(_paddle_line("optimizer", 0, 1_697_793_307_050.0, 1_697_793_307_051.0))
    with pytest.warns(PaddleLogWarning):
        case = import_paddle_logs(tmp_path)
    assert f"{tmp_path / 'workerlog.1'}: named like a worker log but a folder; skipped" in case["warnings"]
    assert (f"{tmp_path / 'workerlog.2'}: no forward or backward jobs, only optimizer (1 line(s)); "
            "imported as GPU 2 with no pipeline work") in case["warnings"]
    assert case["rank_labels"] == ["GPU 0", "GPU 2"]


def test_newer_paddle_send_and_receive_jobs_are_communication_jobs(tmp_path):
    base = 1_697_793_307_000.0
    text = "".join([
        _paddle_line("forward", 0, base, base + 4), _paddle_line("send_forward", 0, base + 4, base + 5),
        _paddle_line("recv_backward", 0, base + 6, base + 7), _paddle_line("backward", 0, base + 7, base + 11),
    ])
    (tmp_path / "workerlog.0").write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleLogWarning)  # no warning: all four types are known
        case = import_paddle_logs(tmp_path)
    assert case["jobs"]["kind"] == ["F", "SEND_F", "RECV_B", "B"]
    assert case["streams"] == ["rank0/compute", "rank0/comm"] and case["jobs"]["stream"] == [0, 1, 1, 0]
    assert case["metrics"]["per_step"][0]["busy_ns"] == [8_000_000]  # F and B; the transfers are not busy time
    assert not any("unknown job type" in w for w in case.get("warnings", []))
    assert check_trace(case_trace(case)) == []


# ---- item 5: Paddle import writes nesting step slices ----------------------------------------------------------------

def test_lagging_device_steps_nest_per_rank_and_on_the_steps_track(tmp_path):
    base = 1_697_793_307_000.0
    for device, lag in ((0, 0.0), (1, 1.0)):  # device 1 lags device 0 by 1 ms
        text = ""
        for step in range(3):
            t0 = base + 10 * step + lag
            text += (_paddle_line("forward", 0, t0, t0 + 2) + _paddle_line("forward", 1, t0 + 2, t0 + 4)
                     + _paddle_line("backward", 0, t0 + 4, t0 + 6) + _paddle_line("backward", 1, t0 + 6, t0 + 9.5))
        (tmp_path / f"workerlog.{device}").write_text(text)
    case = import_paddle_logs(tmp_path)
    assert case["step_start_ns"] == [0, 10_000_000, 20_000_000] and case["step_end_ns"] == [10_500_000, 20_500_000, 30_500_000]
    doc = case_trace(case)
    assert check_trace(doc) == []
    steps = [(e["pid"], e["tid"], e["name"], e["ts"], e["dur"]) for e in doc["traceEvents"] if e.get("cat") == "step"]
    assert steps[:3] == [(3, 0, "ProfilerStep#0", 0.0, 10500.0), (3, 1, "ProfilerStep#1", 10000.0, 10500.0),
                         (3, 0, "ProfilerStep#2", 20000.0, 10500.0)]  # union spans; an overlapping one on its own thread
    assert [s for s in steps if s[:2] == (2, RANK_STEP_TID)] == [  # GPU 1's own steps, on its own track
        (2, RANK_STEP_TID, f"ProfilerStep#{k}", 1000.0 + 10000.0 * k, 9500.0) for k in range(3)]
    marker = next(e for e in doc["traceEvents"] if e.get("cat") == "step" and e["name"] == "ProfilerStep#1" and e["pid"] == 3)
    assert marker["args"]["overlaps_previous_step_ns"] == 500_000
    for rank in (0, 1):
        hta = hta_rank_trace(case, rank)
        assert check_trace(hta) == []
        host = [(e["ts"], e["dur"]) for e in hta["traceEvents"] if e.get("cat") == "user_annotation"]
        assert host == [(1000.0 * rank + 10000.0 * k, 9500.0) for k in range(3)]


# ---- item 10: small usability defects -------------------------------------------------------------------------------

def test_show_asks_for_v_for_an_interleaved_schedule_and_names_the_slot_column(capsys):
    assert cli_main(["show", "Interleaved1F1B", "-p", "4", "-m", "8"]) == 2  # never a silent v=1 (which it refuses anyway)
    err = capsys.readouterr().err
    assert err == ("error: schedule 'Interleaved1F1B' places several chunks per rank: give -v (chunks per rank), "
                   "e.g. show Interleaved1F1B -p 4 -m 8 -v 2\n")
    assert cli_main(["show", "Interleaved1F1B", "-p", "4", "-m", "8", "-v", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["slot", "rank", "0"]


def test_export_paddle_accepts_the_short_label_the_report_shows(tmp_path, capsys):
    cases = [case_to_dict(run_case(PipelineCase(s, stages=2, microbatches=2), backend="sim", case_id=f"cases/test_zoo.py::test_schedule_zoo[{s}]"))
             for s in ("ZB-H1", "1F1B")]
    results = tmp_path / "results.json"
    results.write_text(json.dumps(results_document(cases)))
    assert cli_main(["export-paddle", str(results), "--case", "test_schedule_zoo[ZB-H1]", "--out", str(tmp_path / "logs")]) == 0
    assert "ZB-H1" in (tmp_path / "logs" / "workerlog.0").read_text()
    assert cli_main(["export-paddle", str(results), "--case", "test_schedule_zoo", "--out", str(tmp_path / "x")]) == 2
    assert "no case 'test_schedule_zoo' in " in capsys.readouterr().err
    twice = [dict(cases[0]), dict(cases[0], id="other/test_zoo.py::test_schedule_zoo[ZB-H1]")]
    results.write_text(json.dumps(results_document(twice)))
    assert cli_main(["export-paddle", str(results), "--case", "test_schedule_zoo[ZB-H1]", "--out", str(tmp_path / "y")]) == 2
    assert ("--case 'test_schedule_zoo[ZB-H1]' names 2 cases in " in capsys.readouterr().err)


def test_export_paddle_accepts_the_id_as_written_and_as_on_disk(tmp_path, capsys):
    # issue 26: --case wanted "1F1B p=4 m=8" while the report's files are named 1F1B_p=4_m=8
    from harness.report.render import write_report

    cases = [case_to_dict(run_case(PipelineCase(s, stages=2, microbatches=2), backend="sim")) for s in ("1F1B", "ZB-H1")]
    assert [c["id"] for c in cases] == ["1F1B p=2 m=2", "ZB-H1 p=2 m=2"]
    files = write_report(tmp_path / "rep", results_document(cases))
    assert sorted(p.name for p in files.traces.values()) == ["1F1B_p=2_m=2.json", "ZB-H1_p=2_m=2.json"]
    results = tmp_path / "rep" / "results.json"
    for k, wanted in enumerate(("ZB-H1 p=2 m=2", "ZB-H1_p=2_m=2", "ZB-H1_p=2_m=2.json", "traces/ZB-H1_p=2_m=2.json",
                                str(tmp_path / "rep" / "hta" / "ZB-H1_p=2_m=2") + "/")):
        out = tmp_path / f"logs{k}"
        assert cli_main(["export-paddle", str(results), "--case", wanted, "--out", str(out)]) == 0, capsys.readouterr().err
        assert "backward_w" in (out / "workerlog.0").read_text()  # ZB-H1's split backward, not 1F1B's
    assert cli_main(["export-paddle", str(results), "--case", "ZB-H1_p=2", "--out", str(tmp_path / "none")]) == 2
    assert "(by id, label, short label or name on disk)" in capsys.readouterr().err


def test_a_misspelt_pipeline_case_keyword_gets_did_you_mean():
    with pytest.raises(ConfigError) as err:
        PipelineCase("1F1B", stages=4, microbatch=8)
    assert re.fullmatch(r"(tests/)?test_bad_input\.py:\d+: PipelineCase\(\.\.\.\): unknown field 'microbatch' \(did you mean 'microbatches'\?\); "
                        r"valid fields: schedule, stages, microbatches, chunks, .*", str(err.value)), str(err.value)
    with pytest.raises(ConfigError, match=r"PipelineCase\(\.\.\.\): missing field 'schedule'"):
        PipelineCase(stages=4, microbatches=8)
    assert "test_bad_input.py:" in (PipelineCase("1F1B", stages=4, microbatches=8).declared_at or "")


def test_tox_cases_envs_install_the_harness_alone_and_keep_their_reports():
    config = configparser.ConfigParser(interpolation=None)
    config.read(Path(__file__).parent.parent / "tox.ini")
    env = config["testenv:cases-{sim,cpu}"]
    assert env["extras"].strip() == ""  # no test extras, so no HTA
    assert "{env_tmp_dir}" not in env["commands"] and "--report-dir={tox_root}/reports-tox/{env_name}" in env["commands"]


def test_transformer_cost_documents_its_units():
    doc = TransformerCost.__doc__ or ""
    for words in ("of the whole model (not per stage)", "TFLOP/s, i.e. 1e12 floating-point", "``Q K^T``",
                  "p2p_latency_ns, p2p_gbytes_per_s: point-to-point link, both accepted"):
        assert words in doc


# ---- item 7: the step split stays linear ----------------------------------------------------------------------------

def _wrong_id_log(path: Path, lines_per_step: int, steps: int = 3) -> None:
    """A 1F1B-like log (all forwards, then all backwards, per step) whose step 1 prints micro-batch 1's forward as 0."""
    m, t, out = lines_per_step // 2, 1_697_793_307_000.0, []
    for s in range(steps):
        for kind in ("forward", "backward"):
            for mb in range(m):
                out.append(_paddle_line(kind, 0 if (s == 1 and kind == "forward" and mb == 1) else mb, t, t + 0.5))
                t += 1
    path.write_text("".join(out))


def test_one_repeated_micro_batch_id_costs_a_bounded_number_of_passes(tmp_path, monkeypatch):
    from harness.imports import paddle, paddle_steps

    calls = []
    real = paddle._split_cost
    monkeypatch.setattr(paddle_steps, "_split_cost", lambda blocks: calls.append(len(blocks)) or real(blocks))  # where the split calls it
    _wrong_id_log(tmp_path / "workerlog.0", 10_000)  # 30,000 lines: 141 s before (2,500 candidate lengths, each a full pass)
    jobs, _, _ = paddle.parse_worker_log(tmp_path / "workerlog.0")
    problems: list[str] = []
    blocks = paddle._split_steps(jobs, tmp_path / "workerlog.0", problems)
    assert [len(b) for b in blocks] == [10_000, 10_000, 10_000]
    assert 1 <= len(calls) <= paddle.MAX_SPLIT_CANDIDATES + 1  # each a linear pass over the lines
    assert problems == []  # the repeating pattern settles it; the wrong id itself is reported by the id check
    with pytest.warns(PaddleLogWarning) as record:
        import_paddle_logs(tmp_path)
    assert [str(w.message) for w in record] == [
        f"{tmp_path / 'workerlog.0'}:10001: GPU 0, step 1: forward has micro-batch 0 twice (lines 10001, 10002); no micro-batch 1: "
        "a micro_batch_id on these lines is wrong; the jobs are kept as logged"]


def test_an_ambiguous_split_is_a_warning_naming_file_and_line(tmp_path):
    base = 1_697_793_307_000.0
    types = [("forward", 0), ("forward", 1), ("backward", 0), ("backward", 1),
             ("forward", 0), ("forward", 0), ("backward", 0), ("backward", 1)]  # step 1 prints forward 1 as 0
    (tmp_path / "workerlog.0").write_text("".join(_paddle_line(t, mb, base + k, base + k + 0.5) for k, (t, mb) in enumerate(types)))
    with pytest.warns(PaddleLogWarning) as record:
        case = import_paddle_logs(tmp_path)
    notes = [str(w.message) for w in record if "ambiguous step split" in str(w.message)]
    assert notes == [f"{tmp_path / 'workerlog.0'}:5: ambiguous step split (a repeated micro_batch_id?): steps of 4 or 5 jobs fit "
                     "this log equally well; took 4 jobs per step, the second step starting here"]
    assert case["steps"] == [0, 1]


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.lists(st.sampled_from(["0F0", "1B2", "", " ", "a,b", 'q"q', "line\nbreak", '"', "x\r\ny"]),
                              min_size=1, max_size=5), min_size=1, max_size=4),
       ending=st.sampled_from(["\n", "\r\n"]), chunk=st.sampled_from([5, 64, 1 << 16]))
def test_the_streamed_reader_reads_what_csv_writes_as_csv_does(rows, ending, chunk):
    from harness.schedule import notation

    out = io.StringIO()
    csv.writer(out, lineterminator=ending).writerows(rows)
    text = out.getvalue()
    old_chunk = notation._CHUNK_CHARS
    notation._CHUNK_CHARS = chunk  # rows and quoted cells across chunk boundaries
    try:
        got: dict[int, list[str]] = {}
        for r, c0, texts in notation._cells(io.StringIO(text), "x"):
            assert len(got.setdefault(r, [])) == c0
            got[r].extend(texts)
    finally:
        notation._CHUNK_CHARS = old_chunk
    assert [got[r] for r in sorted(got)] == [row or [""] for row in csv.reader(io.StringIO(text, newline=""))]


def test_non_whole_ns_round_to_the_nearest_ns_everywhere():
    # FixedCost(forward_ns=1.7) truncated to 1 ns while FixedCost.ms(F=1.7e-6) rounded to 2 ns
    assert FixedCost(forward_ns=1.7, backward_ns=3).forward_ns == 2 == FixedCost.ms(F=1.7e-6, B=3e-6).forward_ns
    assert FixedCost(forward_ns=999.9, backward_ns=3000).forward_ns == 1000
    assert FixedCost(forward_ns=[1.4, 2.6], backward_ns=3).forward_ns == (1, 3)
    with pytest.raises(ConfigError, match=r"^cost model: forward_ns must be at least 1 ns, got 0\.3 \(it rounds to 0 ns\)$"):
        FixedCost(forward_ns=0.3, backward_ns=3)
    # every duration field, and the model holds (and describes) the rounded value
    rounded = FixedCost(forward_ns=10, backward_ns=20, p2p_latency_ns=1.7, optimizer_ns=2.6, unshard_ns=3.6, overlap_ns=7.7)
    assert (rounded.p2p_latency_ns, rounded.optimizer_ns, rounded.unshard_ns, rounded.overlap_ns) == (2, 3, 4, 8)
    assert rounded.describe()["p2p_latency_ns"] == 2 and FixedCost.ms(F=1, B=2, p2p_latency_ns=1.7).p2p_latency_ns == 2
    assert TransformerCost(hidden_size=64, seq_len=16, micro_batch_size=1, num_layers=4, tflops=1, p2p_latency_ns=1.7).p2p_latency_ns == 2
    for name in ("p2p_latency_ns", "optimizer_ns", "reduce_grad_ns", "overlap_ns"):
        with pytest.raises(ConfigError, match=rf"^cost model: {name} must be 0 or at least 1 ns, got 0\.4 \(it rounds to 0 ns\)$"):
            FixedCost(forward_ns=10, backward_ns=20, **{name: 0.4})
    # a 1.7 ns latency runs as the 2 ns it is stored as
    c = FixedCost(forward_ns=10, backward_ns=20, p2p_latency_ns=1.7)
    assert run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=c), backend="sim").metrics.step_time_median_ns == \
        run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=FixedCost(forward_ns=10, backward_ns=20, p2p_latency_ns=2)),
                 backend="sim").metrics.step_time_median_ns
    checked = CheckedCost(_Custom(forward=1500.6))
    assert checked.duration_ns(Job(0, JobKind.F, 0), 2) == 1501
    result = run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=_Custom(1.7)), backend="sim")
    assert result.metrics.step_time_median_ns == 3 * (2 + 2000)  # 1F1B p=2 m=2: (m+p-1)(F+B), F rounded to 2 ns
