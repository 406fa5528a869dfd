"""The column writers of traces, HTA rank files and results.json (issue 13): the same bytes as
the writers they replace (frozen in tests/_reference_trace.py and _reference_hta.py), linear in
jobs whatever p, gzip output the checker and HTA read, traced steps, flows, size warnings."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import pytest
from _reference_hta import hta_rank_trace as reference_hta
from _reference_trace import case_trace as reference_trace

import harness.report.hta as hta_mod
from harness.case import PipelineCase
from harness.cli import main
from harness.errors import ConfigError
from harness.imports.paddle import import_paddle_logs
from harness.model.cost import FixedCost
from harness.model.transformer import TransformerCost
from harness.report.hta import hta_rank_text, write_hta_traces
from harness.report.jsontext import dumps_document
from harness.report.output import (
    SIZE_WARN_BYTES,
    ReportSizeWarning,
    TraceOptions,
    parse_trace_options,
    read_json,
    size_warning,
    trace_size_estimate,
)
from harness.report.render import write_report
from harness.report.results import case_to_dict, load_results, results_document
from harness.report.trace import case_trace, first_steps, trace_text, write_trace
from harness.report.tracecheck import check_trace, check_trace_file
from harness.runner import run_case
from harness.schedule.registry import builder_info, schedule_names

COMPACT = (",", ":")


def _case(schedule: str, comm: bool | None = None, comm_model: str | None = None, p: int = 4, m: int = 8, steps: range = range(1, 3),
          cost: object = None) -> dict:
    v = 2 if builder_info(schedule).takes_chunks else 1
    kw = {} if cost is None else {"cost": cost}
    pc = PipelineCase(schedule, stages=p, microbatches=m, chunks=v, comm=comm, comm_model=comm_model, **kw)
    return case_to_dict(run_case(pc, "sim", steps))


def _same_trace(case: dict) -> None:
    want = json.dumps(reference_trace(case), separators=COMPACT, allow_nan=False)
    assert trace_text(case) == want
    assert trace_text(case, flows=False) == json.dumps(reference_trace(case, flows=False), separators=COMPACT, allow_nan=False)
    for rank in range(int(case["schedule"]["p"])):
        assert hta_rank_text(case, rank) == json.dumps(reference_hta(case, rank), allow_nan=False)


@pytest.mark.parametrize("comm_model", ["free", "edge", "stream"])
@pytest.mark.parametrize("schedule", schedule_names())
def test_every_schedule_writes_the_same_bytes_as_before(schedule, comm_model):
    _same_trace(_case(schedule, comm_model=comm_model))


def test_recompute_and_memory_counters_write_the_same_bytes():
    c = TransformerCost(hidden_size=256, seq_len=128, micro_batch_size=1, num_layers=4, tflops=1, recompute="full")
    case = case_to_dict(run_case(PipelineCase("1F1B", 2, 3, cost=c), "sim"))
    assert case.get("recompute") and case.get("memory")
    _same_trace(case)
    doc = case_trace(case)
    assert len([e for e in doc["traceEvents"] if e.get("name") == "recompute"]) == 6  # 3 backwards per stage, 2 stages
    assert len([e for e in doc["traceEvents"] if e["ph"] == "C"]) == sum(len(x["t_ns"]) for x in case["memory"]["timeline"])


def test_a_paddle_import_with_overlapping_jobs_and_odd_kinds_writes_the_same_bytes(tmp_path):
    def line(t, mb, a, b):
        return f"Profiler Info: Job ({mb}), type = {t}, micro_batch_id = {mb}, job_start_time = {a:.6f}, job_end_time = {b:.6f}"

    (tmp_path / "workerlog.0").write_text("\n".join([
        line("lr", 0, 999, 999.5), line("forward", 0, 1000, 1004), line("forward", 1, 1001, 1002),  # 0F1 inside 0F0
        line("frobnicate%d", 0, 1004, 1005), line("backward", 0, 1006, 1008), line("optimizer", 0, 1008, 1009)]) + "\n")
    (tmp_path / "workerlog.1").write_text("\n".join([line("forward", 0, 1004.5, 1005.5), line("backward", 0, 1005.5, 1006)]) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = import_paddle_logs(tmp_path)
    assert case["overlaps"] and "frobnicate%d" in case["jobs"]["kind"]  # an extra track; a kind with a format character
    _same_trace(case)


def test_overlapping_steps_and_jobs_write_the_same_bytes():
    case = _case("1F1B", p=2, m=2, steps=range(0, 3))
    jobs = case["jobs"]
    first, second = [i for i in range(len(jobs["kind"])) if jobs["rank"][i] == 0 and jobs["step"][i] == 0][:2]
    jobs["start_ns"][second] = jobs["start_ns"][first] + 100  # inside the first job: a second track
    jobs["end_ns"][second] = jobs["end_ns"][first] + 500
    case["step_end_ns"][0] = case["step_start_ns"][1] + 1_000  # step 0 ends after step 1 starts: per-rank step tracks
    _same_trace(case)
    assert check_trace(case_trace(case)) == []


def test_hta_tables_are_built_once_per_case_not_per_rank(tmp_path, monkeypatch):
    calls: list[int] = []
    real = hta_mod.JobTable.from_case

    def counting(case):
        calls.append(1)
        return real(case)

    monkeypatch.setattr(hta_mod.JobTable, "from_case", staticmethod(counting))
    case = _case("1F1B", p=8, m=16)
    paths = write_hta_traces(tmp_path, case)
    assert len(paths) == 8 and len(calls) == 1
    for rank, path in enumerate(paths):  # each rank's file holds exactly that rank's jobs
        events = json.loads(path.read_text())["traceEvents"]
        assert sum(e.get("cat") == "kernel" for e in events) == case["jobs"]["rank"].count(rank)


def test_gzip_traces_open_in_the_checker_and_hta_files_in_hta(tmp_path):
    case = _case("ZB-H1", comm=True, cost=FixedCost.ms(F=1, B=2, W=1))
    files = write_report(tmp_path / "r", results_document([case]), trace_options=TraceOptions(gzip=True))
    trace = files.traces[case["id"]]
    assert trace.name.endswith(".json.gz")
    assert gzip.decompress(trace.read_bytes()).decode() == trace_text(case)
    assert check_trace_file(trace) == []
    ranks = sorted(p.name for p in files.hta[case["id"]].iterdir())
    assert ranks == ["rank0.json.gz", "rank1.json.gz", "rank2.json.gz", "rank3.json.gz"]
    assert read_json(files.hta[case["id"]] / "rank2.json.gz") == json.loads(hta_rank_text(case, 2))
    assert 'traces/' + trace.name in (tmp_path / "r" / "index.html").read_text()
    pytest.importorskip("pandas", reason="HTA needs pandas")
    ta_mod = pytest.importorskip("hta.trace_analysis", reason="holistictraceanalysis is not installed (pip install .[hta])")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analysis = ta_mod.TraceAnalysis(trace_dir=str(files.hta[case["id"]]), include_last_profiler_step=True)
        df = analysis.get_temporal_breakdown(visualize=False)
    assert sorted(df["rank"]) == [0, 1, 2, 3]


def test_a_plain_render_after_a_gzip_one_prunes_the_gzip_files(tmp_path):
    case = _case("1F1B")
    doc = results_document([case])
    write_report(tmp_path, doc, trace_options=TraceOptions(gzip=True))
    files = write_report(tmp_path, doc)
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == [files.traces[case["id"]].name]
    assert all(p.suffix == ".json" for p in files.hta[case["id"]].iterdir())


def test_traced_steps_keep_the_first_steps_only(tmp_path):
    case = _case("1F1B", steps=range(1, 4))
    per_step = case["jobs"]["step"].count(1)
    one = first_steps(case, 1)
    assert one["steps"] == [1] and one["jobs"]["step"] == [1] * per_step
    assert first_steps(case, 3) is case and first_steps(case, None) is case
    doc = case_trace(one)
    assert [e["name"] for e in doc["traceEvents"] if e.get("cat") == "step"] == ["ProfilerStep#1"]
    assert check_trace(doc) == []
    files = write_report(tmp_path, results_document([case]), trace_options=TraceOptions(steps=1))
    traced = read_json(files.traces[case["id"]])
    assert sum(e["ph"] == "X" and e.get("cat") in ("F", "B") for e in traced["traceEvents"]) == per_step
    assert len(load_results(files.results)["cases"][0]["jobs"]["kind"]) == 3 * per_step  # results keep every step
    with pytest.raises(ValueError, match="1 or more"):
        first_steps(case, 0)


def test_no_flows_means_no_flow_events():
    case = _case("1F1B", comm=True)
    phases = {e["ph"] for e in case_trace(case, flows=False)["traceEvents"]}
    assert "s" not in phases and "f" not in phases
    assert sum(e["ph"] == "s" for e in case_trace(case)["traceEvents"]) == 2 * len(case["deps"])


def test_size_estimate_is_within_ten_percent_and_warns_past_the_threshold(tmp_path):
    case = _case("Interleaved1F1B", comm=True, p=4, m=16)
    actual = len(trace_text(case))
    assert abs(trace_size_estimate(case) - actual) <= 0.1 * actual
    said: list[str] = []
    opts = TraceOptions(warn_bytes=1000)
    write_report(tmp_path, results_document([case]), notice=said.append, trace_options=opts)
    trace_line = next(s for s in said if "trace of case" in s)
    assert f"will be about {trace_size_estimate(case) / 1e3:,.0f} kB (over 1 kB)" in trace_line
    assert "--trace-gzip" in trace_line and "--trace-steps=1" in trace_line and "--trace-no-flows" in trace_line
    assert trace_line.endswith("from Python, write_report(..., trace_options=TraceOptions(gzip=True, steps=1, flows=False))")
    assert TraceOptions(gzip=True, steps=1).shrink_hints() == [
        "--trace-no-flows (no dependency arrows)", "from Python, write_report(..., trace_options=TraceOptions(flows=False))"]
    assert TraceOptions(gzip=True, steps=1, flows=False).shrink_hints() == []
    assert any("HTA rank files" in s for s in said) and any("results.json" in s for s in said)
    with pytest.warns(ReportSizeWarning) as record:
        write_report(tmp_path, results_document([case]), trace_options=opts)
    assert [str(w.message).split(" will")[0] for w in record] == [
        f"the trace of case {case['id']!r}", f"the HTA rank files of case {case['id']!r}", "results.json"]
    assert size_warning("trace", SIZE_WARN_BYTES, False, []) is None  # at the threshold: quiet
    assert size_warning("trace", 250_000_000, True, ["x"]) == "trace will be about 250 MB before compression (over 100 MB); to shrink it: x"
    assert size_warning("trace", 250_000_000, False, [], threshold=0) is None
    assert size_warning("trace", 1_800_000_000, False, []) == "trace will be about 1.8 GB (over 100 MB)"


def test_option_values_are_checked():
    assert parse_trace_options(True, "2", True, "0") == TraceOptions(gzip=True, steps=2, flows=False, warn_bytes=0)
    assert parse_trace_options(False, None, False, None) == TraceOptions()
    for steps in ("0", "x", "1.5"):
        with pytest.raises(ConfigError, match="--trace-steps="):
            parse_trace_options(False, steps, False, None)
    for mb in ("-1", "nan", "big"):
        with pytest.raises(ConfigError, match="--size-warn-mb="):
            parse_trace_options(False, None, False, mb)


def test_cli_report_writes_gzip_traces(tmp_path, capsys):
    case = _case("1F1B")
    src = tmp_path / "in" / "results.json"
    src.parent.mkdir()
    src.write_bytes(dumps_document(results_document([case])))
    assert main(["report", str(src), "--out", str(tmp_path / "out"), "--trace-gzip", "--trace-steps=1", "--trace-no-flows", "-q"]) == 0
    trace = next((tmp_path / "out" / "traces").iterdir())
    doc = read_json(trace)
    assert trace.name.endswith(".json.gz") and not any(e["ph"] == "s" for e in doc["traceEvents"])
    assert [e["name"] for e in doc["traceEvents"] if e.get("cat") == "step"] == ["ProfilerStep#1"]


def test_results_json_parses_to_the_same_document_and_refuses_nan(tmp_path):
    case = _case("1F1B", comm=True)
    doc = results_document([case])
    assert json.loads(dumps_document(doc)) == json.loads(json.dumps(doc))
    assert json.loads(dumps_document({"big": 2**70})) == {"big": 2**70}  # past orjson's 64 bits: the json module
    with pytest.raises(ValueError, match=r"document\.metrics\.x"):
        dumps_document({"metrics": {"x": float("nan")}})


def test_write_trace_is_atomic_and_keeps_the_old_file_on_error(tmp_path):
    case = _case("1F1B")
    path = write_trace(tmp_path / "t.json", case)
    before = path.read_text()
    broken = {**case, "jobs": {**case["jobs"], "start_ns": case["jobs"]["start_ns"][:-1]}}
    with pytest.raises(ValueError):
        write_trace(path, broken)
    assert path.read_text() == before and [p.name for p in Path(tmp_path).iterdir()] == ["t.json"]


def test_optimizer_steps_and_a_case_without_jobs_write_the_same_bytes():
    case = case_to_dict(run_case(PipelineCase("1F1B", 3, 4, optimizer=True, comm=True), "sim", range(0, 2)))
    assert "OPT" in case["jobs"]["kind"] and None in case["jobs"]["microbatch"]  # "0OPT": no micro-batch, "microbatch": null
    _same_trace(case)
    empty = {**case, "jobs": {k: [] for k in case["jobs"]}}
    _same_trace(empty)
    assert [e["ph"] for e in case_trace(empty)["traceEvents"]].count("X") == 2  # the two step slices only


def test_the_checker_runs_from_the_command_line_on_files_and_folders(tmp_path, capsys):
    from harness.report.tracecheck import main as check_main

    write_report(tmp_path, results_document([_case("1F1B", p=2, m=2)]), trace_options=TraceOptions(gzip=True))
    traces = tmp_path / "traces"
    assert check_main([str(traces)]) == 0
    out = capsys.readouterr().out
    assert out.count(": clean") == len(list(traces.iterdir())) >= 1 and ".json.gz: clean" in out
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": -1}]}')
    assert check_main([str(bad)]) == 1
    assert "bad.json: " in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    assert check_main([str(tmp_path / "empty")]) == 2
    assert "no .json or .json.gz trace files" in capsys.readouterr().err
