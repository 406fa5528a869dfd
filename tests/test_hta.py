"""Per-rank traces for Holistic Trace Analysis: format, and HTA's figures against ours."""

from __future__ import annotations

import json
import re

import pytest

from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.report.hta import COMM_KERNEL_PREFIX, hta_idle_offset_us, hta_rank_trace, write_hta_traces
from harness.report.results import case_to_dict
from harness.runner import run_case

# HTA 0.5 uses pandas' deprecated inplace sorting; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword:Warning")


def _case(schedule="1F1B", p=4, m=8, comm=False, cost=None, backend="sim"):
    cost = cost or FixedCost.ms(F=1, B=2)
    return case_to_dict(run_case(PipelineCase(schedule, stages=p, microbatches=m, comm=comm, cost=cost), backend, range(1, 4)))


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


def test_offset_is_the_pipeline_fill_and_drain_on_back_to_back_steps():
    case = _case()  # 1F1B p=4, F=1 ms, B=2 ms: rank s starts s ms late and ends 2s ms early
    # Three back-to-back sim steps: only the first step's fill and the last step's drain
    # lie outside HTA's window: 3s ms on rank s.
    assert hta_idle_offset_us(case) == [0.0, 3000.0, 6000.0, 9000.0]


def test_offset_takes_out_the_host_time_between_steps():
    case = _case()
    # Open a 500 µs gap before each later step (as a real run has): HTA counts it, we do not.
    for k in (1, 2):
        shift = 500_000 * k
        case["step_start_ns"][k] += shift
        case["step_end_ns"][k] += shift
        jobs = case["jobs"]
        for i in range(len(jobs["kind"])):
            if jobs["step"][i] == case["steps"][k]:
                jobs["start_ns"][i] += shift
                jobs["end_ns"][i] += shift
    assert hta_idle_offset_us(case) == [-1000.0, 2000.0, 5000.0, 8000.0]


def test_rank_out_of_range_is_refused():
    with pytest.raises(ValueError, match="rank 4"):
        hta_rank_trace(_case(), 4)


def _hta_breakdown(folder, ta_mod, monkeypatch, rounding=True):
    """HTA's temporal breakdown of ``folder``, per rank: (idle_time(us), non_compute_time(us)).
    ``rounding=False`` sets HTA_DISABLE_NS_ROUNDING=1 (hta/configs/env_options.py): HTA then keeps
    ns-resolution times instead of rounding each kernel's start up and end down to whole µs."""
    with monkeypatch.context() as m:
        if not rounding:
            m.setenv("HTA_DISABLE_NS_ROUNDING", "1")
        df = ta_mod.TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True).get_temporal_breakdown(visualize=False)
    return {int(r): (float(i), float(n)) for r, i, n in zip(df["rank"], df["idle_time(us)"], df["non_compute_time(us)"])}


_COMM_KINDS = ("SEND_F", "RECV_F", "SEND_B", "RECV_B")
_F1B2 = FixedCost.ms(F=1, B=2)
_F1B2_P2P = FixedCost.ms(F=1, B=2, p2p_latency_ns=200_000)  # send/receive jobs of 0.2 ms
_ZB_P2P = FixedCost.ms(F=1, B=2, W=1, p2p_latency_ns=250_000)


# docs/reports.md ("Traces"): our idle time == HTA's idle_time + non_compute_time + hta_idle_offset_us.
@pytest.mark.slow
@pytest.mark.parametrize(("schedule", "cost", "backend"), [
    ("1F1B", _F1B2, "sim"), ("ZB-H1", _ZB_P2P, "sim"), ("DualPipeV", FixedCost.ms(F=1, B=2, W=1, p2p_latency_ns=200_000), "sim"),
    ("1F1B", _F1B2, "cpu"), ("1F1B", _F1B2_P2P, "cpu"),
], ids=["1F1B-sim", "ZB-H1-p2p-sim", "DualPipeV-p2p-sim", "1F1B-cpu", "1F1B-p2p-cpu"])
def test_hta_idle_plus_non_compute_time_is_our_idle_time(tmp_path, monkeypatch, schedule, cost, backend):
    pytest.importorskip("pandas", reason="HTA needs pandas")
    ta_mod = pytest.importorskip("hta.trace_analysis", reason="holistictraceanalysis is not installed (pip install .[hta])")
    case = _case(schedule, comm=None, cost=cost, backend=backend)  # comm=None: send/receive jobs where transfers cost time
    write_hta_traces(tmp_path, case)
    step_us = case["metrics"]["step_time_median_ns"] / 1000
    per_step = case["metrics"]["per_step"]
    edges = hta_idle_offset_us(case)
    has_comm = cost.p2p_latency_ns > 0
    jobs = case["jobs"]
    assert any(k in _COMM_KINDS for k in jobs["kind"]) == has_comm
    compute = [sum(1 for r, k in zip(jobs["rank"], jobs["kind"]) if r == rank and k not in _COMM_KINDS) for rank in range(4)]
    exact = _hta_breakdown(tmp_path, ta_mod, monkeypatch, rounding=False)
    rounded = _hta_breakdown(tmp_path, ta_mod, monkeypatch)  # HTA's default
    for rank in range(4):
        ours = sum(s["idle_ns"][rank] for s in per_step) / 1000  # compute-stream idle, all recorded steps
        idle, non_compute = exact[rank]
        # non_compute_time is the rank's send/receive time during which no compute job runs.
        assert non_compute == pytest.approx(_comm_only_us(case, rank), abs=1e-3)
        assert (non_compute > 0.01 * step_us) if has_comm else non_compute == 0  # with transfers, idle alone is off
        assert idle + non_compute + edges[rank] == pytest.approx(ours, abs=1e-3), (rank, idle, non_compute, edges[rank], ours)
        # HTA's default rounding (start up, end down to whole µs) shortens each kernel by less than 2 µs:
        # idle + non_compute (first-to-last kernel time minus the compute kernels' union) grows by
        # less than 2 µs per compute kernel, and shrinks by less than 2 µs with the first-to-last span.
        r_idle, r_non_compute = rounded[rank]
        excess = r_idle + r_non_compute + edges[rank] - ours
        assert -2 < excess < 2 * compute[rank], (rank, excess, compute[rank])
        if backend == "sim":  # ms costs: every time is a whole µs already
            assert excess == pytest.approx(0, abs=1e-3)


def _comm_only_us(case, rank):
    jobs = case["jobs"]
    comp, comm = [], []
    for i in range(len(jobs["kind"])):
        if jobs["rank"][i] != rank:
            continue
        iv = (jobs["start_ns"][i], jobs["end_ns"][i])
        (comm if jobs["kind"][i] in _COMM_KINDS else comp).append(iv)

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
