"""Real work: every job is a NumPy GEMM sized from the cost model's FLOPs.

On the cpu backend the four stages share this machine's cores, so they really
contend - the CPU analogue of several stages sharing one GPU. The measured
step time and bubble therefore differ from the ideal, and that difference is
the point of this case, and why it is flagged ``contended`` on a machine with
fewer cores than stages: its figures measure how the OS shares the cores as
much as the schedule, and ``compare`` does not gate it unless ``--strict``.
(On ``sim`` the jobs take their cost-model durations.) What holds anywhere is
asserted: every job ran, and the activations held follow the schedule.
"""

from __future__ import annotations

import pytest

from harness import PipelineCase, analyze, build_schedule

from _checks import check_run
from _models import SMALL_CPU


@pytest.mark.parametrize("schedule", ["FThenB", "1F1B"])
def test_small_model_matmul(pipeline, schedule):
    result = pipeline(PipelineCase(schedule, stages=4, microbatches=8, cost=SMALL_CPU, workload="compute"))
    assert result.metrics.peak_inflight == ([8] * 4 if schedule == "FThenB" else [4, 3, 2, 1])
    check_run(result, analyze(build_schedule(schedule, 4, 8), SMALL_CPU))
