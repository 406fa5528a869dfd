"""The torch backend under torchrun, 2 ranks: run by tests/test_torch_backend.py as

    torchrun --standalone --nproc-per-node=2 -m pytest tests/torch_ranks/ranks_two.py --backend=torch \
        --profile-jobs --profile-steps=1:2 --report-dir=DIR

Every process is one pipeline rank and runs every test (the harness's torchrun glue keeps them in
step); a test fails when it fails on any rank. ``TORCH_RANKS_OUT`` names a folder both ranks share.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the torch backend needs PyTorch: pip install torch==2.13.0 (the CPU build)")

import torch.distributed as dist  # noqa: E402

from harness import FixedCost, PipelineCase, TransformerCost  # noqa: E402
from harness.distributed import torch_backend, torch_rank, torch_stages  # noqa: E402
from harness.imports.torch import read_torch_traces  # noqa: E402
from harness.imports.torch_trace import us_to_ns  # noqa: E402
from harness.plan.build import build_plan  # noqa: E402
from harness.plan.timeline import simulate  # noqa: E402
from harness.runner import run_case  # noqa: E402
from harness.schedule.groups import with_groups  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "data" / "pytorch"
EXPECTED = {e["class"]: e for e in json.loads((DATA / "torch_executed_orders.json").read_text(encoding="utf-8"))["entries"]}
HARNESS_NAME = {"ScheduleInterleaved1F1B": "Interleaved1F1B", "ScheduleInterleavedZeroBubble": "InterleavedZeroBubble",
                "ScheduleZBVZeroBubble": "ZB-V", "ScheduleDualPipeV": "DualPipeV"}
MS = 1_000_000


def _compute_actions(row: list[str]) -> list[str]:
    """PyTorch's executed list as compute jobs: overlaps expanded in order, sends, receives and host actions left out."""
    out = []
    for cell in row:
        parts = cell[1:cell.index(")")].split(";") if cell.endswith("OVERLAP_F_B") else [cell]
        out += [p for p in parts if p.rstrip("0123456789")[-1:] in ("F", "B", "I", "W") and "_" not in p]
    return out


def _recorded_order(records, rank: int) -> list[str]:
    jobs = sorted((j for j in records.jobs if j.rank == rank and j.step == records.steps[0] and j.kind in ("F", "B", "I", "W")),
                  key=lambda j: j.start_ns)
    return [j.label for j in jobs]


@pytest.mark.parametrize("torch_class", sorted(HARNESS_NAME))
def test_the_recorded_compute_order_is_the_order_pytorch_executes(torch_class: str, pipeline) -> None:
    # through the pipeline fixture: the session (--profile-jobs --profile-steps=1:2) reports it, on rank 0 only
    entry = EXPECTED[torch_class]
    case = PipelineCase(HARNESS_NAME[torch_class], stages=entry["p"], microbatches=entry["m"], chunks=entry["v"],
                        cost=FixedCost.ms(F=1, B=2, I=1, W=1, activation_bytes=4096))
    result = pipeline(case)
    rec = result.records
    assert rec.backend == "torch" and rec.steps == [1]
    # the list each rank's runtime ran is the one PyTorch's own class runs (stored, from torch.profiler)
    assert rec.device["torch"]["executed"] == entry["executed"]
    for r in range(entry["p"]):
        assert _recorded_order(rec, r) == _compute_actions(entry["executed"][r])


def _timed_run(rank: int, f: float, i: float, w: float, idle_ms: float = 0.0) -> list[tuple[str, int, int, int, int]]:
    """ZB-V p=2 m=4 with parts of ``f``, ``i``, ``w`` ms, steps 1-3 recorded (``idle_ms``: this process idles so long
    before each compute action, outside it): per part of this rank, in the order run,
    ``(kind, stage, its duration, the busy call inside it: asked, took)`` (ns)."""
    cost = FixedCost.ms(F=f, B=i + w, I=i, W=w, activation_bytes=4096)

    def idle(name: str, step: int) -> None:
        if name.rstrip("0123456789")[-1:] in ("F", "I", "W") and "_" not in name:
            time.sleep(idle_ms / 1e3)

    torch_stages.BUSY_LOG = []
    torch_rank.BEFORE_ACTION = idle if idle_ms else None
    try:
        rec = run_case(PipelineCase("ZB-V", stages=2, microbatches=4, chunks=2, cost=cost), backend="torch", steps=range(1, 4)).records
        log = list(torch_stages.BUSY_LOG)
    finally:
        torch_stages.BUSY_LOG = None
        torch_rank.BEFORE_ACTION = None
    parts = sorted((j for j in rec.jobs if j.rank == rank and j.kind in ("F", "I", "W")), key=lambda j: j.start_ns)
    per_step = len(parts) // len(rec.steps)
    assert per_step == 4 * 3 * 2 and len(log) == per_step * (len(rec.steps) + 1)  # one busy call per part, warm-up first
    return [(j.kind, j.stage, j.duration_ns, asked, took) for j, (asked, took) in zip(parts, log[per_step:])]


