"""Interleaved schedules: ``v`` chunks per rank in loop placement (rank ``s`` holds stages
``s, s+p, ..., s+(v-1)p``).

- ``Interleaved1F1B`` (:func:`interleaved_1f1b`): PyTorch's ``ScheduleInterleaved1F1B``
  (Narayanan et al., SC'21, arXiv:2104.04473, §2.2.2), with Megatron-LM's
  ``microbatch_group_size_per_vp_stage``;
- ``LoopedBFS`` (:func:`looped_bfs`): PyTorch's ``ScheduleLoopedBFS`` (Lamy-Poirier,
  arXiv:2211.05953);
- :func:`_rank_ops_1f1b` and :func:`_interleaved_rounds`: one rank's job order of PyTorch's
  interleaved 1F1B / zero-bubble family and its micro-batches per round, which the
  zero-bubble builders share.

The builders register on import (:mod:`harness.schedule.builders` imports this module) and
stay importable from :mod:`harness.schedule.builders`.
"""

from __future__ import annotations

from typing import Any

from harness.errors import ConfigError
from harness.schedule.builders import _CODE_B, _CODE_F, _CODE_I, _CODE_W, _finish, _from_parts
from harness.schedule.model import Job, JobKind, Schedule, loop_placement
from harness.schedule.registry import _check_sizes, register

__all__ = ["interleaved_1f1b", "looped_bfs", "megatron_chunk_table", "valid_group_sizes"]


