"""Closed-form figures from the literature, each with its source.

All functions take ``p`` (pipeline ranks), ``m`` (micro-batches per step) and,
where relevant, ``v`` (chunks per rank) and per-job times; they assume uniform
stages and free communication, the setting of the papers. Times are in any
one unit (ns in the harness); ``t_b`` is the backward-for-inputs (``I``),
``t_w`` the backward-for-weights (``W``) and a full backward is ``t_b + t_w``.

Two normalizations of "bubble" are in use; every function says which:

* **idle share of total**: idle time over ``p x makespan``
  (``(p-1)/(m+p-1)`` for 1F1B);
* **bubble over ideal**: idle time over busy time (``(p-1)/m`` for 1F1B).

The zero-bubble paper (arXiv:2401.10241) states bubbles as a *time* per rank;
see :func:`zb_h1_bubble_time`.
"""

from __future__ import annotations

from typing import Any

from harness.analysis import theory
from harness.analysis.memory import has_memory_model
from harness.case import PipelineCase
from harness.errors import ConfigError, HarnessError
from harness.plan.graph import Plan
from harness.schedule.model import KIND_CODE, Job, JobKind, Schedule

__all__ = [
    "bubble_fraction_1f1b",
    "bubble_fraction_fthenb",
    "bubble_fraction_interleaved",
    "bubble_over_ideal_1f1b",
    "bubble_over_ideal_interleaved",
    "dualpipe_bubble_time",
    "makespan_fthenb",
    "makespan_interleaved",
    "makespan_zb_h1",
    "peak_inflight",
    "theoretical_bubble",
    "zb_h1_bubble_time",
    "zb_h2_bubble_time",
    "zb_span_bubble",
]


def _check(p: int, m: int, v: int = 1) -> None:
    if p < 1 or m < 1 or v < 1:
        raise ConfigError(f"p, m and v must be positive, got p={p}, m={m}, v={v}")


def _canonical(schedule: str) -> str | None:
    from harness.schedule.registry import builder_info

    try:
        return builder_info(schedule).name
    except ConfigError:
        return None


def bubble_fraction_fthenb(p: int, m: int) -> float:
    """Idle share of total time for FThenB/GPipe: ``(p-1)/(m+p-1)``.

    Normalization: idle time over ``p x makespan`` ("idle share of total").
    Source: Huang et al., GPipe, arXiv:1811.06965, §2.3 (bubble
    ``O((K-1)/(M+K-1))``); Narayanan et al., SC'21, arXiv:2104.04473, §2.2.1.
    """
    _check(p, m)
    return (p - 1) / (m + p - 1)


def bubble_fraction_1f1b(p: int, m: int) -> float:
    """Idle share of total time for 1F1B: ``(p-1)/(m+p-1)``, the same as GPipe.

    Source: Narayanan et al., SC'21, arXiv:2104.04473, §2.2.1 ("the bubble is
    the same as GPipe's; 1F1B only lowers the activations held").
    """
    return bubble_fraction_fthenb(p, m)


def bubble_over_ideal_1f1b(p: int, m: int) -> float:
    """Bubble over ideal time for FThenB/1F1B: ``(p-1)/m``.

    Normalization: idle time over busy time. Source: arXiv:2104.04473, §2.2.1
    (``t_pb / t_id = (p-1)/m``).
    """
    _check(p, m)
    return (p - 1) / m


def makespan_fthenb(p: int, m: int, t_f: float, t_b: float) -> float:
    """Step time of FThenB and 1F1B with uniform stages: ``(m+p-1)(t_f+t_b)``.

    ``t_b`` here is the full backward. Source: arXiv:2104.04473, §2.2.1 (bubble
    ``(p-1)(t_f+t_b)`` plus ideal ``m(t_f+t_b)``).
    """
    _check(p, m)
    return (m + p - 1) * (t_f + t_b)


def bubble_over_ideal_interleaved(p: int, m: int, v: int) -> float:
    """Bubble over ideal time of interleaved 1F1B with ``v`` chunks per rank: ``(p-1)/(v m)``.

    Normalization: idle time over busy time. Source: Narayanan et al., SC'21,
    arXiv:2104.04473, §2.2.2 (``t_pb^int / t_id = (1/v)(p-1)/m``). Holds for the
    Megatron-LM/PyTorch schedule when ``p`` divides ``m``.
    """
    _check(p, m, v)
    return (p - 1) / (v * m)


