"""Activation recomputation per stage: one mode for all stages or one per stage, in durations, memory,
the run's figures and the cost model's description."""

from __future__ import annotations

import json

import pytest

from harness.case import PipelineCase
from harness.errors import ConfigError
from harness.model.transformer import TransformerCost
from harness.runner import run_case
from harness.schedule.model import Job, JobKind

#: 4 layers over 2 stages; s b h = 128 * 256 and 5 a s / h = 5 * 2 * 128 / 256 = 5. Attention FLOPs counted,
#: so that a full recomputation redoes exactly the forward.
SMALL = {"hidden_size": 256, "seq_len": 128, "micro_batch_size": 1, "num_layers": 4, "tflops": 1, "attention": True}
SBH = 128 * 256


def per_stage(cost: TransformerCost, kind: JobKind, stages: int = 2) -> list[int]:
    return [cost.duration_ns(Job(k, kind, 0), stages) for k in range(stages)]


def test_a_mode_per_stage_gives_each_stage_that_mode_s_durations_and_bytes():
    mixed = TransformerCost(**SMALL, recompute=["full", "none"])
    full = TransformerCost(**SMALL, recompute="full")
    none = TransformerCost(**SMALL)
    assert mixed.recompute == ("full", "none")  # a list is kept as a tuple (the dataclass is frozen and hashable)
    assert per_stage(mixed, JobKind.B) == [per_stage(full, JobKind.B)[0], per_stage(none, JobKind.B)[1]]
    assert per_stage(mixed, JobKind.F) == per_stage(none, JobKind.F)  # recomputation adds to the backward only
    assert mixed.recompute_time_ns(Job(0, JobKind.B, 0), 2) == full.duration_ns(Job(0, JobKind.F, 0), 2)  # full re-runs the forward
    assert mixed.recompute_time_ns(Job(1, JobKind.B, 0), 2) == 0
    # bytes per forward: stage 0 keeps each of its 2 layers' input (2 s b h), stage 1 everything (34 + 5 a s / h = 39 s b h)
    assert [mixed.memory_bytes(Job(k, JobKind.F, 0), 2) for k in (0, 1)] == [2 * 2 * SBH, 2 * 39 * SBH]
    assert mixed.is_uniform(2) is False and TransformerCost(**SMALL, recompute=("full", "full")).is_uniform(2) is True
    assert json.loads(json.dumps(mixed.describe()))["recompute"] == ["full", "none"]
    assert none.describe()["recompute"] == "none"


def test_a_run_with_a_mode_per_stage_counts_each_stage_s_recomputation_and_memory():
    cost = TransformerCost(**SMALL, recompute=["none", "full"])
    r = run_case(PipelineCase("1F1B", 2, 4, cost=cost), "sim")
    # 1F1B: rank 1 holds 1 micro-batch, rank 0 two; rank 1's 4 backwards each re-run its forward
    assert r.memory.peak_activation_bytes == [2 * 2 * 39 * SBH, 2 * 2 * SBH]
    f = cost.duration_ns(Job(1, JobKind.F, 0), 2)
    assert r.decomposition.recompute_ns == 4 * f and r.decomposition.busiest_rank == 1


def test_recompute_mistakes_are_named():
    with pytest.raises(ConfigError, match=r"recompute\[1\] \(stage 1\)='some'; choose one of none, selective, full"):
        TransformerCost(**SMALL, recompute=["none", "some"])
    with pytest.raises(ConfigError, match="recompute is an empty list; give one mode per stage"):
        TransformerCost(**SMALL, recompute=[])
    with pytest.raises(ConfigError, match="recompute=3; give one of none, selective, full for every stage, or a list"):
        TransformerCost(**SMALL, recompute=3)
    three = TransformerCost(**SMALL, recompute=["none", "full", "none"])
    with pytest.raises(ConfigError, match=r"recompute gives 3 stage\(s\), but the pipeline has 2 \(p x v"):
        three.duration_ns(Job(0, JobKind.B, 0), 2)
    with pytest.raises(ConfigError, match=r"recompute gives 3 stage\(s\), but the pipeline has 2"):
        run_case(PipelineCase("1F1B", 2, 4, cost=three), "sim")
