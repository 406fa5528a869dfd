"""Per-rank traces for Holistic Trace Analysis: format, and HTA's figures against ours."""

from __future__ import annotations

import json
import re

import pytest

from harness.case import PipelineCase
from harness.cost import FixedCost
from harness.report.hta import COMM_KERNEL_PREFIX, edge_idle_us, hta_rank_trace, write_hta_traces
from harness.report.results import case_to_dict
from harness.runner import run_case


def _case(schedule="1F1B", p=4, m=8, comm=False, cost=None):
    cost = cost or FixedCost.ms(F=1, B=2)
    return case_to_dict(run_case(PipelineCase(schedule, stages=p, microbatches=m, comm=comm, cost=cost), "sim", range(1, 4)))


def test_files_carry_what_hta_looks_for(tmp_path):
    case = _case(comm=True)
    paths = write_hta_traces(tmp_path, case)
    assert [p.name for p in paths] == ["rank0.json", "rank1.json", "rank2.json", "rank3.json"]
    for rank, path in enumerate(paths):
        text = path.read_text()
        m = re.search(r'"rank":\s+(\d+)', text)  # HTA's own regex (hta/common/trace_file.py)
        assert m is not None and int(m.group(1)) == rank
        doc = json.loads(text)
        kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
        launches = {e["args"]["correlation"] for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime"}
        assert kernels and {k["args"]["correlation"] for k in kernels} == launches
        assert all({"stream", "device", "correlation"} <= set(k["args"]) for k in kernels)
        comm = [k["name"] for k in kernels if "SEND" in k["name"] or "RECV" in k["name"]]
        assert comm and all(re.match(r"^nccl.*Kernel", n) for n in comm)  # HTA's communication pattern
        assert all(n.startswith(COMM_KERNEL_PREFIX) for n in comm)
        steps = [e["name"] for e in doc["traceEvents"] if e["name"].startswith("ProfilerStep#")]
        assert steps == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]


def test_edge_idle_accounts_for_the_pipeline_fill_and_drain():
    case = _case()  # 1F1B p=4: rank s starts s ms late and ends (3-s)*... earlier
    edges = edge_idle_us(case)
    # Rank s starts s*F after step start; over three back-to-back steps, only the
    # first step's start and the last step's end are outside HTA's window.
    ours = [sum(s["idle_ns"][r] for s in case["metrics"]["per_step"]) / 1000 for r in range(4)]
    assert edges[0] == 0.0 and edges[3] == 9000.0
    assert all(e <= o for e, o in zip(edges, ours))


def test_rank_out_of_range_is_refused():
    with pytest.raises(ValueError, match="rank 4"):
        hta_rank_trace(_case(), 4)


@pytest.mark.slow
@pytest.mark.parametrize(("schedule", "comm"), [("1F1B", False), ("ZB-H1", True)])
def test_hta_idle_time_agrees_with_our_bubble(tmp_path, schedule, comm):
    pytest.importorskip("pandas", reason="HTA needs pandas")
    ta_mod = pytest.importorskip("hta.trace_analysis", reason="holistictraceanalysis is not installed (pip install .[hta])")
    cost = FixedCost.ms(F=1, B=2, W=1) if schedule == "ZB-H1" else FixedCost.ms(F=1, B=2)
    case = _case(schedule, comm=comm, cost=cost)
    write_hta_traces(tmp_path, case)
    analysis = ta_mod.TraceAnalysis(trace_dir=str(tmp_path), include_last_profiler_step=True)
    df = analysis.get_temporal_breakdown(visualize=False)
    hta_idle = dict(zip(df["rank"], df["idle_time(us)"]))
    step_us = case["metrics"]["step_time_median_ns"] / 1000
    per_step = case["metrics"]["per_step"]
    edges = edge_idle_us(case)
    for rank in range(4):
        ours = sum(s["idle_ns"][rank] for s in per_step) / 1000  # compute-stream idle, all recorded steps
        if comm:
            # HTA's idle is time with no kernel at all; ours is compute-stream idle. Take out
            # the comm time that does not overlap compute (none is counted busy by us).
            ours -= _comm_only_us(case, rank)
        assert abs((hta_idle[rank] + edges[rank]) - ours) <= 0.01 * step_us, (rank, hta_idle[rank], edges[rank], ours)


def _comm_only_us(case, rank):
    jobs = case["jobs"]
    comp, comm = [], []
    for i in range(len(jobs["kind"])):
        if jobs["rank"][i] != rank:
            continue
        iv = (jobs["start_ns"][i], jobs["end_ns"][i])
        (comm if jobs["kind"][i] in ("SEND_F", "RECV_F", "SEND_B", "RECV_B") else comp).append(iv)

    def union(ivs):
        out = []
        for a, b in sorted(ivs):
            if out and a <= out[-1][1]:
                out[-1][1] = max(out[-1][1], b)
            else:
                out.append([a, b])
        return out

    total = sum(b - a for a, b in union(comp + comm)) - sum(b - a for a, b in union(comp))
    return total / 1000