def bubble_fraction_interleaved(p: int, m: int, v: int) -> float:
    """Idle share of total time of interleaved 1F1B: ``(p-1)/(v m + p - 1)``.

    Derived from :func:`bubble_over_ideal_interleaved` (``b/(1+b)``); same source.
    """
    _check(p, m, v)
    return (p - 1) / (v * m + p - 1)


def makespan_interleaved(p: int, m: int, v: int, t_f: float, t_b: float) -> float:
    """Step time of interleaved 1F1B: ``(v m + p - 1)(t_f + t_b)``, with ``t_f``, ``t_b``
    the times of one *chunk* (a full backward for ``t_b``).

    Source: arXiv:2104.04473, §2.2.2: ideal ``m(T_F+T_B)`` for whole-rank times
    ``T = v t`` plus bubble ``(p-1)(T_F+T_B)/v``.
    """
    _check(p, m, v)
    return (v * m + p - 1) * (t_f + t_b)


def zb_h1_bubble_time(p: int, t_f: float, t_b: float, t_w: float) -> float:
    """Bubble time per rank of ZB-H1: ``(p-1)(t_f + t_b - t_w)``.

    Source: Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024,
    arXiv:2401.10241, Table 2 (1F1B: ``(p-1)(T_F+T_B+T_W)``). The derivation
    assumes ``t_w <= min(t_f, t_b)`` (the paper's setting, ``T_F ~ T_B ~ T_W``;
    see :func:`zb_span_bubble`).
    """
    _check(p, 1)
    return (p - 1) * (t_f + t_b - t_w)


def makespan_zb_h1(p: int, m: int, t_f: float, t_b: float, t_w: float) -> float:
    """Step time of ZB-H1: ``m(t_f+t_b+t_w) + (p-1)(t_f+t_b-t_w)`` (ideal plus
    :func:`zb_h1_bubble_time`; rank 0 spans the whole step). Source: arXiv:2401.10241, Table 2."""
    _check(p, m)
    return m * (t_f + t_b + t_w) + zb_h1_bubble_time(p, t_f, t_b, t_w)


def zb_span_bubble(schedule: str, p: int, m: int, t_f: float, t_b: float, t_w: float) -> float | None:
    """The zero-bubble paper's bubble time of the worst (first) rank's span for ZB-H1
    (:func:`zb_h1_bubble_time`) or ZB-H2 (:func:`zb_h2_bubble_time`), where it holds,
    else ``None``.

    The paper takes ``T_F ~ T_B ~ T_W`` (arXiv:2401.10241 §2); the forms hold for
    ``t_w <= t_f`` (and, for ZB-H1, ``t_w <= t_b``) with ``m >= p`` (ZB-H1) or
    ``m >= 2p-1`` (ZB-H2): a longer W stretches the builders' cool-down. Checked
    over every F, I, W of 1-4 in tests/test_theory.py.
    """
    key = _canonical(schedule)
    if key == "ZB-H1" and _zb_h1_holds(p, m, t_f, t_b, t_w):
        return zb_h1_bubble_time(p, t_f, t_b, t_w)
    if key == "ZB-H2" and m >= 2 * p - 1 and t_w <= t_f:
        return zb_h2_bubble_time(p, t_f, t_b, t_w)
    return None


def _zb_h1_holds(p: int, m: int, t_f: float, t_b: float, t_w: float) -> bool:
    """ZB-H1's closed forms need a full steady phase and a W no longer than F or B (input part)."""
    return m >= p and t_w <= min(t_f, t_b)


def zb_h2_bubble_time(p: int, t_f: float, t_b: float, t_w: float) -> float:
    """Bubble time per rank of ZB-H2: ``max(0, (p-1)(t_f + t_b - 2 t_w))``.

    Measured inside each rank's own span (first job start to last job end): the
    paper removes the optimizer synchronization (§4) so the parallelogram's
    skew of ``(p-1) t_f`` is not idle time. Source: arXiv:2401.10241, Table 2.
    """
    _check(p, 1)
    return max(0.0, (p - 1) * (t_f + t_b - 2 * t_w))