def test_the_timed_parts_last_their_cost_within_the_measured_noise() -> None:
    rank = dist.get_rank()
    f, i, w = 2.0, 3.0, 1.0  # distinct costs: a part sleeping another kind's cost shows
    parts = _timed_run(rank, f, i, w)
    want = {"F": int(f * MS), "I": int(i * MS), "W": int(w * MS)}
    for kind, _, duration, asked, took in parts:
        assert asked == want[kind]  # exact: each part slept its own kind's cost, once
        assert duration >= took >= asked  # exact: the sleep lies inside the part and never ends early
    # the noise, measured in the runs themselves. A part is its sleep (its cost + the sleep's own error, took - asked,
    # recorded in the run) and the stage call around it (duration - took). That call's cost is measured in a run of
    # 1 µs parts in which each rank idles 3 ms before every compute action, outside it: the call then runs after a
    # long idle, on cold caches, as it does around a long part. Descheduled on a loaded machine, a call can also wait
    # for a core: at most the longest delay the run's own sleeps saw.
    calibration = _timed_run(rank, 0.001, 0.001, 0.001, idle_ms=3.0)
    path: dict[tuple[str, int], int] = {}
    for kind, stage, duration, _, took in calibration:
        path[(kind, stage)] = max(path.get((kind, stage), 0), duration - took)
    delay = max(took - asked for _, _, _, asked, took in parts)
    by: dict[tuple[str, int], list[int]] = {}
    for kind, stage, duration, _, took in parts:
        by.setdefault((kind, stage), []).append(duration - took)
    assert sorted(by) == sorted(path) and len(by) == 6  # F, I, W x this rank's 2 stages
    for key, values in by.items():
        assert statistics.median(values) <= path[key] + delay, (key, statistics.median(values), path[key], delay)


def test_the_step_beside_the_sim_of_the_same_lowered_order() -> None:
    case = PipelineCase("DualPipeV", stages=2, microbatches=4, chunks=2, cost=FixedCost.ms(F=2, B=4, I=2, W=2, activation_bytes=4096))
    result = run_case(case, backend="torch", steps=range(1, 3))
    rec, plan = result.records, result.plan
    sims = rec.device["torch"]["sim"]
    lowered = simulate(plan, case.cost).makespan_ns
    assert sims["lowered_step_ns"] == lowered == result.fidelity["predicted_step_ns"]
    # PyTorch runs each OVERLAP_F_B as F then B, each part once its own input is in: the case's order with its groups
    # run one part after the other. The ideal schedule overlaps a group's two parts (max(F, B) = 4 ms, no overlap model
    # given) but starts the group only once both parts' inputs are in (DualPipe's rule); here that wait costs more
    # than the overlap saves, so PyTorch's lowering is 2 ms shorter than the ideal schedule
    sequential = simulate(build_plan(with_groups(case.compute_schedule(), [])), case.cost).makespan_ns
    assert (lowered, sequential, sims["ideal_step_ns"]) == (50 * MS, 50 * MS, 52 * MS)
    # every job lasts at least its cost and runs in the lowered order: a step is at least the sim's, less the clocks' error
    bound = rec.device["clock_bound_ns"]
    for start, end in zip(rec.step_start_ns, rec.step_end_ns):
        assert end - start >= lowered - 2 * bound
    per_rank = rec.device["torch"]["per_rank"]
    assert [r["rank"] for r in per_rank] == [0, 1]
    for row in per_rank:  # what PyTorch's lowering added: posting every send and receive, its host actions, the optimizer
        assert row["post"] > 0 and row["host"] > 0 and row["optimizer"] > 0 and row["recv_wait"] >= 0 and row["send_wait"] >= 0
    assert {j.kind for j in rec.jobs} >= {"F", "B", "I", "W", "OPT", "SEND_F", "RECV_F", "SEND_B", "RECV_B"}


