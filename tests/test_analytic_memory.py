"""The analytic memory peaks (harness.analysis.memory.analytic_memory) against what a sim run's records give.

The layout search judges each candidate's memory by analytic_memory, on the timeline analyze_plan simulated;
a chooser's row must show the peaks that running its case on sim reports, under every comm model.
"""

from __future__ import annotations

import pytest

from harness.analysis.analytic import analyze, analyze_plan
from harness.analysis.memory import analytic_memory
from harness.case import PipelineCase
from harness.errors import ConfigError
from harness.model.transformer import TransformerCost
from harness.plan.build import build_plan
from harness.runner import run_case

MODEL = TransformerCost(hidden_size=1024, seq_len=1024, micro_batch_size=1, num_layers=8, tflops=100, vocab_size=8192,
                        num_attention_heads=16, p2p_gbytes_per_s=0.5)


@pytest.mark.parametrize("comm_model", ["stream", "edge", "blocking", "free"])
@pytest.mark.parametrize(("schedule", "p", "m", "v"), [("1F1B", 4, 8, 1), ("ZB-H2", 4, 8, 1), ("Interleaved1F1B", 2, 4, 2),
                                                       ("ZB-V", 2, 4, 2), ("DualPipeV", 2, 6, 2), ("DualPipeV", 4, 8, 2)])
def test_peaks_equal_a_sim_runs(schedule: str, p: int, m: int, v: int, comm_model: str) -> None:
    case = PipelineCase(schedule, stages=p, microbatches=m, chunks=v, cost=MODEL, comm_model=comm_model)
    plan = build_plan(case.build())
    figures, timeline = analyze_plan(plan, MODEL, comm_model)
    assert figures == analyze(plan, MODEL, comm_model=comm_model)
    assert timeline.makespan_ns == figures.makespan_ns
    memory = analytic_memory(plan, MODEL, simulated=timeline)
    run = run_case(case, backend="sim")
    assert round(run.metrics.step_time_median_ns) == figures.makespan_ns
    assert run.memory is not None and memory is not None
    assert list(memory.peak_bytes) == list(run.memory.peak_bytes)
    assert list(memory.static_bytes) == list(run.memory.static_bytes)
    assert max(memory.peak_bytes) > max(memory.static_bytes)  # activations held on top of the parameters


def test_a_timeline_of_another_plan_is_refused() -> None:
    one = build_plan(PipelineCase("DualPipeV", stages=2, microbatches=4, chunks=2, cost=MODEL).build())
    other = build_plan(PipelineCase("DualPipeV", stages=2, microbatches=6, chunks=2, cost=MODEL).build())
    _, timeline = analyze_plan(other, MODEL)
    with pytest.raises(ConfigError, match="another plan"):
        analytic_memory(one, MODEL, simulated=timeline)