def _interleaved_rounds(name: str, p: int, m: int) -> int:
    """Micro-batches per round of PyTorch's interleaved schedules.

    PyTorch (``ScheduleInterleaved1F1B.__init__``) uses ``r = max(1, m // p)``
    rounds of ``m // r`` micro-batches and needs ``m % r == 0``; Megatron-LM's
    original interleaved schedule needs ``m % p == 0``, a special case.

    Raises:
        ConfigError: ``m`` is not a multiple of the number of rounds.
    """
    rounds = max(1, m // p)
    if m % rounds:
        ok = sorted((k for k in range(max(1, m - 2 * p), m + 2 * p) if k % max(1, k // p) == 0), key=lambda k: (abs(k - m), k))
        ok = sorted(ok[:8])
        raise ConfigError(
            f"{name} needs the number of micro-batches m to be a multiple of its number of rounds "
            f"max(1, m // p) = {rounds} (PyTorch ScheduleInterleaved1F1B); got p={p}, m={m}. "
            f"Nearby valid m: {', '.join(map(str, ok[:8]))}"
        )
    return m // rounds



def _rank_ops_1f1b(
    rank: int,
    p: int,
    v: int,
    m: int,
    per_round: int,
    warmup: int,
    zero_bubble: bool,
    deferred_w: int = 0,
    chunk_table: Any = None,
) -> tuple[Any, Any, Any]:
    """One rank's jobs of PyTorch's interleaved 1F1B / zero-bubble family, as
    numpy int64 arrays of their stage, kind code (index in ``tuple(JobKind)``)
    and micro-batch.

    A port of ``_get_1f1b_rank_ops`` (torch/distributed/pipelining/schedules.py)
    without the idle padding (slots do not take time here): ``warmup`` forwards,
    then pairs of one forward and one backward, then the remaining backwards.
    Forwards go through the rank's chunks in blocks of ``per_round`` micro-batches
    in ascending chunk order, backwards in descending chunk order. With
    ``zero_bubble`` the backward is ``I`` and each ``I`` after the first
    ``deferred_w`` steady pairs is followed by the ``W`` of the oldest pending ``I``;
    the remaining ``W`` close the list. Built with numpy: op ``t`` of each kind
    has its stage from ``t // per_round`` and its micro-batch from how many ops
    of that stage came before.

    ``chunk_table`` (shape ``(v m,)``), where given, is the chunk of forward op ``t``
    instead of ``(t // per_round) % v``, and backward op ``t`` takes chunk
    ``v - 1 - chunk_table[t]``: Megatron-LM's schedule table (:func:`megatron_chunk_table`).
    """
    import numpy as np

    total = v * m
    fwd_bwd = total - warmup
    ops = np.arange(total)
    f_chunk = (ops // per_round) % v if chunk_table is None else np.asarray(chunk_table, np.int64)
    b_chunk = v - 1 - f_chunk  # backward op t is op warmup + t

    def counted(chunk: Any) -> Any:  # per op, earlier ops of its chunk
        mb = np.empty(total, np.int64)
        for c in range(v):
            sel = chunk == c
            mb[sel] = np.arange(int(sel.sum()))
        return mb

    f_mb, b_mb = counted(f_chunk), counted(b_chunk)
    # Backward step t (t < fwd_bwd: steady, after F op warmup + t) emits
    # [F] B [W of backward t - deferred_w]; the rest of the W close the list.
    has_w = (ops >= deferred_w) if zero_bubble else np.zeros(total, bool)
    per_step = 1 + (ops < fwd_bwd) + has_w
    step_at = warmup + np.concatenate(([0], np.cumsum(per_step)[:-1]))
    length = 2 * total + (total if zero_bubble else 0)
    stage = np.empty(length, np.int64)
    kind = np.empty(length, np.int64)
    mb = np.empty(length, np.int64)
    f_at = np.concatenate((ops[:warmup], step_at[:fwd_bwd]))
    b_at = step_at + (ops < fwd_bwd)
    stage[f_at], kind[f_at], mb[f_at] = f_chunk * p + rank, _CODE_F, f_mb
    stage[b_at], kind[b_at], mb[b_at] = b_chunk * p + rank, (_CODE_I if zero_bubble else _CODE_B), b_mb
    if zero_bubble:
        steps_w = np.flatnonzero(has_w)
        w_at = np.concatenate((b_at[steps_w] + 1, np.arange(2 * total + len(steps_w), length)))
        stage[w_at], kind[w_at], mb[w_at] = b_chunk * p + rank, _CODE_W, b_mb
    return stage, kind, mb



def megatron_chunk_table(m: int, v: int, group: int) -> Any:
    """The chunk of each of a rank's ``v m`` forwards, in order, under Megatron-LM's
    ``microbatch_group_size_per_vp_stage`` ``g``: micro-batches in groups of ``g``, each
    group run on chunk 0, then chunk 1, ..., before the next group; the last group takes
    whatever is left (``m % g`` when that is not 0). A port of ``get_schedule_table``
    (NVIDIA/Megatron-LM ``megatron/core/pipeline_parallel/schedules.py``), keeping its chunk
    column; the micro-batch column is each chunk's count so far. Returns an int64 array of
    shape ``(v m,)``; e.g. ``m=5, v=2, g=3`` gives ``0 0 0 1 1 1 0 0 1 1``.
    """
    import numpy as np

    out = []
    for lo in range(0, m, group):
        size = m - lo if lo + group >= m else group
        out.append(np.repeat(np.arange(v, dtype=np.int64), size))
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def valid_group_sizes(p: int, m: int) -> list[int]:
    """The ``microbatch_group_size_per_vp_stage`` values Megatron-LM accepts for ``p`` ranks and
    ``m`` micro-batches: ``p <= g <= m``, and ``m % g`` is 0 or at least ``p`` (a last group of
    fewer than ``p`` micro-batches leaves the pipeline waiting on its own dependencies; Megatron's
    ``forward_backward_pipelining_with_interleaving`` raises on both). Below ``p`` the warm-up of
    ``(v-1) g + 2(p-1-s)`` forwards is too short for the first backward to come back: the schedule
    deadlocks (p=4, v=2, m=8, g=2: 97 of 128 jobs can never run)."""
    return [g for g in range(p, m + 1) if m % g == 0 or m % g >= p]


@register(
    "Interleaved1F1B",
    "interleaved",
    "VPP",
    "interleaved-1F1B",
    summary="v chunks per rank in loop placement, depth-first 1F1B (Narayanan et al., SC'21, §2.2.2; PyTorch ScheduleInterleaved1F1B)",
    takes_chunks=True,
)
def interleaved_1f1b(
    num_ranks: int, num_microbatches: int, chunks: int = 2, optimizer: bool = False, microbatch_group_size_per_vp_stage: int | None = None
) -> Schedule:
    """Interleaved 1F1B with ``v = chunks`` stages per rank (loop placement).

    Port of PyTorch's ``ScheduleInterleaved1F1B._calculate_single_rank_operations``:
    rank ``s`` runs ``min(v*m, (v-1)*R + 2(p-1-s))`` warm-up forwards, where
    ``R = m // max(1, m // p)`` micro-batches form a round (``R = p`` when
    ``p | m``, Megatron-LM's ``(v-1)p + 2(p-s-1)`` warm-up), then 1F1B over the
    chunks, forwards in ascending and backwards in descending chunk order.

    Constraint: ``m`` must be a multiple of ``max(1, m // p)`` (PyTorch's relaxed
    form of Megatron-LM's ``m % p == 0``). With ``p | m`` and uniform stages the
    bubble over ideal time is ``(p-1)/(v m)`` (arXiv:2104.04473 §2.2.2).

    ``microbatch_group_size_per_vp_stage`` (Megatron-LM's knob, ``g``): the
    micro-batches a rank runs on one chunk before moving to the next, instead of
    PyTorch's ``R``; the warm-up is then ``(v-1) g + 2(p-1-s)`` (Megatron-LM
    ``megatron/core/pipeline_parallel/schedules.py``,
    ``forward_backward_pipelining_with_interleaving`` and ``get_schedule_table``),
    and the chunks follow Megatron's schedule table (:func:`megatron_chunk_table`:
    a last group of ``m % g`` when ``g`` does not divide ``m``). Megatron's rule
    holds: ``p <= g <= m`` and ``m % g`` is 0 or at least ``p``
    (:func:`valid_group_sizes`); other values are refused, as Megatron refuses
    them (below ``p`` the schedule would deadlock). Megatron's default is ``p``,
    which is ``R`` when ``p | m``.

    ``v = 1`` is refused: the formula then gives a warm-up of ``2(p-1-s)``
    forwards, not 1F1B's ``p-s``, so the name would silently stand for a
    deeper (more memory, same bubble) schedule than ``1F1B``.

    Raises:
        ConfigError: the constraint on ``m`` does not hold, ``v = 1`` (use ``1F1B``), or
            ``microbatch_group_size_per_vp_stage`` breaks Megatron's rule (names the option,
            the rule and the valid values).
    """
    _check_sizes(num_ranks, num_microbatches, chunks)
    p, m, v = num_ranks, num_microbatches, chunks
    if v == 1:
        raise ConfigError(
            f"Interleaved1F1B needs v >= 2 chunks per rank; with v=1 its warm-up would be 2(p-1-s) forwards "
            f"(rank 0 of p={p}: {min(m, 2 * (p - 1))}), a deeper schedule than 1F1B's p-s ({min(m, p)}): "
            "use schedule '1F1B' for one chunk per rank"
        )
    group = microbatch_group_size_per_vp_stage
    table = None
    if group is None:
        per_round = _interleaved_rounds("Interleaved1F1B", p, m)
    else:
        valid = valid_group_sizes(p, m)
        if isinstance(group, bool) or not isinstance(group, int) or group not in valid:
            shown = ", ".join(map(str, valid)) if valid else f"none: m={m} is below p={p}"
            raise ConfigError(
                f"Interleaved1F1B: microbatch_group_size_per_vp_stage={group!r} breaks Megatron-LM's rule for p={p}, m={m}: "
                f"p <= g <= m, and m % g is 0 or at least p (a smaller group, or a last group of fewer than p "
                f"micro-batches, leaves the pipeline waiting: below p it deadlocks); valid values: {shown}"
            )
        per_round = group
        table = megatron_chunk_table(m, v, group)
    parts = [
        _rank_ops_1f1b(s, p, v, m, per_round, min(v * m, (v - 1) * per_round + 2 * (p - 1 - s)), zero_bubble=False,
                       chunk_table=table)
        for s in range(p)
    ]
    # Stages chunk * p + s on rank s: on their ranks by construction.
    params: dict[str, object] = {"v": v} if group is None else {"v": v, "microbatch_group_size_per_vp_stage": group}
    return _from_parts("Interleaved1F1B", m, loop_placement(p, v), parts, optimizer, params)



@register(
    "LoopedBFS",
    "BFS",
    "breadth-first",
    summary="v chunks per rank, all micro-batches of a chunk before the next (Lamy-Poirier, arXiv:2211.05953; PyTorch ScheduleLoopedBFS)",
    takes_chunks=True,
)
def looped_bfs(num_ranks: int, num_microbatches: int, chunks: int = 2, optimizer: bool = False) -> Schedule:
    """Looped BFS: each rank runs all ``m`` forwards of chunk 0, then of chunk 1, ...,
    then the backwards of its chunks in reverse order, micro-batches in reverse.

    Port of PyTorch's ``ScheduleLoopedBFS._calculate_single_rank_operations``
    (without its idle padding). Peak in-flight micro-batches: ``v m`` stage-activations.
    """
    _check_sizes(num_ranks, num_microbatches, chunks)
    p, m, v = num_ranks, num_microbatches, chunks
    ranks: list[list[Job | None]] = []
    for s in range(p):
        stages = range(s, p * v, p)
        jobs: list[Job | None] = [Job(k, JobKind.F, i) for k in stages for i in range(m)]
        jobs.extend(Job(k, JobKind.B, i) for k in reversed(stages) for i in reversed(range(m)))
        ranks.append(jobs)
    return _finish("LoopedBFS", m, loop_placement(p, v), ranks, optimizer, v=v)