def peak_inflight(schedule: str, p: int, m: int, rank: int, v: int | None = None) -> int | None:
    """Published peak in-flight activations on ``rank``, or ``None`` when not known.

    Counted in *stage activations*: one micro-batch's activation of one stage
    (a chunk, for ``v > 1``), held from the forward's start to the end of its
    backward (``B``, or ``W`` when split).

    * FThenB/GPipe: ``m`` (arXiv:1811.06965);
    * 1F1B: ``min(m, p-s)`` (arXiv:2104.04473 §2.2.1; PyTorch ``Schedule1F1B`` warm-up);
    * ZB-H1: ``min(m, p)`` on every rank (arXiv:2401.10241 Table 2 gives the
      peak ``p M_B``, 1F1B's rank-0 peak; rank ``s`` defers ``s`` ``W`` passes,
      which keeps its ``p-s`` in-flight activations ``s`` longer);
    * Eager-1F1B: ``min(m, 2(p-s)-1)`` (PaddlePaddle ``pipeline_eager_1f1b.py`` warm-up);
    * interleaved 1F1B with ``p | m``: ``min(v m, (v-1)p + 2(p-s) - 1)`` chunk
      activations, i.e. ``p(1 + (p-1)/(p v))`` whole-stage equivalents on rank 0
      (arXiv:2104.04473 §2.2.2; Korthikanti et al., arXiv:2205.05198 §4.2.3);
      ``v`` must be given explicitly (``None`` otherwise, so callers that do
      not pass chunks never get a one-chunk figure for a two-chunk run);
    * ZB-H2: ``min(m, 2p-1)`` (arXiv:2401.10241 Table 2, ``(2p-1) M_B``);
    * ZB-V with ``m >= 2p-1``: ``2p`` chunk activations, ``p`` whole-stage
      equivalents, as 1F1B (arXiv:2401.10241 §6);
    * DualPipe with ``m >= 2p`` (``p``, ``m`` even): ``p + 1`` stage activations on every rank, the
      README's ``PP+1`` with ``PP = p`` (deepseek-ai/DualPipe README, as below);
    * DualPipeV with ``m >= 2p``: ``2p + 1`` chunk activations on every rank:
      the DualPipe README's "activation per device ``PP+1``" with ``PP = 2p``
      stages on ``PP/2`` devices (deepseek-ai/DualPipe README, "Pipeline Bubbles
      and Memory Usage Comparison").
    """
    _check(p, m, v or 1)
    key = _canonical(schedule)
    s = rank
    if key == "FThenB":
        return m
    if key == "1F1B":
        return min(m, p - s)
    if key == "ZB-H1":
        return min(m, p)
    if key == "Eager-1F1B":
        return min(m, 2 * (p - s) - 1)
    if key == "Interleaved1F1B" and v is not None and m % p == 0:
        return min(v * m, (v - 1) * p + 2 * (p - s) - 1)
    if key == "ZB-H2":
        return min(m, 2 * p - 1)
    if key == "ZB-V" and m >= 2 * p - 1:
        return 2 * p
    if key == "DualPipeV" and m >= 2 * p:
        return 2 * p + 1
    if key == "DualPipe" and p % 2 == 0 and m % 2 == 0 and m >= 2 * p:
        return p + 1
    return None


def dualpipe_bubble_time(schedule: str, p: int, m: int, t_f: float, t_b: float, t_w: float, t_fb: float) -> float | None:
    """The DualPipe README's bubble ``(PP/2-1)(F&B + B - 3W)`` for DualPipe (``PP = p``) and DualPipeV
    (``PP = 2p`` stages on ``p`` devices), where the builders' schedules meet it, else ``None``.

    What it measures: the worst rank's idle time in a step (step time minus the rank's busy time,
    an overlapped group counted once), transfers free. ``t_b`` is the backward for inputs (``I``) and
    ``t_w`` for weights, so the README's full backward ``B`` is ``t_b + t_w``; ``t_fb`` is an
    overlapped pair's time (the README's ``F&B``, the group time of :mod:`harness.model.overlap`).
    Times in any one unit (ns in the harness).

    Source: deepseek-ai/DualPipe README, "Pipeline Bubbles and Memory Usage Comparison" (commit
    3da1bbea), which states no regime. The schedules of its ``dualpipe.py`` and ``dualpipev.py``
    (which the builders list job for job) meet it exactly when ``t_f == t_b`` and ``t_w <= t_f``,
    with ``max(t_f, t_b + t_w) <= t_fb <= t_f + t_b + t_w`` and ``m >= 2p`` (checked against a
    transcription of the code for p = 2..8, m = 2p..3p, tests/test_dualpipe.py); outside that regime
    the worst rank's idle is another figure (p = 4, m = 8, F = 100, I = 150, W = 50, F&B = 250 ns:
    800 ns, the formula 900), so ``None`` there.
    """
    _check(p, m)
    key = _canonical(schedule)
    full = t_b + t_w
    if key not in ("DualPipe", "DualPipeV") or m < 2 * p or t_f != t_b or t_w > t_f or not max(t_f, full) <= t_fb <= t_f + full:
        return None
    if key == "DualPipe" and (p % 2 or m % 2):
        return None
    pp = p if key == "DualPipe" else 2 * p
    return (pp / 2 - 1) * (t_fb + full - 3 * t_w)


