"""Transfer delays on a plan's dependency edges under the ``edge`` communication model
(:mod:`harness.model.comm`): a consumer on another rank starts no earlier than its producer's end plus
the transfer time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.errors import ConfigError
from harness.schedule.model import KIND_CODE, Job, JobKind

if TYPE_CHECKING:
    from harness.model.cost import CostModel
    from harness.plan.graph import Plan

__all__ = ["edge_delays"]


_CF, _CB, _CI = KIND_CODE[JobKind.F], KIND_CODE[JobKind.B], KIND_CODE[JobKind.I]


def edge_delays(plan: Plan, cost: CostModel) -> list[int]:
    """Per job of ``plan`` (a plan without send/receive jobs), the transfer time in ns its
    output takes to a consumer on another rank under ``edge``: for ``F`` of stage ``k`` whose
    next stage ``k+1`` is on another rank, the cost model's ``SEND_F`` duration of stage ``k``;
    for ``B``/``I`` of stage ``k`` whose previous stage ``k-1`` is on another rank, the
    ``SEND_B`` duration of stage ``k``; 0 for every other job. Neighbours are those within the
    stage's chain (:mod:`harness.schedule.chains`): a chain's last stage sends no activation, its
    first no gradient. A consumer on another rank starts no earlier than the producer's end plus
    the producer's delay, so a job that waits for several producers (the first job of an
    overlapped group, :mod:`harness.plan.groups`) waits for each its own transfer. The cost model
    is asked once per stage and direction.

    Raises:
        ConfigError: the plan has send/receive jobs (``edge`` has none).
    """
    import numpy as np

    from harness.schedule.chains import links

    cols = plan.arrays
    kind, stage = cols.kind, cols.stage
    if bool(np.isin(kind, [KIND_CODE[k] for k in JobKind if k.is_comm]).any()):
        raise ConfigError("comm_model 'edge' takes a plan without send/receive jobs")
    sched = plan.schedule
    n = sched.num_stages
    rank = np.array(sched.stage_to_rank, np.int64)
    has_prev, has_next = links(sched)
    fwd_out = np.zeros(n, np.int64)  # transfer of F of stage k to stage k+1
    bwd_out = np.zeros(n, np.int64)  # transfer of B/I of stage k to stage k-1
    for k in range(n):
        if has_next[k] and rank[k + 1] != rank[k]:
            fwd_out[k] = int(cost.duration_ns(Job(k, JobKind.SEND_F, 0), n))
        if has_prev[k] and rank[k - 1] != rank[k]:
            bwd_out[k] = int(cost.duration_ns(Job(k, JobKind.SEND_B, 0), n))
    out = np.where(kind == _CF, fwd_out[stage], np.where((kind == _CB) | (kind == _CI), bwd_out[stage], 0))
    return out.tolist()  # type: ignore[no-any-return]
