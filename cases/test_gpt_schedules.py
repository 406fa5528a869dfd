"""GPT-style 1.2B model on a 4-stage pipeline: FThenB (GPipe) against 1F1B.

Both schedules have the same bubble, (p-1)/(m+p-1) of total time; 1F1B holds
at most p-s micro-batches on rank s instead of m (Narayanan et al., SC'21,
§2.2.1). The sweep over m shows the bubble shrinking as m grows.
"""

from __future__ import annotations

import pytest

from harness import PipelineCase, analyze, build_schedule

from _checks import check_run
from _models import GPT_1B

STAGES = 4


@pytest.mark.parametrize("schedule", ["FThenB", "1F1B"])
def test_gpt_m8(pipeline, schedule):
    result = pipeline(PipelineCase(schedule, stages=STAGES, microbatches=8, cost=GPT_1B))
    assert result.metrics.peak_inflight == ([8] * STAGES if schedule == "FThenB" else [4, 3, 2, 1])
    check_run(result, analyze(build_schedule(schedule, STAGES, 8), GPT_1B))


@pytest.mark.parametrize("microbatches", [4, 8, 16, 32])
@pytest.mark.parametrize("schedule", ["FThenB", "1F1B"])
def test_gpt_sweep_m(pipeline, schedule, microbatches):
    result = pipeline(PipelineCase(schedule, stages=STAGES, microbatches=microbatches, cost=GPT_1B))
    predicted = analyze(build_schedule(schedule, STAGES, microbatches), GPT_1B)
    # (p-1)/(m+p-1), up to the ns rounding of job durations
    assert abs(predicted.bubble_ratio - (STAGES - 1) / (microbatches + STAGES - 1)) < 1e-6
    check_run(result, predicted)
