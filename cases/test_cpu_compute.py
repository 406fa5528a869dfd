"""Real work: every job is a NumPy GEMM sized from the cost model's FLOPs.

On the cpu backend the four stages share this machine's cores, so they really
contend - the CPU analogue of several stages sharing one GPU. The measured
step time and bubble therefore differ from the ideal, and that difference is
the point of this case. (On ``sim`` the jobs take their cost-model durations.)
"""

from __future__ import annotations

import pytest

from harness.case import PipelineCase

from _models import SMALL_CPU


@pytest.mark.parametrize("schedule", ["FThenB", "1F1B"])
def test_small_model_matmul(pipeline, schedule):
    result = pipeline(PipelineCase(schedule, stages=4, microbatches=8, cost=SMALL_CPU, workload="compute"))
    assert result.metrics.step_time_median_ns > 0
