"""Per-case Chrome traces pass the trace checker, including imported overlapping jobs."""

from __future__ import annotations

import pytest

from harness.case import PipelineCase
from harness.report.results import case_to_dict
from harness.report.trace import OVERFLOW_TID, case_trace
from harness.report.tracecheck import check_trace
from harness.runner import run_case


@pytest.mark.parametrize(("schedule", "v"), [("FThenB", 1), ("1F1B", 1), ("ZB-H1", 1), ("Interleaved1F1B", 2), ("ZB-V", 1)])
def test_every_schedule_trace_is_clean(schedule, v):
    case = case_to_dict(run_case(PipelineCase(schedule, stages=4, microbatches=8, chunks=v, comm=True), "sim", range(1, 3)))
    doc = case_trace(case)
    assert check_trace(doc) == []
    flows = [e for e in doc["traceEvents"] if e["ph"] == "s"]
    assert len(flows) == len(case["deps"]) * 2  # two recorded steps
    steps = [e["name"] for e in doc["traceEvents"] if e.get("cat") == "step"]
    assert steps == ["ProfilerStep#1", "ProfilerStep#2"]


def test_overlapping_jobs_on_one_stream_move_to_an_extra_track():
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2), "sim", range(0, 1)))
    jobs = case["jobs"]
    # Make rank 0's second job start inside its first one (as host-stamped logs do).
    first, second = [i for i in range(len(jobs["kind"])) if jobs["rank"][i] == 0 and jobs["step"][i] == 0][:2]
    jobs["start_ns"][second] = jobs["start_ns"][first] + 100
    jobs["end_ns"][second] = jobs["end_ns"][first] + 500
    doc = case_trace(case)
    assert check_trace(doc) == []
    moved = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["tid"] == OVERFLOW_TID]
    assert [e["name"] for e in moved] == ["0F1"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    assert names[(1, OVERFLOW_TID)] == "compute (overlap)"  # rank 0 is pid 1


def test_checker_still_catches_broken_nesting():
    doc = {"traceEvents": [
        {"ph": "M", "pid": 0, "tid": 0, "name": "process_name", "args": {"name": "p"}},
        {"ph": "M", "pid": 0, "tid": 0, "name": "thread_name", "args": {"name": "t"}},
        {"ph": "X", "pid": 0, "tid": 0, "name": "a", "ts": 0.0, "dur": 10.0},
        {"ph": "X", "pid": 0, "tid": 0, "name": "b", "ts": 5.0, "dur": 10.0},
    ]}
    problems = check_trace(doc)
    assert len(problems) == 1 and "overlaps 'a'" in problems[0]


def test_a_receive_flow_starts_at_its_send_start_and_no_arrow_points_back():
    # 1F1B p=2 m=2 with 0.5 ms transfers: 1RECV_F0 starts with 0SEND_F0 (a start dependency); 0SEND_F0
    # depends on 0F0's end. Flows bind 1 ns (0.001 µs) inside their slices.
    from harness.model.cost import FixedCost

    cost = FixedCost.ms(F=1, B=2, p2p_latency_ns=500_000)
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=cost), "sim", range(0, 1)))
    assert ["0SEND_F0", "1RECV_F0", "start"] in case["deps"] and ["0F0", "0SEND_F0", "end"] in case["deps"]
    events = case_trace(case)["traceEvents"]
    assert check_trace({"traceEvents": events}) == []
    slices = {e["name"]: e for e in events if e["ph"] == "X"}
    flows: dict[int, dict[str, dict]] = {}
    for e in events:
        if e["ph"] in "sf":
            flows.setdefault(e["id"], {})[e["ph"]] = e
    by_ends = {(f["s"]["ts"], f["f"]["ts"]): f for f in flows.values()}
    send, recv, f0 = slices["0SEND_F0"], slices["1RECV_F0"], slices["0F0"]
    assert send["ts"] == recv["ts"] == 1000.0  # the transfer starts when 0F0 ends, at 1 ms
    assert (send["ts"] + 0.001, recv["ts"] + 0.001) in by_ends  # start to start
    assert (f0["ts"] + f0["dur"] - 0.001, send["ts"] + 0.001) in by_ends  # end to start
    assert all(f["f"]["ts"] >= f["s"]["ts"] for f in flows.values())