def theoretical_bubble(
    schedule: str,
    p: int,
    m: int,
    v: int = 1,
    t_f: float | None = None,
    t_b: float | None = None,
    t_w: float | None = None,
) -> float | None:
    """Idle share of total time (idle over ``p x makespan``) predicted for ``schedule``,
    or ``None`` when no closed form holds.

    * FThenB, 1F1B, Eager-1F1B: ``(p-1)/(m+p-1)`` (arXiv:2104.04473 §2.2.1;
      Eager-1F1B only moves forwards earlier, the critical path is 1F1B's);
    * interleaved 1F1B with ``p | m``: ``(p-1)/(v m + p - 1)`` (§2.2.2);
    * ZB-H1, given ``t_f``, ``t_b`` (input part) and ``t_w`` with ``t_w <= min(t_f, t_b)``, and ``m >= p``:
      ``(p-1)(t_f+t_b-t_w) / makespan`` (arXiv:2401.10241 Table 2; rank 0 is busy
      all but the bubble, the others as well);
    * ZB-H2, ZB-V, looped BFS, DualPipe, DualPipeV: ``None`` - their published bubbles
      are per-rank times (see :func:`zb_h2_bubble_time`, :func:`dualpipe_bubble_time`),
      not shares of a step with a barrier.
    """
    _check(p, m, v)
    key = _canonical(schedule)
    if v == 1 and key in ("FThenB", "1F1B", "Eager-1F1B"):
        return bubble_fraction_fthenb(p, m)
    if key == "Interleaved1F1B" and m % p == 0:
        return bubble_fraction_interleaved(p, m, v)
    # ZB-H1's figure holds where its span form does (see zb_span_bubble).
    if key == "ZB-H1" and t_f is not None and t_b is not None and t_w is not None and _zb_h1_holds(p, m, t_f, t_b, t_w):
        span = makespan_zb_h1(p, m, t_f, t_b, t_w)
        return zb_h1_bubble_time(p, t_f, t_b, t_w) / span if span else None
    return None


def is_builtin_order(schedule: Schedule) -> bool:
    """Whether ``schedule``'s compute jobs are, rank by rank, those of the built-in schedule
    it is named after (send/receive, ``OPT`` and data-parallel jobs and idle slots aside), with its
    placement: only then do that schedule's closed forms apply. ``False`` for other
    names, for a pass's output (``split_backward`` keeps the name) and for a user's
    schedule that borrows a built-in's name."""
    from harness.schedule.registry import build_schedule, builder_info, built_as

    try:
        info = builder_info(schedule.name)
        if built_as(schedule) == (info.name, schedule.num_ranks, schedule.num_microbatches,
                                  schedule.chunks_per_rank if info.takes_chunks else 1, False):
            return True  # this very object is what the builder returned for these sizes
        built = build_schedule(info.name, schedule.num_ranks, schedule.num_microbatches, schedule.chunks_per_rank if info.takes_chunks else 1)
    except HarnessError:
        return False
    if built.stage_to_rank != schedule.stage_to_rank:
        return False

    def compute(rows: tuple[tuple[Job | None, ...], ...]) -> list[list[Job]]:
        return [[j for j in row if j is not None and j.kind.takes_microbatch and not j.kind.is_comm] for row in rows]

    return compute(built.ranks) == compute(schedule.ranks)

