"""PyTorch's UNSHARD, RESHARD and REDUCE_GRAD actions kept as jobs (issue 11, item 5):
read and written back, validated, costed by the cost model (0 by default), run on
sim, cpu and (a fake of) cuda, shown in traces and the page, and not compute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.analysis.analytic import analyze
from harness.analysis.bubble import decompose
from harness.analysis.metrics import compute_metrics
from harness.case import PipelineCase
from harness.errors import ConfigError, ScheduleError
from harness.model.checked import CheckedCost
from harness.model.cost import FixedCost
from harness.model.transformer import TransformerCost
from harness.plan.build import build_plan
from harness.report.colours import kind_table
from harness.report.results import case_to_dict
from harness.report.timeline import timeline_data
from harness.report.trace import case_trace
from harness.run.device.cpu import CpuDevice
from harness.run.executor import execute
from harness.runner import run_case
from harness.schedule.model import DATA_PARALLEL_KINDS, Job, JobKind, Schedule
from harness.schedule.notation import dumps_csv, loads_csv, to_paddle_jobs

from conftest import run_sim, timeline

DATA = Path(__file__).parent / "data" / "pytorch"
#: One rank, two micro-batches, each action PyTorch's lowering adds (``_add_unshard_reshard``, ``_add_reduce_grad``).
ONE_RANK = "0UNSHARD,0F0,0F1,0B0,0B1,0REDUCE_GRAD,0RESHARD\n"
#: Two ranks, one micro-batch.
TWO_RANKS = "0UNSHARD,0F0,0B0,0REDUCE_GRAD\n1UNSHARD,1F0,1B0,1REDUCE_GRAD\n"
COST = FixedCost(forward_ns=10, backward_ns=20, unshard_ns=5, reshard_ns=3, reduce_grad_ns=7)


def _lowered() -> list[dict]:
    entries = json.loads((DATA / "orders.json").read_text(encoding="utf-8"))["entries"]
    return [e for e in entries if "comms" in e]


def test_read_as_jobs_and_written_back() -> None:
    s = loads_csv(ONE_RANK, "one.csv")
    assert [str(j) for j in s.ranks[0]] == ONE_RANK.strip().split(",")
    assert [j.kind for j in s.ranks[0] if j.kind.is_data_parallel] == [JobKind.UNSHARD, JobKind.REDUCE_GRAD, JobKind.RESHARD]
    assert all(j.microbatch is None for j in s.ranks[0] if j.kind in DATA_PARALLEL_KINDS)
    assert dumps_csv(s) == ONE_RANK


@pytest.mark.parametrize("entry", _lowered(), ids=lambda e: e["class"])
def test_pytorch_lowered_orders_round_trip_and_validate(entry: dict) -> None:
    """PyTorch's own ``pipeline_order_with_comms`` (generate_orders.py): every rank unshards each of its
    stages first and reduces each stage's gradients after its last backward; read, written back byte for
    byte, and a valid plan."""
    text = "\n".join(entry["comms"]) + "\n"
    s = loads_csv(text, entry["class"], entry["m"])
    assert dumps_csv(s) == text
    p, v = entry["p"], entry["v"]
    for r, row in enumerate(s.ranks):
        stages = list(range(r, p * v, p)) if entry["class"] != "ScheduleDualPipeV" else [r, 2 * p - 1 - r]
        assert [str(j) for j in row[:v]] == [f"{k}UNSHARD" for k in stages]
        assert sorted(str(j) for j in row if j.kind is JobKind.REDUCE_GRAD) == sorted(f"{k}REDUCE_GRAD" for k in stages)
    plan = build_plan(s)
    assert sum(j.kind is JobKind.UNSHARD for j in plan.jobs) == sum(j.kind is JobKind.REDUCE_GRAD for j in plan.jobs) == p * v


def test_golden_csvs_hold_none_and_read_unchanged() -> None:
    for name in ("zb1p_2rank_2stagep_compute.csv", "zb1p_2rank_2stagep_comms.csv"):
        text = (DATA / name).read_text(encoding="utf-8")
        s = loads_csv(text, name)
        assert not any(j.kind.is_data_parallel for row in s.ranks for j in row if j is not None)


def test_sim_timeline_by_hand_one_rank() -> None:
    # UNSHARD 0-5, F0 5-15, F1 15-25, B0 25-45, B1 45-65, REDUCE_GRAD 65-72, RESHARD 72-75 (ns).
    rec = run_sim(loads_csv(ONE_RANK, "one.csv"), COST)
    assert timeline(rec) == {"0UNSHARD": (0, 5), "0F0": (5, 15), "0F1": (15, 25), "0B0": (25, 45), "0B1": (45, 65),
                             "0REDUCE_GRAD": (65, 72), "0RESHARD": (72, 75)}
    m = compute_metrics(rec)
    assert m.step_time_median_ns == 75
    assert m.steps[0].busy_ns == [60]  # F and B only: the 15 ns of UNSHARD, REDUCE_GRAD, RESHARD are idle
    assert m.bubble_ratio == pytest.approx(15 / 75, abs=1e-12)


def test_sim_timeline_by_hand_two_ranks_and_analysis_agrees() -> None:
    # rank 0: UNSHARD 0-5, F0 5-15; rank 1: UNSHARD 0-5, F0 15-25, B0 25-45, REDUCE_GRAD 45-52;
    # rank 0: B0 45-65, REDUCE_GRAD 65-72.
    s = loads_csv(TWO_RANKS, "two.csv")
    rec = run_sim(s, COST)
    assert timeline(rec) == {"0UNSHARD": (0, 5), "0F0": (5, 15), "1UNSHARD": (0, 5), "1F0": (15, 25), "1B0": (25, 45),
                             "1REDUCE_GRAD": (45, 52), "0B0": (45, 65), "0REDUCE_GRAD": (65, 72)}
    a = analyze(build_plan(s), COST)
    assert a.makespan_ns == 72 and a.busy_ns == [30, 30] and a.idle_ns == [42, 42]
    assert a.span_bubble_ns == [30, 0]  # spans of compute work: rank 0 15 ns..65 ns holds 30 ns of it


def test_zero_cost_by_default() -> None:
    rec = run_sim(loads_csv(ONE_RANK, "one.csv"), FixedCost(forward_ns=10, backward_ns=20))
    assert compute_metrics(rec).step_time_median_ns == 60
    got = timeline(rec)
    assert got["0UNSHARD"] == (0, 0) and got["0REDUCE_GRAD"] == (60, 60) and got["0RESHARD"] == (60, 60)


def test_decomposition_counts_them_with_communication_not_work() -> None:
    s = loads_csv(TWO_RANKS, "two.csv")
    d = decompose(72, build_plan(s), COST)
    assert d.work_ns == [30, 30]
    # With them (and transfers) free: 0F0 0-10, 1F0 10-20, 1B0 20-40, 0B0 40-60, so they add 72 - 60 ns.
    assert d.comm_ns == 12
    assert d.ideal_ns + d.imbalance_ns + d.recompute_ns + d.comm_ns + d.schedule_ns == 72


class _OldModel:
    """A cost model written before the data-parallel kinds: it knows F and B only."""

    def duration_ns(self, job: Job, num_stages: int) -> int:
        return {JobKind.F: 10, JobKind.B: 20}[job.kind]

    def flops(self, job: Job, num_stages: int) -> float:
        return {JobKind.F: 1.0, JobKind.B: 2.0}[job.kind]

    def nbytes(self, job: Job, num_stages: int) -> int:
        return 0

    def is_uniform(self, num_stages: int) -> bool:
        return True

    def describe(self) -> dict:
        return {"model": "old"}


def test_a_model_without_data_parallel_ns_gives_them_zero_and_is_not_asked() -> None:
    checked = CheckedCost(_OldModel())
    job = Job(0, JobKind.UNSHARD, None)
    assert checked.duration_ns(job, 1) == 0 and checked.flops(job, 1) == 0.0 and checked.nbytes(job, 1) == 0
    rec = run_sim(loads_csv(ONE_RANK, "one.csv"), checked)  # type: ignore[arg-type]
    assert compute_metrics(rec).step_time_median_ns == 60


def test_a_bad_data_parallel_answer_is_refused_with_the_job() -> None:
    class Bad(_OldModel):
        def data_parallel_ns(self, job: Job, num_stages: int) -> int:
            return -4

    with pytest.raises(ConfigError) as err:
        CheckedCost(Bad(), "case 'x'").duration_ns(Job(2, JobKind.REDUCE_GRAD, None), 4)
    assert "case 'x': cost model Bad: data_parallel_ns(2REDUCE_GRAD) gave -4 ns" in str(err.value)


def test_cost_fields_checked_and_described_only_when_set() -> None:
    assert "unshard_ns" not in FixedCost(forward_ns=1, backward_ns=2).describe()
    assert FixedCost(forward_ns=1, backward_ns=2, reduce_grad_ns=9).describe()["reduce_grad_ns"] == 9
    with pytest.raises(ConfigError, match="unshard_ns"):
        FixedCost(forward_ns=1, backward_ns=2, unshard_ns=-1)
    t = TransformerCost(hidden_size=128, seq_len=64, micro_batch_size=1, num_layers=4, tflops=10, reshard_ns=11)
    assert t.duration_ns(Job(0, JobKind.RESHARD, None), 2) == 11 and t.duration_ns(Job(0, JobKind.UNSHARD, None), 2) == 0
    assert t.flops(Job(0, JobKind.RESHARD, None), 2) == 0.0
    with pytest.raises(ConfigError, match="is not UNSHARD, RESHARD or REDUCE_GRAD"):
        COST.data_parallel_ns(Job(0, JobKind.F, 0), 1)


@pytest.mark.parametrize(("text", "message"), [
    ("0F0,0UNSHARD,0B0\n", "0UNSHARD is listed after 0F0 (step 0), which it must precede"),
    ("0F0,0RESHARD,0B0\n", "0RESHARD is listed before 0B0 (step 2), which it must follow"),
    ("0F0,0REDUCE_GRAD,0B0\n", "0REDUCE_GRAD is listed before 0B0 (step 2), which it must follow"),
])
def test_out_of_order_is_an_error_with_the_grid(text: str, message: str) -> None:
    with pytest.raises(ScheduleError) as err:
        loads_csv(text, "bad.csv")
    assert message in str(err.value) and ">>" in str(err.value)


def test_a_data_parallel_job_out_of_order_with_several_jobs_is_one_note_naming_them_all() -> None:
    # A fresh user's find: the headline named the first conflict (0F0) and the marker line the last (0B1).
    with pytest.raises(ScheduleError) as err:
        loads_csv("0RESHARD,0UNSHARD,0F0,0F1,,0B0,,0B1\n,,,1F0,1B0,1F1,1B1\n", "reshfirst.csv")
    text = str(err.value)
    note = "0RESHARD is listed before 0F0 (step 2), 0F1 (step 3), 0B0 (step 5), 0B1 (step 7), which it must follow"
    assert f"4 job(s) out of order on their rank: {note}" in text
    assert f">> rank 0, step 0: {note}" in text
    assert text.count(">> rank 0, step 0:") == 1 and ">> rank 0, step 7: 0B1 must come before 0RESHARD" in text
    many = "0RESHARD," + ",".join(f"0F{k}" for k in range(6)) + "," + ",".join(f"0B{k}" for k in range(6)) + "\n"
    with pytest.raises(ScheduleError, match=r"0RESHARD is listed before 0F0 \(step 1\), 0F1 \(step 2\), 0F2 \(step 3\), "
                                            r"0F3 \(step 4\) and 8 more, which it must follow"):
        loads_csv(many, "many.csv")


def test_a_micro_batch_or_a_repeat_is_refused() -> None:
    with pytest.raises(ScheduleError, match="UNSHARD takes no micro-batch"):
        loads_csv("0UNSHARD0,0F0,0B0\n", "bad.csv")
    with pytest.raises(ScheduleError, match="0UNSHARD is listed twice"):
        loads_csv("0UNSHARD,0F0,0UNSHARD,0B0\n", "bad.csv")


def test_runs_on_cpu_in_the_sims_order() -> None:
    s = loads_csv(TWO_RANKS, "two.csv")
    cost = FixedCost(forward_ns=200_000, backward_ns=400_000, unshard_ns=100_000, reduce_grad_ns=100_000)
    dev = CpuDevice("sleep")
    try:
        rec = execute(build_plan(s), dev, cost, range(0, 1))
    finally:
        dev.close()
    order = {st: [j.label for j in sorted((j for j in rec.jobs if j.stream == st), key=lambda j: j.start_ns)] for st in rec.streams}
    assert order == {"rank0/compute": ["0UNSHARD", "0F0", "0B0", "0REDUCE_GRAD"],
                     "rank1/compute": ["1UNSHARD", "1F0", "1B0", "1REDUCE_GRAD"]}
    assert all(j.duration_ns >= 100_000 for j in rec.jobs if j.kind in ("UNSHARD", "REDUCE_GRAD"))


def test_runs_on_a_fake_cuda_as_on_sim(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from test_cuda_backend import FakeCuda

    monkeypatch.setitem(__import__("sys").modules, "nvtx", None)
    FakeCuda().install(monkeypatch)
    path = tmp_path / "two.csv"
    path.write_text(TWO_RANKS, encoding="utf-8")
    case = PipelineCase(str(path), cost=FixedCost(forward_ns=100_000, backward_ns=200_000, unshard_ns=50_000, reduce_grad_ns=70_000))
    got = run_case(case, backend="cuda")
    ref = run_case(case, backend="sim")
    assert ref.metrics.step_time_median_ns == 720_000
    assert got.metrics.step_time_median_ns == ref.metrics.step_time_median_ns
    step, ref_step = got.records.steps[0], ref.records.steps[0]
    assert sorted(j.label for j in got.records.jobs if j.step == step) == sorted(j.label for j in ref.records.jobs if j.step == ref_step)
    reduced = {j.label: j.duration_ns for j in got.records.jobs if j.step == step and j.kind == "REDUCE_GRAD"}
    assert reduced == {"0REDUCE_GRAD": 70_000, "1REDUCE_GRAD": 70_000}


def test_trace_and_page_show_them() -> None:
    case = case_to_dict(run_case(PipelineCase(loads_csv(ONE_RANK, "one.csv"), cost=COST), "sim"))
    events = [e for e in case_trace(case)["traceEvents"] if e.get("ph") == "X" and e.get("name", "").endswith(("SHARD", "GRAD"))]
    assert sorted((e["name"], e["cname"]) for e in events) == [
        ("0REDUCE_GRAD", "detailed_memory_dump"), ("0RESHARD", "light_memory_dump"), ("0UNSHARD", "startup")]
    legend = [k["name"] for k in kind_table([case])]
    assert legend[-3:] == ["UNSHARD", "REDUCE_GRAD", "RESHARD"]
    data = timeline_data(case)
    assert len(data["kind"]) == 7


def test_paddle_lists_leave_them_out() -> None:
    assert to_paddle_jobs(loads_csv(ONE_RANK, "one.csv")) == [[("forward", 0), ("forward", 1), ("backward", 0), ("backward", 1)]]


@pytest.mark.parametrize("entry", _lowered(), ids=lambda e: e["class"])
def test_eager_placement_reproduces_pytorchs_lowering_around_them(entry: dict) -> None:
    """PyTorch's lowered order with its sends and receives taken out, then placed again by ``eager``
    (PyTorch's ``_add_send_recv``), is PyTorch's lowered order exactly: the data-parallel jobs stay where
    ``_add_unshard_reshard`` / ``_add_reduce_grad`` put them, and the receives land around them as PyTorch's."""
    from harness.schedule.passes import strip_communication
    from harness.schedule.placement import add_send_recv

    text = "\n".join(entry["comms"]) + "\n"
    lowered = loads_csv(text, entry["class"], entry["m"])
    compute = strip_communication(lowered)
    assert not compute.has_comm and sum(j.kind.is_data_parallel for row in compute.ranks for j in row if j is not None) > 0
    assert dumps_csv(add_send_recv(compute, "eager")) == text


@pytest.mark.parametrize("entry", _lowered(), ids=lambda e: e["class"])
def test_fast_plan_path_equals_the_reference_path(entry: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """``build_plan``'s numpy path takes data-parallel jobs (no fall-back to the per-job path) and
    gives the reference path's plan: same jobs, streams and dependencies, and the same timeline."""
    import harness.plan.fast as plan_module  # the fast path, which falls back on the reference path
    from harness.plan.groups import apply
    from harness.plan.timeline import simulate

    s = loads_csv("\n".join(entry["comms"]) + "\n", entry["class"], entry["m"])
    ref = apply(plan_module._build_plan_checked(s))

    def no_fallback(schedule: object) -> None:
        raise AssertionError("the fast path fell back")

    monkeypatch.setattr(plan_module, "_build_plan_checked", no_fallback)
    fast = build_plan(s)
    assert fast.jobs == ref.jobs and fast.stream_names == ref.stream_names and fast.stream == ref.stream
    assert fast.deps == ref.deps and fast.start_deps == ref.start_deps
    a, b = simulate(fast, COST), simulate(ref, COST)
    assert (a.start, a.end) == (b.start, b.end)


def test_fast_plan_path_refuses_out_of_order_through_the_reference_path() -> None:
    for text in ("0F0,0UNSHARD,0B0\n", "0F0,0RESHARD,0B0\n", "0F0,0REDUCE_GRAD,0B0\n"):
        s = Schedule.from_text("x", [text.strip().split(",")], 1)
        with pytest.raises(ScheduleError, match="out of order on their rank"):
            build_plan(s)


def test_paddle_export_leaves_them_out() -> None:
    from harness.imports.paddle import paddle_log_lines

    case = case_to_dict(run_case(PipelineCase(loads_csv(ONE_RANK, "one.csv"), cost=COST), "sim"))
    lines = paddle_log_lines(case, 0)
    types = [line.split("type = ")[1].split(",")[0] for line in lines if "type = " in line]
    assert types == ["forward", "forward", "backward", "backward"]