def _busy_ranges(trace: Path, base_ns: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each ``harness::busy`` range in one rank's trace, ns after ``base_ns`` (the import's time 0)."""
    doc = json.loads(trace.read_text(encoding="utf-8"))
    t0 = doc["baseTimeNanoseconds"]
    return sorted((t0 + us_to_ns(str(e["ts"])) - base_ns, t0 + us_to_ns(str(e["ts"])) + us_to_ns(str(e["dur"])) - base_ns)
                  for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("name") == torch_stages.BUSY_RANGE)


def test_import_torch_of_the_same_runs_traces_gives_the_same_records() -> None:
    rank = dist.get_rank()
    traces = Path(os.environ["TORCH_RANKS_OUT"]) / "traces-zbv"
    case = PipelineCase("ZB-V", stages=2, microbatches=4, chunks=2, cost=FixedCost.ms(F=1, B=2, I=1, W=1, activation_bytes=4096))
    low = torch_backend.lower_case(case.compute_schedule(), {"trace_dir": str(traces)})
    torch_stages.BUSY_LOG = []
    try:
        mine = torch_backend.run(low, case.cost, range(1, 3), "timed", {"trace_dir": str(traces)})
        log = list(torch_stages.BUSY_LOG)
    finally:
        torch_stages.BUSY_LOG = None
    theirs = read_torch_traces(traces)
    rep = theirs.replay.to_dict()  # the import's replay beside the schedule: its parts add up to the difference, exactly
    assert rep["jitter_ns"] + rep["host_overhead_ns"] + rep["transfer_wait_ns"] + rep["unexplained_ns"] == rep["difference_ns"]

    def key(j):
        return (j.step, j.rank, j.stream, j.stage, j.kind, j.microbatch, j.chunk)

    assert [key(j) for j in mine.records.jobs] == [key(j) for j in theirs.records.jobs]
    assert mine.records.steps == theirs.records.steps == [1, 2]
    # both sides read their clock inside the same PP: range (the hooks: the stage call's entry and the range's own
    # stamps; the profiler: the first operator and its range): with each rank's offset between the two time bases
    # taken out (the median over its ranges' starts), each job the hooks timed lies inside the profiler's range of that
    # action, widened by how far the two sides' range stamps disagree on that rank (measured here, per rank)
    def act(a):
        return (a.step, a.rank, a.stage, a.kind, a.microbatch)

    ranges = {act(a): a for a in theirs.actions}
    pairs = [(a, ranges[act(a)]) for a in mine.run.actions]
    for r in (0, 1):
        ours = [(a, b) for a, b in pairs if a.rank == r]
        offset = statistics.median(a.start_ns - b.start_ns for a, b in ours)
        slack = max(max(abs(a.start_ns - offset - b.start_ns), abs(a.end_ns - offset - b.end_ns)) for a, b in ours)
        for a, b in ours:
            assert b.start_ns - slack <= a.compute_start_ns - offset <= b.end_ns + slack, (a.label, r, slack)
            assert b.start_ns - slack <= a.end_ns - offset <= b.end_ns + slack, (a.label, r, slack)
    # each imported job holds its part's busy time, on the trace's own clock (no noise): the part's one
    # harness::busy range lies between the job's start (its first operator) and its end
    compute = sorted((b for a, b in pairs if a.rank == rank and a.kind in ("F", "I", "W")), key=lambda b: b.start_ns)
    busy = _busy_ranges(traces / f"rank{rank}.json", theirs.time_base_epoch_ns)
    assert len(compute) == 2 * 4 * 3 * 2 and len(busy) == len(compute)  # 2 steps x 4 micro-batches x F, I, W x 2 stages
    for b, (s0, s1) in zip(compute, busy):
        assert b.compute_start_ns <= s0 and s1 <= b.end_ns, (b.label, b.step, b.compute_start_ns, s0, s1, b.end_ns)
    # per kind, the two records' durations of the same jobs agree. They differ, by rule, in where a job starts: the
    # hooks at the stage call's entry, the import at the call's first operator, which comes before the part's busy
    # call; so by at most the hooks' own time in the job outside its busy call (measured: duration - busy call, in
    # the run, per job), plus how far the two sides disagree on the length of one and the same PP: range (measured
    # on this rank's ranges)
    theirs_by = {act(b): b for b in compute}
    jobs = sorted((a for a in mine.run.actions if a.rank == rank and a.kind in ("F", "I", "W")), key=lambda a: a.start_ns)
    assert len(log) == len(jobs) * 3 // 2  # one busy call per part, for the warm-up step and the 2 recorded
    took = [t for _, t in log[-len(jobs):]]  # the recorded steps' busy calls, in the order run
    ours = [(a, ranges[act(a)]) for a in mine.run.actions if a.rank == rank]
    disagree = statistics.median(abs((a.end_ns - a.start_ns) - (b.end_ns - b.start_ns)) for a, b in ours)
    for kind in ("F", "I", "W"):
        rows = [(a.end_ns - a.compute_start_ns, theirs_by[act(a)].end_ns - theirs_by[act(a)].compute_start_ns, t)
                for a, t in zip(jobs, took) if a.kind == kind]
        assert len(rows) == 2 * 4 * 2
        ours_ns = statistics.median(d for d, _, _ in rows)
        import_ns = statistics.median(d for _, d, _ in rows)
        outside = statistics.median(d - t for d, _, t in rows)
        assert abs(ours_ns - import_ns) <= outside + disagree, (kind, ours_ns, import_ns, outside, disagree)


def test_the_compute_workload_trains_linear_layers_sized_from_the_flops() -> None:
    # hidden 64, seq 16: 2 KiB activations (512 fp32 features), a stage's forward ~1.6 MFLOP: 3 Linear(512, 512) layers
    cost = TransformerCost(hidden_size=64, seq_len=16, micro_batch_size=1, num_layers=2, tflops=1.0)
    result = run_case(PipelineCase("ZB-H1", stages=2, microbatches=4, cost=cost, workload="compute"), backend="torch",
                      steps=range(1, 3))
    info = result.records.device["torch"]
    assert result.records.device["workload"] == "matmul" and info["workload"].startswith("compute (Linear layers")
    assert info["activation_shape"] == [1, 512]
    assert len(info["losses"]) == 3 and info["losses"][0] != info["losses"][1] != info["losses"][2]
    assert info["weights_changed"] == [True, True]
    assert {j.kind for j in result.records.jobs} >= {"F", "I", "W", "OPT"}
