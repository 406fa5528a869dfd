"""The sim replay (harness/run/replay.py) makes the records the op-by-op executor makes, on every
built-in schedule, p in {1, 2, 4, 8}, m up to 64, v up to 3, under every communication model."""

from __future__ import annotations

from dataclasses import replace

import pytest
from _sched_helpers import build_any

from harness.case import PipelineCase
from harness.errors import ConfigError
from harness.model import comm
from harness.model.cost import FixedCost
from harness.plan.build import build_plan
from harness.plan.delays import edge_delays
from harness.run.device.sim import SimDevice
from harness.run.executor import execute
from harness.run.window import AdaptiveWindow
from harness.runner import run_case
from harness.schedule.registry import build_schedule, builder_info, schedule_names

COST = FixedCost(forward_ns=1000, backward_ns=2300, backward_input_ns=1100, backward_weight_ns=1200, p2p_latency_ns=170,
                 activation_bytes=1 << 16, p2p_gbytes_per_s=50)


def _both(schedule, steps, delays):
    plan = build_plan(schedule)
    fast = execute(plan, SimDevice(), COST, steps, delays=delays)
    slow = execute(plan, SimDevice(), COST, steps, delays=delays, replay=False)
    return fast, slow


def _same(fast, slow) -> None:
    def strip(r):
        return [(j.rank, j.stream, j.stage, j.kind, j.microbatch, j.chunk, j.step, j.start_ns, j.end_ns) for j in r.jobs]

    assert strip(fast) == strip(slow)
    # the replay made columns only; the executor's list gives the same columns
    a, b = fast.columns, slow.columns
    for name in ("rank", "stream", "stage", "kind", "microbatch", "chunk", "step", "start_ns", "end_ns"):
        assert getattr(a, name).tolist() == getattr(b, name).tolist(), name
    assert (a.streams, a.kinds) == (b.streams, b.kinds)
    assert (fast.steps, fast.step_start_ns, fast.step_end_ns, fast.streams) == (slow.steps, slow.step_start_ns, slow.step_end_ns, slow.streams)
    assert (fast.backend, fast.device, fast.num_ranks, fast.warmup_steps) == (slow.backend, slow.device, slow.num_ranks, slow.warmup_steps)
    assert fast.window is not None and slow.window is not None
    assert replace(fast.window, elapsed_ns=0) == replace(slow.window, elapsed_ns=0)  # elapsed_ns: host time
    assert all(j.enqueue_ns == 0 for j in fast.jobs) and fast.enqueue_ns == [0] * len(fast.steps)


@pytest.mark.parametrize("model", ["free", "edge", "stream"])
@pytest.mark.parametrize("name", schedule_names())
def test_replay_equals_the_op_by_op_executor(name, model):
    info = builder_info(name)
    ran = 0
    for p in (1, 2, 4, 8):
        for m in sorted({1, p, 2 * p, 2 * p + 1, 64}):
            for v in ((1, 2, 3) if info.takes_chunks else (1,)):
                try:
                    source = build_any(name, p, m, v) if info.takes_chunks else build_any(name, p, m)
                except ConfigError:
                    continue  # a size this schedule refuses (e.g. m below p, v = 1)
                schedule = comm.lower(source, COST, model)
                plan = build_plan(schedule)
                delays = edge_delays(plan, COST) if model == "edge" else None
                fast, slow = _both(schedule, range(1, 3), delays)
                _same(fast, slow)
                assert fast.step_start_ns[1] == fast.step_end_ns[0]  # back to back: the second step starts at the first's end
                ran += 1
    assert ran >= (6 if name == "DualPipe" else 8), f"{name}: only {ran} sizes built"  # (DualPipe: p and m even, m >= 2p)


def test_replay_follows_an_adaptive_window():
    schedule = comm.lower(build_schedule("1F1B", 4, 8), COST, "stream")
    fast, slow = _both(schedule, AdaptiveWindow(warmup_steps=1, min_steps=3, max_steps=6), None)
    _same(fast, slow)
    assert len(fast.steps) == 5  # sim steps are identical: stable once the median's interval can cover 93.75% (5 steps)


def test_run_case_on_sim_replays_and_gives_the_figures_of_the_analytic_path():
    result = run_case(PipelineCase("ZB-H1", stages=4, microbatches=8, cost=COST, comm=True), "sim", range(0, 2))
    assert result.records.enqueue_ns == [0, 0]
    step = result.records.step_end_ns[0] - result.records.step_start_ns[0]
    assert result.metrics.step_time_median_ns == step