def test_a_receive_posted_before_its_send_ends_its_arrow_inside_it_and_one_ended_before_gets_none():
    from harness.model.cost import FixedCost

    cost = FixedCost.ms(F=1, B=2, p2p_latency_ns=500_000)
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=cost), "sim", range(0, 1)))
    case["backend"] = "mpi"  # measured times, which sim's never are
    # as MPI posts it: 1RECV_F0 starts 0.3 ms before 0SEND_F0 and lasts until the data is in (1.0 to 1.5 ms -> 0.7 to 1.5 ms)
    jobs = case["jobs"]
    k = next(i for i in range(len(jobs["kind"])) if (jobs["stage"][i], jobs["kind"][i], jobs["microbatch"][i]) == (1, "RECV_F", 0))
    jobs["start_ns"][k] -= 300_000
    doc = case_trace(case)
    assert check_trace(doc) == [] and "dependencies_without_arrow" not in doc["otherData"]
    flows: dict[int, dict[str, dict]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] in "sf":
            flows.setdefault(e["id"], {})[e["ph"]] = e
    assert {"s": 1000.001, "f": 1000.001} in [{k: v["ts"] for k, v in f.items()} for f in flows.values()]  # inside the receive, not at 700
    # as torch.profiler records irecv: a receive that only posts, over before its send starts (0.2 to 0.3 ms)
    jobs["start_ns"][k], jobs["end_ns"][k] = 200_000, 300_000
    doc = case_trace(case)
    assert check_trace(doc) == []
    assert doc["otherData"]["dependencies_without_arrow"].startswith("1 dependencies get no arrow: their consumer ended before")
    assert len(flows) - 1 == len({e["id"] for e in doc["traceEvents"] if e["ph"] == "s"})


def test_checker_catches_an_arrow_back_in_time():
    doc = {"traceEvents": [
        {"ph": "M", "pid": 0, "tid": 0, "name": "process_name", "args": {"name": "p"}},
        {"ph": "M", "pid": 0, "tid": 0, "name": "thread_name", "args": {"name": "t"}},
        {"ph": "X", "pid": 0, "tid": 0, "name": "a", "ts": 0.0, "dur": 10.0},
        {"ph": "X", "pid": 0, "tid": 0, "name": "b", "ts": 20.0, "dur": 10.0},
        {"ph": "s", "id": 1, "pid": 0, "tid": 0, "ts": 25.0, "name": "dependency", "cat": "dependency"},
        {"ph": "f", "id": 1, "pid": 0, "tid": 0, "ts": 5.0, "name": "dependency", "cat": "dependency", "bp": "e"},
    ]}
    assert check_trace(doc) == ["flow id 1: finishes at 5.0 µs, before it starts at 25.0 µs (an arrow back in time)"]


def test_the_command_on_a_report_folder_checks_its_traces_and_rank_files_not_results_json(tmp_path, capsys):
    from harness.report.render import write_report
    from harness.report.results import results_document
    from harness.report.tracecheck import main

    result = run_case(PipelineCase("1F1B", stages=2, microbatches=2, comm=True), "sim", range(0, 1))
    write_report(tmp_path, results_document([case_to_dict(result)]), notice=lambda s: None)
    assert main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all(line.endswith(": clean") for line in lines)  # one trace, two HTA rank files
    assert sum("/traces/" in line for line in lines) == 1 and sum("/hta/" in line for line in lines) == 2
    assert not any("results.json" in line for line in lines)
    (tmp_path / "traces" / "broken.json").write_text('{"traceEvents": [{"ph": "X"}]}')
    assert main([str(tmp_path)]) == 1  # a broken trace in the report folder is still found
