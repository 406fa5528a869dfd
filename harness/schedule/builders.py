"""The plain one-chunk schedules (FThenB, 1F1B, Eager-1F1B) and the helpers every builder shares
to assemble a :class:`~harness.schedule.model.Schedule` from per-rank job lists or arrays.

The registry these builders register in: :mod:`harness.schedule.registry`.
"""

from __future__ import annotations

from typing import Any

from harness.schedule.model import KIND_CODE, Job, JobKind, Schedule, _JobArrays, loop_placement, v_placement  # noqa: F401 - v_placement: importable from here as before
from harness.schedule.registry import _check_sizes, register

__all__ = ["fthenb", "one_f_one_b"]


"""The most jobs a schedule may have, counted as they will exist: :func:`build_schedule`
estimates its compute jobs as ``p * v * m`` times 2, or 3 with a split backward (``v`` of
a V placement is 2), and :func:`~harness.schedule.passes.add_communication` counts the
send/receive jobs it would add (about twice the compute jobs again at p=64) before adding
them. At :data:`BYTES_PER_JOB` that is about 7.2 GB; more is refused with a clear error
rather than a ``MemoryError``."""

"""Memory per job on the analytic path (schedule, plan, simulation), in bytes: 343-352
measured (peak RSS) for interleaved 1F1B cases with send/receive jobs, rounded up."""

def _with_opt(p: int, ranks: list[list[Job | None]], optimizer: bool, stage_to_rank: tuple[int, ...]) -> None:
    if optimizer:
        for stage, rank in enumerate(stage_to_rank):
            ranks[rank].append(Job(stage, JobKind.OPT, None))

