"""1F1B, interleaved 1F1B, ZB-H1 and ZB-V side by side: a 1.2 B GPT on 4 ranks, 8 micro-batches.

Cost model: hidden 2048, sequence 1024, micro-batch 1, 24 layers, 200 TFLOP/s
(``_models.GPT_1B``); forward, backward-for-inputs and backward-for-weights of
a stage all cost ``24 L h^2 t`` FLOPs, so T_F = T_B = T_W, the setting of the
zero-bubble paper. Expected, idle share of total (uniform stages, free p2p):

* 1F1B: (p-1)/(m+p-1) = 3/11 (Narayanan et al., SC'21, arXiv:2104.04473 §2.2.1);
* interleaved, v = 2: (p-1)/(v m + p - 1) = 3/19 (§2.2.2);
* ZB-H1: (p-1)(T_F+T_B-T_W) = 3 T_F per rank, 3/27 of the step (Qi et al., arXiv:2401.10241, Table 2);
* ZB-V: zero bubble inside each rank's span for T_F = T_B = T_W (paper §6).
"""

from __future__ import annotations

import pytest

from harness import PipelineCase, analyze, build_schedule
from harness.analysis import theory

from _checks import check_run
from _models import GPT_1B

P, M = 4, 8


@pytest.mark.parametrize(
    ("schedule", "v", "bubble"),
    [
        pytest.param("1F1B", 1, 3 / 11, id="1F1B"),
        pytest.param("Interleaved1F1B", 2, 3 / 19, id="Interleaved1F1B-v2"),
        pytest.param("ZB-H1", 1, 3 / 27, id="ZB-H1"),
        pytest.param("ZB-V", 1, None, id="ZB-V"),
    ],
)
def test_schedule_zoo(pipeline, schedule, v, bubble):
    result = pipeline(PipelineCase(schedule, stages=P, microbatches=M, chunks=v, cost=GPT_1B))
    predicted = analyze(build_schedule(schedule, P, M, v), GPT_1B)
    if bubble is not None:
        assert predicted.bubble_ratio == pytest.approx(bubble, rel=1e-3)  # ns rounding of job durations
    else:
        assert predicted.max_span_bubble_ns <= P  # zero up to a ns of rounding per job boundary
    assert predicted.peak_inflight == [theory.peak_inflight(schedule, P, M, r, v) for r in range(P)]
    check_run(result, predicted)
