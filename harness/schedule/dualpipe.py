"""DualPipeV: DeepSeek's DualPipe folded into a V placement, forward and backward of
different micro-batches overlapped.

The order is PyTorch's ``ScheduleDualPipeV._calculate_single_rank_operations``
(torch/distributed/pipelining/schedules.py), itself from deepseek-ai/DualPipe
``dualpipev.py``; see :func:`dualpipe_v`. The builder registers on import
(:mod:`harness.schedule.builders` imports this module) and stays importable from
:mod:`harness.schedule.builders`.
"""

from __future__ import annotations

from harness.errors import ConfigError
from harness.schedule.builders import _finish
from harness.schedule.model import Job, JobKind, Schedule, v_placement
from harness.schedule.registry import _check_sizes, register

__all__ = ["dualpipe_v"]


@register(
    "DualPipeV",
    "DualPipe-V",
    summary="DeepSeek's DualPipe folded into a V placement; F/B pairs of different micro-batches overlapped (PyTorch ScheduleDualPipeV)",
    placed_chunks=2,
)
def dualpipe_v(num_ranks: int, num_microbatches: int, optimizer: bool = False, overlap: bool = True) -> Schedule:
    """DualPipeV: V placement (rank ``r`` holds stages ``r`` and ``2p-1-r``), eight
    phases per rank as in PyTorch's ``ScheduleDualPipeV._calculate_single_rank_operations``
    (itself from deepseek-ai/DualPipe ``dualpipev.py``).

    Each overlapped ``F``+``B`` pair of the original (``OVERLAP_F_B``: in step 4 both
    pairs, except the first ``F0 B1`` of the last rank, and in step 5 ``F1 B0``) is
    listed as the forward then the full backward and kept as an overlapped job
    group (:mod:`harness.plan.groups`): the two run at the same time, so the pair
    lasts ``max(F, B)``. ``overlap=False`` runs them back to back. The second half
    of the cool-down splits backwards into ``I`` and ``W``.

    Raises:
        ConfigError: ``m < 2p`` (DualPipeV needs at least as many micro-batches as stages).
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    if m < 2 * p:
        raise ConfigError(f"DualPipeV needs m >= 2p micro-batches (one per stage); got p={p}, m={m}")
    F, I, W, B = JobKind.F, JobKind.I, JobKind.W, JobKind.B  # noqa: N806
    ranks: list[list[Job | None]] = []
    groups: list[tuple[Job, Job]] = []
    for r in range(p):
        s0, s1 = r, 2 * p - 1 - r
        jobs: list[Job | None] = []
        fwd = {s0: 0, s1: 0}
        bwd = {s0: 0, s1: 0}
        weights: list[Job] = []

        def add(
            stage: int,
            kind: JobKind,
            jobs: list[Job | None] = jobs,
            fwd: dict[int, int] = fwd,
            bwd: dict[int, int] = bwd,
            weights: list[Job] = weights,
        ) -> None:
            if kind is F:
                jobs.append(Job(stage, F, fwd[stage]))
                fwd[stage] += 1
                return
            jobs.append(Job(stage, kind, bwd[stage]))
            if kind is I:
                weights.append(Job(stage, W, bwd[stage]))
            bwd[stage] += 1

        def add_w(jobs: list[Job | None] = jobs, weights: list[Job] = weights) -> None:
            if weights:
                jobs.append(weights.pop(0))

        def pair(f_stage: int, b_stage: int, jobs: list[Job | None] = jobs) -> None:
            add(f_stage, F)
            add(b_stage, B)
            groups.append((jobs[-2], jobs[-1]))  # type: ignore[arg-type]

        for _ in range((p - r - 1) * 2):  # step 1: F0
            add(s0, F)
        for _ in range(r + 1):  # step 2: F0 F1
            add(s0, F)
            add(s1, F)
        for _ in range(p - r - 1):  # step 3: I1 W F1
            add(s1, I)
            add_w()
            add(s1, F)
        for index in range(m - 2 * p + r + 1):  # step 4: (F0 B1) (F1 B0)
            if index == 0 and r == p - 1:  # not overlapped, as in DualPipe and PyTorch (a shorter bubble)
                add(s0, F)
                add(s1, B)
            else:
                pair(s0, s1)
            pair(s1, s0)
        for _ in range(p - r - 1):  # step 5: B1, (F1 B0)
            add(s1, B)
            pair(s1, s0)
        zb = False
        half = r + 1
        for i in range(half):  # step 6: B1 B0, second half split
            if i == half // 2 and r % 2 == 1:
                zb = True
            add(s1, I if zb else B)
            if i == half // 2 and r % 2 == 0:
                zb = True
            add(s0, I if zb else B)
        for _ in range(p - r - 1):  # step 7: W, B0
            add_w()
            add(s0, I if zb else B)
        for _ in range(r + 1):  # step 8: W
            add_w()
        ranks.append(jobs)
    if overlap:
        return _finish("DualPipeV", m, v_placement(p), ranks, optimizer, overlap=tuple(groups))
    return _finish("DualPipeV", m, v_placement(p), ranks, optimizer)