@register("FThenB", "GPipe", "fill-drain", summary="all forwards, then all backwards (Huang et al., GPipe, arXiv:1811.06965)")
def fthenb(num_ranks: int, num_microbatches: int, optimizer: bool = False) -> Schedule:
    """FThenB / GPipe: every rank runs all ``m`` forwards, then all ``m`` backwards.

    Backwards run in micro-batch order, as in PyTorch's ``ScheduleGPipe``.
    Peak in-flight micro-batches: ``m`` on every rank.

    Returns:
        A schedule with ``p`` lists of ``2m`` jobs (``+1`` OPT with ``optimizer``).
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    ranks: list[list[Job | None]] = []
    for s in range(p):
        row: list[Job | None] = [Job(s, JobKind.F, i) for i in range(m)]
        ranks.append(row + [Job(s, JobKind.B, i) for i in range(m)])
    return _finish("FThenB", m, loop_placement(p), ranks, optimizer)

@register("1F1B", "PipeDream-Flush", "OneFOneB", summary="warm-up forwards, then one forward / one backward (Narayanan et al., SC'21, §2.2.1)")
def one_f_one_b(num_ranks: int, num_microbatches: int, optimizer: bool = False) -> Schedule:
    """1F1B (PipeDream-Flush): a warm-up of ``min(m, p-s-1)`` forwards on rank ``s``,
    a steady phase alternating one forward and one backward, and a cool-down of
    the remaining backwards.

    This is Megatron-LM's order (``p-s-1`` warm-up forwards, the steady phase
    starting with a forward); PyTorch's ``Schedule1F1B`` produces the same job
    order per rank. Peak in-flight micro-batches on rank ``s``: ``min(m, p-s)``
    (Narayanan et al., SC'21, arXiv:2104.04473, §2.2.1).

    Returns:
        A schedule with ``p`` lists of ``2m`` jobs (``+1`` OPT with ``optimizer``).
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    ranks: list[list[Job | None]] = []
    for s in range(p):
        warmup = min(m, p - s - 1)
        jobs: list[Job | None] = [Job(s, JobKind.F, i) for i in range(warmup)]
        f = warmup
        b = 0
        while f < m:  # steady phase: 1F then 1B
            jobs.append(Job(s, JobKind.F, f))
            f += 1
            jobs.append(Job(s, JobKind.B, b))
            b += 1
        while b < m:  # cool-down
            jobs.append(Job(s, JobKind.B, b))
            b += 1
        ranks.append(jobs)
    return _finish("1F1B", m, loop_placement(p), ranks, optimizer)

# --- helpers shared by the builders below ------------------------------------
def _from_parts(
    name: str, m: int, placement: tuple[int, ...], parts: list[tuple[Any, Any, Any]], optimizer: bool, params: dict[str, object]
) -> Schedule:
    """A schedule from per-rank (stage, kind code, micro-batch) numpy arrays,
    held as arrays (:meth:`Schedule._from_arrays`); with ``optimizer`` each rank
    ends with the ``OPT`` of its stages in stage order, as :func:`_with_opt`."""
    import numpy as np

    if optimizer:
        p = len(parts)
        extra: list[list[int]] = [[] for _ in range(p)]
        for k, rank in enumerate(placement):
            extra[rank].append(k)
        parts = [
            (
                np.concatenate((st, np.array(extra[r], np.int64))),
                np.concatenate((kd, np.full(len(extra[r]), _CODE_OPT, np.int64))),
                np.concatenate((mb, np.full(len(extra[r]), -1, np.int64))),
            )
            for r, (st, kd, mb) in enumerate(parts)
        ]
    stage, kind, mb = (np.concatenate([part[i] for part in parts]) for i in range(3))
    arrays = _JobArrays(stage, kind, mb, [len(part[0]) for part in parts])
    return Schedule._from_arrays(name, m, placement, arrays, params)

def _finish(name: str, m: int, placement: tuple[int, ...], ranks: list[list[Job | None]], optimizer: bool, **params: object) -> Schedule:
    _with_opt(len(ranks), ranks, optimizer, placement)
    # The builders' own jobs (tested, on the ranks that hold their stages): no per-job checks.
    return Schedule._of_checked_jobs(name, m, placement, tuple(tuple(r) for r in ranks), dict(params))

@register(
    "Eager-1F1B",
    "Eager1F1B",
    summary="1F1B with a warm-up of 2(p-s)-1 forwards, backward first in the steady phase (PaddlePaddle pipeline_eager_1f1b.py)",
)
def eager_1f1b(num_ranks: int, num_microbatches: int, optimizer: bool = False) -> Schedule:
    """Eager-1F1B: rank ``s`` runs ``w = min(m, 2(p-s)-1)`` warm-up forwards, then
    ``m - w`` pairs of one backward and one forward, then ``w`` backwards.

    This is PaddlePaddle's ``PipelineEager1F1BPass._create_job_list``
    (``python/paddle/distributed/passes/pipeline_scheduler_pass/pipeline_eager_1f1b.py``),
    which asserts ``2(p-s)-1 <= m``; here the warm-up is capped at ``m`` instead.
    The extra forwards let sends overlap with compute; the cost is memory: peak
    in-flight micro-batches on rank ``s`` is ``min(m, 2(p-s)-1)``.

    Returns:
        A schedule with ``p`` lists of ``2m`` jobs (``+1`` OPT with ``optimizer``).
    """
    _check_sizes(num_ranks, num_microbatches)
    p, m = num_ranks, num_microbatches
    ranks: list[list[Job | None]] = []
    for s in range(p):
        warmup = min(m, 2 * (p - s) - 1)
        jobs: list[Job | None] = [Job(s, JobKind.F, i) for i in range(warmup)]
        for i in range(m - warmup):
            jobs.append(Job(s, JobKind.B, i))
            jobs.append(Job(s, JobKind.F, warmup + i))
        jobs.extend(Job(s, JobKind.B, i) for i in range(m - warmup, m))
        ranks.append(jobs)
    return _finish("Eager-1F1B", m, loop_placement(p), ranks, optimizer)

_CODE_F, _CODE_B, _CODE_I, _CODE_W, _CODE_OPT = (KIND_CODE[k] for k in (JobKind.F, JobKind.B, JobKind.I, JobKind.W, JobKind.OPT))
