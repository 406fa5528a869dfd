"""DeepSeek's DualPipe (two directions) and DualPipeV (its V-shaped half): forward and
backward of different micro-batches overlapped.

Both follow the eight steps of ``step()`` in deepseek-ai/DualPipe (``dualpipe.py`` and
``dualpipev.py``, commit 3da1bbea); DualPipeV's order is also PyTorch's
``ScheduleDualPipeV._calculate_single_rank_operations``
(torch/distributed/pipelining/schedules.py). See :func:`_eight_steps`. The builders
register on import (:mod:`harness.schedule` imports this module).
"""

from __future__ import annotations

from harness.errors import ConfigError
from harness.schedule.builders import _finish
from harness.schedule.chains import CHAINS_PARAM
from harness.schedule.groups import OVERLAP_PARAM
from harness.schedule.model import Job, JobKind, Schedule, v_placement
from harness.schedule.registry import _check_sizes, register

__all__ = ["dualpipe", "dualpipe_v"]


def _eight_steps(
    n: int, h: int, chunks: int, turn: bool, stages: tuple[int, int], first_mb: tuple[int, int],
    groups: list[tuple[Job, Job]],
) -> list[Job | None]:
    """One rank's jobs in the order of DualPipe's ``step()`` (steps 1-8 of ``dualpipev.py``; in
    ``dualpipe.py`` the same with ``num_half_ranks``, ``half_rank`` and ``half_num_chunks``).

    Args:
        n: ranks of the V (DualPipeV: ``p``; DualPipe: ``p / 2``).
        h: the rank's place in it (DualPipeV: ``r``; DualPipe: ``min(r, p - 1 - r)``).
        chunks: micro-batches through it (DualPipeV: ``m``; DualPipe: ``m / 2`` per direction).
        turn: whether the rank sits at the turn (DualPipeV's last rank, DualPipe's two middle
            ranks), whose first step-4 pair is not overlapped.
        stages: the stages of the code's phase 0 and phase 1 on this rank.
        first_mb: the first micro-batch of each phase (each runs ``chunks`` in order).
        groups: where the overlapped pairs are appended.

    Returns:
        The rank's jobs. The overlapped pairs (``_forward_backward_chunk``) are listed as the
        forward then the full backward; backwards run with ``enable_zb`` are ``I``, their ``W``
        in ``WeightGradStore``'s FIFO order (``_weight_chunk``).
    """
    F, I, W, B = JobKind.F, JobKind.I, JobKind.W, JobKind.B  # noqa: N806
    jobs: list[Job | None] = []
    fwd = list(first_mb)
    bwd = list(first_mb)
    weights: list[Job] = []

    def add(phase: int, kind: JobKind) -> None:
        stage = stages[phase]
        if kind is F:
            jobs.append(Job(stage, F, fwd[phase]))
            fwd[phase] += 1
            return
        jobs.append(Job(stage, kind, bwd[phase]))
        if kind is I:
            weights.append(Job(stage, W, bwd[phase]))
        bwd[phase] += 1

    def add_w() -> None:
        jobs.append(weights.pop(0))  # WeightGradStore.pop: the oldest queued backward

    def pair(f_phase: int, b_phase: int) -> None:
        add(f_phase, F)
        add(b_phase, B)
        groups.append((jobs[-2], jobs[-1]))  # type: ignore[arg-type]

    for _ in range((n - h - 1) * 2):  # step 1: F0
        add(0, F)
    for _ in range(h + 1):  # step 2: F0 F1
        add(0, F)
        add(1, F)
    for _ in range(n - h - 1):  # step 3: I1 W F1
        add(1, I)
        add_w()
        add(1, F)
    for index in range(chunks - 2 * n + h + 1):  # step 4: (F0 B1) (F1 B0)
        if index == 0 and turn:  # not overlapped, as in DualPipe and PyTorch (a shorter bubble)
            add(0, F)
            add(1, B)
        else:
            pair(0, 1)
        pair(1, 0)
    for _ in range(n - h - 1):  # step 5: B1, (F1 B0)
        add(1, B)
        pair(1, 0)
    zb = False
    half = h + 1
    for i in range(half):  # step 6: B1 B0, the second half split
        if i == half // 2 and h % 2 == 1:
            zb = True
        add(1, I if zb else B)
        if i == half // 2 and h % 2 == 0:
            zb = True
        add(0, I if zb else B)
    for _ in range(n - h - 1):  # step 7: W, B0
        add_w()
        add(0, I if zb else B)
    for _ in range(h + 1):  # step 8: W
        add_w()
    return jobs


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
    group (:mod:`harness.plan.groups`): the pair starts when both inputs are in, lasts
    the group's time (``F + B`` unless the cost model says otherwise,
    :mod:`harness.model.overlap`) and hands both outputs on at its end, as DualPipe runs
    it. ``overlap=False`` lists them as plain jobs. The second half of the cool-down
    splits backwards into ``I`` and ``W``.

    Raises:
        ConfigError: ``m < 2p`` (DualPipeV needs at least as many micro-batches as stages).
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    if m < 2 * p:
        raise ConfigError(f"DualPipeV needs m >= 2p micro-batches (one per stage); got p={p}, m={m}")
    groups: list[tuple[Job, Job]] = []
    ranks = [_eight_steps(p, r, m, r == p - 1, (r, 2 * p - 1 - r), (0, 0), groups) for r in range(p)]
    if overlap:
        return _finish("DualPipeV", m, v_placement(p), ranks, optimizer, **{OVERLAP_PARAM: tuple(groups)})
    return _finish("DualPipeV", m, v_placement(p), ranks, optimizer)


