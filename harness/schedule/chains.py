"""Pipeline chains: which stages a micro-batch passes through.

A schedule has one chain by default: every micro-batch runs stages ``0..S-1`` in
order, ``F`` of stage ``k`` consuming the output of stage ``k-1`` and the backward of
stage ``k`` the gradient of stage ``k+1``. DeepSeek's bidirectional DualPipe
(deepseek-ai/DualPipe ``dualpipe.py``; DeepSeek-V3 technical report,
arXiv:2412.19437 §3.2.1) runs two: half the micro-batches enter at rank 0 and
run one copy of the model, the other half enter at the last rank and run a second
copy the other way. The harness writes them as two chains over its ``2p`` stages
(V placement, rank ``r`` holding stages ``r`` and ``2p-1-r``):

* stages ``0..p-1``, micro-batches ``0..m/2-1`` (model stage ``k`` on rank ``k``);
* stages ``p..2p-1``, micro-batches ``m/2..m-1`` (model stage ``k`` as stage ``p+k``, on
  rank ``p-1-k``).

A schedule carries its chains in ``schedule.params["chains"]`` as a tuple of
``(first_stage, end_stage, first_microbatch, end_microbatch)`` (half-open ranges
that partition the stages and the micro-batches, in order); :func:`with_chains`
sets them. Every rule that reads "the previous/next stage" reads it within the
stage's chain (:func:`links`): a chain's first stage has no input, its last stage
computes the loss, and a stage runs exactly its chain's micro-batches. Micro-batch
ids stay global (one id per micro-batch in records and traces).

A PyTorch CSV has no place for chains; :func:`chains_in` infers them from which
micro-batches each stage runs (see there for the rule and what it refuses).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise
from typing import Any

from harness.errors import ScheduleError
from harness.schedule.model import Job, JobKind, Schedule

__all__ = ["CHAINS_PARAM", "chains_in", "chains_of", "links", "stage_microbatches", "with_chains"]

#: The key of a schedule's ``params`` that holds its chains.
CHAINS_PARAM = "chains"


def chains_of(schedule: Schedule) -> tuple[tuple[int, int, int, int], ...]:
    """The schedule's chains ``(first_stage, end_stage, first_mb, end_mb)`` (half-open); one chain
    over every stage and micro-batch when it names none."""
    given: Any = schedule.params.get(CHAINS_PARAM)
    if not given:
        return ((0, schedule.num_stages, 0, schedule.num_microbatches),)
    return tuple((int(a), int(b), int(c), int(d)) for a, b, c, d in given)


def with_chains(schedule: Schedule, chains: Iterable[tuple[int, int, int, int]]) -> Schedule:
    """``schedule`` with ``chains`` (module doc); one chain over everything drops the parameter.

    Raises:
        ScheduleError: the ranges do not split ``0..S-1`` and ``0..m-1`` into consecutive,
            non-empty ranges, in order.
    """
    kept = tuple(tuple(int(x) for x in c) for c in chains)
    s, m = schedule.num_stages, schedule.num_microbatches
    at_s = at_m = 0
    for c in kept:
        if len(c) != 4 or c[0] != at_s or c[2] != at_m or c[1] <= c[0] or c[3] <= c[2]:
            raise ScheduleError(f"schedule {schedule.name!r}: chains {kept} must split stages 0..{s - 1} and "
                                f"micro-batches 0..{m - 1} into consecutive, non-empty ranges, in order")
        at_s, at_m = c[1], c[3]
    if (at_s, at_m) != (s, m):
        raise ScheduleError(f"schedule {schedule.name!r}: chains {kept} must cover stages 0..{s - 1} and micro-batches 0..{m - 1}")
    params = dict(schedule.params)
    if len(kept) > 1:
        params[CHAINS_PARAM] = kept
    else:
        params.pop(CHAINS_PARAM, None)
    return Schedule(schedule.name, schedule.num_microbatches, schedule.stage_to_rank, schedule.ranks, params)


def links(schedule: Schedule) -> tuple[tuple[bool, ...], tuple[bool, ...]]:
    """Per stage ``k``: whether stage ``k-1`` feeds it (same chain), and whether it feeds stage ``k+1``."""
    has_prev = [True] * schedule.num_stages
    has_next = [True] * schedule.num_stages
    for lo, hi, _, _ in chains_of(schedule):
        has_prev[lo] = False
        has_next[hi - 1] = False
    return tuple(has_prev), tuple(has_next)


def stage_microbatches(schedule: Schedule) -> tuple[range, ...]:
    """Per stage, the micro-batches it runs (its chain's)."""
    out: list[range] = [range(0)] * schedule.num_stages
    for lo, hi, a, b in chains_of(schedule):
        for k in range(lo, hi):
            out[k] = range(a, b)
    return tuple(out)


def chains_in(name: str, n_stages: int, num_microbatches: int,
              rows: Iterable[Iterable[Job | None]]) -> tuple[tuple[int, int, int, int], ...] | None:
    """The chains a job list read from a file implies (a PyTorch CSV has no place for them).

    The rule, from the forwards each stage runs:

    * every stage runs the same micro-batches, or some stages' ranges overlap without being
      equal, or a stage's forwards are not one consecutive range: ``None``, one chain (the
      counts check, :func:`harness.schedule.validate.check_counts`, then names any missing job);
    * else the stages run disjoint ranges of consecutive micro-batches (as DualPipe's two
      directions do): the chains are the runs of consecutive stages with one range, and they
      must cover ``0..m-1`` in stage order.

    Raises:
        ScheduleError: disjoint ranges that do not form chains (a range on stages that are not
            consecutive, ranges not in stage order, or micro-batches no stage runs): the file is
            neither one pipeline nor several in the harness's form; names the file and each
            stage's range.
    """
    lo = [num_microbatches] * n_stages
    hi = [-1] * n_stages
    count = [0] * n_stages
    for row in rows:
        for job in row:
            if job is None or job.kind is not JobKind.F or job.microbatch is None or not 0 <= job.stage < n_stages:
                continue
            k, mb = job.stage, job.microbatch
            lo[k], hi[k], count[k] = min(lo[k], mb), max(hi[k], mb), count[k] + 1
    if any(c == 0 or c != hi[k] - lo[k] + 1 for k, c in enumerate(count)):
        return None  # a stage without forwards, or with gaps: the counts check names them
    ranges = sorted({(lo[k], hi[k] + 1) for k in range(n_stages)})
    if len(ranges) == 1:
        return None
    if any(a[1] > b[0] for a, b in pairwise(ranges)):
        return None  # overlapping ranges: one chain with missing jobs, not several chains
    blocks: list[tuple[int, int, int, int]] = []
    for k in range(n_stages):
        if blocks and (blocks[-1][2], blocks[-1][3]) == (lo[k], hi[k] + 1):
            blocks[-1] = (blocks[-1][0], k + 1, lo[k], hi[k] + 1)
        else:
            blocks.append((k, k + 1, lo[k], hi[k] + 1))
    at = 0
    ok = len(blocks) == len(ranges)
    for _, _, a, b in blocks:
        ok = ok and a == at
        at = b
    if ok and at == num_microbatches:
        return tuple(blocks)
    shown = "; ".join(f"stages {a}..{b - 1}: micro-batches {c}..{d - 1}" if b - a > 1 else f"stage {a}: micro-batches {c}..{d - 1}"
                      for a, b, c, d in blocks[:12])
    raise ScheduleError(
        f"{name}: the stages run disjoint micro-batch ranges ({shown}{'; ...' if len(blocks) > 12 else ''}), which is neither one "
        f"pipeline (every stage runs micro-batches 0..{num_microbatches - 1}) nor several chains as the harness reads them "
        "(runs of consecutive stages, each run with its own consecutive range, the ranges in stage order and covering every "
        "micro-batch, as DualPipe's two directions: stages 0..p-1 micro-batches 0..m/2-1, stages p..2p-1 the rest)"
    )