def theory_for(case: PipelineCase, plan: Plan, workload: str | None = None, comm_model: str = "stream",
               source: Schedule | None = None) -> dict[str, Any]:
    """Closed-form figures for what ran, where the papers' setting holds.

    The setting: every stage has the same F/B/I/W durations, transfers take no
    time (no send/receive jobs, or only free ones; under ``comm_model="edge"``, a
    zero transfer time; under ``"blocking"``, no send/receive jobs, since a rendezvous
    synchronizes the ranks even when it is free), no optimizer jobs, and jobs
    last their cost-model durations (not a ``compute`` workload, whose GEMMs
    contend for shared cores). Returns ``bubble_ratio`` (idle share of total)
    and ``peak_inflight`` (per rank) where :mod:`harness.analysis.theory` knows a closed
    form, for a schedule whose jobs are the named built-in's
    (:func:`is_builtin_order`; of ``source``, the schedule before the communication model
    added its jobs, where given: the lowering keeps every rank's compute order); empty otherwise.
    """
    s = plan.schedule
    n = s.num_stages
    cost = case.cost
    if workload in ("matmul", "gemm"):
        return {}
    kinds = (JobKind.F, JobKind.B, JobKind.I, JobKind.W)
    per_stage = {tuple(cost.duration_ns(Job(k, kind, 0), n) for kind in kinds) for k in range(n)}
    if len(per_stage) != 1:
        return {}
    import numpy as np

    cols = plan.arrays
    if (cols.kind == KIND_CODE[JobKind.OPT]).any():
        return {}
    # a transfer's cost depends on its stage and kind, not its micro-batch (checked by durations()): ask once each
    moving_codes = [KIND_CODE[k] for k in JobKind if k.is_comm or k.is_data_parallel]
    moving = np.flatnonzero(np.isin(cols.kind, moving_codes))
    _, first = np.unique(cols.stage[moving] * len(KIND_CODE) + cols.kind[moving], return_index=True)
    all_kinds = tuple(JobKind)
    for j in moving[first].tolist():
        mb = int(cols.microbatch[j])
        if cost.duration_ns(Job(int(cols.stage[j]), all_kinds[int(cols.kind[j])], None if mb < 0 else mb), n) > 0:
            return {}
    if comm_model == "edge" and n > 1 and cost.duration_ns(Job(0, JobKind.SEND_F, 0), n) > 0:
        return {}
    from harness.schedule.blocking_placement import is_blocking

    if len(moving) and is_blocking(s):  # a rendezvous holds both ranks even when its transfer is free
        return {}
    if not is_builtin_order(source if source is not None else s):  # a pass (split_backward) or a user's schedule under a built-in's name
        return {}
    t_f, _t_full, t_b, t_w = next(iter(per_stage))
    v = s.chunks_per_rank
    out: dict[str, Any] = {}
    bubble = theory.theoretical_bubble(s.name, s.num_ranks, s.num_microbatches, v, t_f=t_f, t_b=t_b, t_w=t_w)
    if bubble is not None:
        out["bubble_ratio"] = bubble
    peaks = [theory.peak_inflight(s.name, s.num_ranks, s.num_microbatches, r, v=v) for r in range(s.num_ranks)]
    if all(x is not None for x in peaks):
        out["peak_inflight"] = peaks
        out.update(_memory_theory(cost, plan, [int(x) for x in peaks if x is not None]))
    return out

def _memory_theory(cost: Any, plan: Plan, peaks: list[int]) -> dict[str, Any]:
    """``peak_memory_bytes`` per rank, ``static + peak in-flight x one stage's activation``, where
    that product is what the rank holds: the cost model models memory, every stage's activation is
    the same, and a split backward frees nothing at ``I`` (else its ``I`` frees part early and the
    product over-counts)."""

    if not has_memory_model(cost):
        return {}
    s = plan.schedule
    n = s.num_stages
    per_stage = {tuple(cost.memory_bytes(Job(k, kind, 0), n) for kind in (JobKind.F, JobKind.I)) for k in range(n)}
    if len(per_stage) != 1:
        return {}
    act, freed_by_i = next(iter(per_stage))
    if freed_by_i and (plan.arrays.kind == KIND_CODE[JobKind.I]).any():
        return {}
    static = [0] * s.num_ranks
    for k, r in enumerate(s.stage_to_rank):
        static[r] += int(cost.static_bytes(k, n))
    return {"peak_memory_bytes": [st + peak * act for st, peak in zip(static, peaks)]}