@register(
    "DualPipe",
    summary="DeepSeek's bidirectional DualPipe: two model copies, half the micro-batches each way; F/B pairs overlapped",
    placed_chunks=2,
)
def dualpipe(num_ranks: int, num_microbatches: int, optimizer: bool = False, overlap: bool = True) -> Schedule:
    """DualPipe (deepseek-ai/DualPipe ``dualpipe.py``; DeepSeek-V3 technical report,
    arXiv:2412.19437 §3.2.1): each of the ``p`` ranks holds stage ``r`` of the model and, of a
    second copy, stage ``p-1-r`` (2x parameters); micro-batches ``0..m/2-1`` run the first copy
    from rank 0 to ``p-1`` (harness stages ``0..p-1``), ``m/2..m-1`` the second from rank ``p-1``
    to 0 (harness stages ``p..2p-1``, model stage ``k`` as stage ``p+k``: the V placement, rank
    ``r`` holding stages ``r`` and ``2p-1-r``). The two directions are two chains
    (:mod:`harness.schedule.chains`, ``params["chains"] = ((0, p, 0, m/2), (p, 2p, m/2, m))``):
    each stage runs only its direction's micro-batches, and nothing passes between them.

    Rank ``r`` runs the eight steps of ``DualPipe.step`` with ``half_rank = min(r, p-1-r)``,
    its "phase 0" the direction that enters at its own end of the pipeline (the first copy on
    ranks ``< p/2``, the second on the others: the code's ``phase ^= is_in_second_half``), and
    the two middle ranks at the turn (:func:`_eight_steps`). Overlapped pairs as in
    :func:`dualpipe_v`; ``overlap=False`` lists them as plain jobs.

    Not modelled: the all-reduce of the gradients of a stage's two copies (ranks ``r`` and
    ``p-1-r``) before the optimizer step; with ``optimizer`` each stage has its own ``OPT``.

    Raises:
        ConfigError: ``p`` odd, ``m`` odd or ``m < 2p`` (DualPipe's own asserts).
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    if p % 2 or m % 2 or m < 2 * p:
        raise ConfigError(f"DualPipe needs an even p and an even m >= 2p micro-batches (half of them each way); got p={p}, m={m}")
    half = m // 2
    groups: list[tuple[Job, Job]] = []
    ranks = []
    for r in range(p):
        mine, other = (r, 0), (2 * p - 1 - r, half)  # (stage, first micro-batch) of each copy on rank r
        a, b = (mine, other) if r < p // 2 else (other, mine)
        ranks.append(_eight_steps(p // 2, min(r, p - 1 - r), half, r in (p // 2 - 1, p // 2), (a[0], b[0]), (a[1], b[1]), groups))
    params: dict[str, object] = {CHAINS_PARAM: ((0, p, 0, half), (p, 2 * p, half, m))}
    if overlap:
        params[OVERLAP_PARAM] = tuple(groups)
    return _finish("DualPipe", m, v_placement(p), ranks, optimizer, **params)
