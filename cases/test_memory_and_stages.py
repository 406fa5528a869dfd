"""Choosing a schedule by step time and memory: the 1.2 B GPT with its embedding and LM head, on 4 ranks.

The model is ``_models.GPT_1B`` with a 50,304-token vocabulary: the first stage
holds the embedding, the last the LM head (2·t·h·V FLOPs, and fp32 logits kept
until its backward), so equal layer counts do not make equal stages. The
layouts (Megatron-Core's syntax) give the end stages fewer layers. Memory per
rank is counted in bytes (activations after Korthikanti et al., 2022; 18
bytes per parameter of static state) against a 9 GiB device: a schedule whose
peak exceeds it is reported as "does not fit", the trade-off zero-bubble
schedules make (shorter steps, more activations held).

What is asserted holds on any backend: the peaks per rank are those of the
plan's analytic timeline (a rank's allocations and frees follow its list
order, whatever the timing), and on ``sim`` the step is the analytic one.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness import PipelineCase, analyze, build_plan, build_schedule
from harness.analysis.memory import analytic_memory

from _checks import check_run
from _models import GPT_1B

GPT_VOCAB = replace(GPT_1B, vocab_size=50304, num_attention_heads=16)
#: 24 layers on 4 stages, lighter at the ends (embedding, LM head); on 8 stages for two chunks per rank.
LAYOUT_4 = "Et*5|t*7|t*7|t*5L"
LAYOUT_8 = "Et*2|t*3|t*3|t*4|t*4|t*3|t*3|t*2L"
DEVICE = 9 * 2**30


@pytest.mark.parametrize(("schedule", "v"), [("1F1B", 1), ("ZB-H1", 1), ("Interleaved1F1B", 2), ("ZB-V", 1)])
def test_schedule_by_time_and_memory(pipeline, schedule, v):
    stages = 8 if schedule in ("Interleaved1F1B", "ZB-V") else 4
    cost = replace(GPT_VOCAB, layout=LAYOUT_8 if stages == 8 else LAYOUT_4)
    result = pipeline(PipelineCase(schedule, stages=4, microbatches=8, chunks=v, cost=cost, memory_limit_bytes=DEVICE))
    plan = build_plan(build_schedule(schedule, 4, 8, v))
    predicted = analytic_memory(plan, cost, DEVICE)
    assert result.memory.peak_bytes == predicted.peak_bytes
    assert result.memory.fits == (max(predicted.peak_bytes) <= DEVICE)
    check_run(result, analyze(plan, cost))


def test_an_even_split_is_imbalanced_by_the_lm_head(pipeline):
    even = replace(GPT_VOCAB, layout="Et*6|t*6|t*6|t*6L")
    result = pipeline(PipelineCase("1F1B", stages=4, microbatches=8, cost=even))
    balanced = analyze(build_schedule("1F1B", 4, 8), replace(GPT_VOCAB, layout=LAYOUT_4))
    modelled = analyze(build_schedule("1F1B", 4, 8), even)
    assert max(range(4), key=modelled.busy_ns.__getitem__) == 3  # the cost model's work: rank 3 holds the LM head
    if result.records.backend == "sim":  # a timed backend's busy times are measured: a loaded host can reorder close ranks
        assert result.decomposition.busiest_rank == 3
    assert result.decomposition.imbalance_ns > 0
    # The LM head's 2 t h V FLOPs (about 1 GFLOP of 6-layer stages' 3.3) make the even split the slower one.
    assert modelled.makespan_ns > balanced.makespan_ns
