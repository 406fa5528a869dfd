"""Why a step is longer than its work: the bubble decomposition, and the bubble's normalizations side by side.

**Decomposition** (mindformers' ``toolkit/pipeline_balance``: real = ideal +
imbalance + communication + recomputation, plus the schedule's own bubble).
For a step of ``step_ns`` on ``p`` ranks, with ``work_r`` the compute time of
rank ``r`` without recomputation and ``recompute_r`` its recomputation time:

* ``ideal``: ``sum(work_r) / p``, the step of a perfectly balanced pipeline
  with no bubble, free transfers and no recomputation;
* ``imbalance``: ``work_h - ideal`` on the busiest rank ``h`` (largest
  ``work_r + recompute_r``): what uneven stages add; 0 for uniform stages;
* ``recompute``: ``recompute_h``;
* ``comm``: the analytic step with the case's transfers minus the same
  schedule's step with free transfers (what transfers add to the critical
  path, after what the schedule hides; under ``comm_model="blocking"`` minus the
  step of the schedule without its send/receive jobs, since a rendezvous holds
  both ranks even when the transfer is free); PyTorch's data-parallel jobs
  (``UNSHARD``, ``RESHARD``, ``REDUCE_GRAD``: collectives, not compute) count
  here with the transfers, and never in ``work_r``;
* ``schedule``: the rest, ``step - ideal - imbalance - recompute - comm``:
  the schedule's own bubble (warm-up and cool-down), plus, on a timed backend,
  whatever the run added over the cost model.

The five sum to the step exactly, by construction.

**Normalizations** of the bubble in use (:data:`NORMALIZATIONS`), each saying
whether recomputation counts as work (:data:`RECOMPUTE_IS_WORK`); one function gives
a step's bubble in any of them (:func:`bubble_in`), one converts between them
(:func:`convert_bubble`). For one step of ``step`` ns on ``p`` ranks, ``W`` the
compute streams' busy time summed over ranks (recomputation included, as a timeline
has it), ``R`` the recomputation in it and ``I = p step - W``:

* ``idle_share`` = ``I / (p step)``: recomputation is work (busy time);
* ``over_ideal`` = ``I / W``: recomputation is work;
* ``mindformers`` = ``p step / (W - R) - 1 = (I + R) / (W - R)``: recomputation is
  **bubble**. mindformers' ``real`` bubble divides by ``model_compute_time``, the
  compute without recomputation, and lists recomputation as one of its terms
  (``real = ideal + imba + comm + recompute``, ``recompute = W / (W - R) - 1``;
  ``_statistic_init``/``_statistic_info`` of ``toolkit/pipeline_balance/simulator/
  pp_simulator.py``, mindspore-ai/mindformers at 6be67890, the parent of c5cc799e3).
  Without recomputation it is the same number as ``over_ideal``.

The harness's own figures (``bubble_ratio``, ``bubble_over_ideal`` in results) are
``idle_share`` and ``over_ideal``: recomputation counts as work there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from harness.errors import ConfigError
from harness.schedule.model import Job, JobKind

__all__ = ["NORMALIZATIONS", "RECOMPUTE_IS_WORK", "BubbleDecomposition", "bubble_in", "convert_bubble", "decompose",
           "recompute_by_rank"]

#: The bubble's normalizations, with their sources (module doc: ``I`` idle, ``W`` busy and
#: ``R`` recomputation time summed over ranks, for one step):
NORMALIZATIONS = {
    "idle_share": "idle / total: I / (p x step), recomputation counted as work - the zero-bubble repository's "
                  "bubble rate (sail-sg/zero-bubble-pipeline-parallelism; (p-1)/(m+p-1) for 1F1B)",
    "over_ideal": "(actual - ideal) / ideal with ideal = mean busy time per rank: I / W, recomputation counted as "
                  "work - Victarry/PP-Schedule-Visualization's bubble rate ((p-1)/m for 1F1B)",
    "mindformers": "stages x end / compute - 1 with compute without recomputation: p x step / (W - R) - 1 = "
                   "(I + R) / (W - R), recomputation counted as bubble - mindformers' toolkit/pipeline_balance; "
                   "over_ideal's number when nothing is recomputed",
}

#: Per normalization, whether recomputation counts as work (busy time) or as bubble.
RECOMPUTE_IS_WORK = {"idle_share": True, "over_ideal": True, "mindformers": False}

#: The results' field names, accepted for the normalizations they hold.
_ALIASES = {"bubble_ratio": "idle_share", "bubble_over_ideal": "over_ideal"}


def _normalization(name: str) -> str:
    out = _ALIASES.get(name, name)
    if out not in NORMALIZATIONS:
        raise ConfigError(f"unknown bubble normalization {name!r}; valid: {', '.join(NORMALIZATIONS)} "
                          "(or the results' field names bubble_ratio, bubble_over_ideal)")
    return out


def bubble_in(normalization: str, step_ns: int, busy_ns: list[int], recompute_ns: list[int] | None = None) -> float:
    """The bubble of one step in ``normalization`` (module doc).

    Args:
        normalization: one of :data:`NORMALIZATIONS` (or ``bubble_ratio``, ``bubble_over_ideal``).
        step_ns: the step time (ns).
        busy_ns: per rank, its compute streams' busy time in that step (ns), recomputation included.
        recompute_ns: per rank, the recomputation in ``busy_ns`` (ns); ``None``: none.

    Raises:
        ConfigError: an unknown normalization, a step of 0 ns or less, no work without
            recomputation, ``recompute_ns`` not one per rank or above a rank's busy time.
    """
    name = _normalization(normalization)
    p, w = len(busy_ns), sum(busy_ns)
    rec = list(recompute_ns) if recompute_ns is not None else [0] * p
    if len(rec) != p:
        raise ConfigError(f"recompute_ns has {len(rec)} value(s), busy_ns {p}: give one per rank")
    bad = next((r for r in range(p) if not 0 <= rec[r] <= busy_ns[r]), None)
    if bad is not None:
        raise ConfigError(f"rank {bad}: recomputation {rec[bad]} ns must be 0 or more and at most its busy time {busy_ns[bad]} ns")
    r = sum(rec)
    if step_ns <= 0 or w - r <= 0:
        raise ConfigError(f"a bubble needs a step and work: step {step_ns} ns, busy {w} ns, recomputation {r} ns")
    idle = p * step_ns - w
    if name == "idle_share":
        return idle / (p * step_ns)
    if name == "over_ideal":
        return idle / w
    return (idle + r) / (w - r)


def convert_bubble(value: float, from_: str, to: str, recompute_share: float = 0.0) -> float:
    """Convert a bubble figure between :data:`NORMALIZATIONS` (exact: ``o = s / (1 - s)``,
    ``s = o / (1 + o)`` for the idle share ``s`` and the over-ideal ``o``, and
    ``mf = (o + rho) / (1 - rho)`` for ``mindformers`` with ``rho = recompute_share``, the
    share ``R / W`` of the busy time that is recomputation: 0, the default, without
    recomputation, where ``mindformers`` is ``over_ideal``'s number).

    ``bubble_ratio`` and ``bubble_over_ideal`` (the results' field names) are
    accepted for ``idle_share`` and ``over_ideal``.

    Raises:
        ConfigError: an unknown normalization, a value that is not a finite
            number, or one outside its range (an idle share in [0, 1), an
            over-ideal figure >= 0, a ``mindformers`` figure >= ``recompute_share``
            / (1 - ``recompute_share``)), or a ``recompute_share`` outside [0, 1).
    """
    import math

    from_, to = _normalization(from_), _normalization(to)
    rho = recompute_share
    if not isinstance(rho, (int, float)) or isinstance(rho, bool) or not 0 <= rho < 1:
        raise ConfigError(f"recompute_share is R / W, the share of busy time that is recomputation, in [0, 1); got {rho!r}")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise ConfigError(f"a bubble figure must be a finite number, got {value!r}")
    share = {"idle_share": value}.get(from_)
    if share is None:
        over = value * (1 - rho) - rho if from_ == "mindformers" else value
        if over < 0 and from_ == "mindformers":
            raise ConfigError(f"a bubble in the mindformers normalization with recompute_share {rho!r} is at least "
                              f"{rho / (1 - rho)!r} (the recomputation alone), got {value!r}")
        if over < 0:
            raise ConfigError(f"a bubble over ideal time is >= 0, got {value!r}")
        share = over / (1 + over)
    elif not 0 <= share < 1:
        raise ConfigError(f"an idle share is in [0, 1), got {value!r}")
    if to == "idle_share":
        return share
    over = share / (1 - share)
    return (over + rho) / (1 - rho) if to == "mindformers" else over


@dataclass(frozen=True)
class BubbleDecomposition:
    """A step split into what it is made of (all ns; see the module docstring).

    Attributes:
        step_ns: the step decomposed (median measured step, or the analytic one).
        ideal_ns, imbalance_ns, recompute_ns, comm_ns, schedule_ns: its parts; they sum to ``step_ns``.
        busiest_rank: the rank the imbalance and recomputation are read on.
        work_ns: per rank, compute time without recomputation.
    """

    step_ns: int
    ideal_ns: float
    imbalance_ns: float
    recompute_ns: int
    comm_ns: int
    schedule_ns: float
    busiest_rank: int
    work_ns: list[int]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _FreeTransfers:
    """``cost`` with every send, receive and data-parallel job lasting 0 ns (for the step with free transfers)."""

    def __init__(self, cost: Any) -> None:
        self._cost = cost

    def duration_ns(self, job: Job, num_stages: int) -> int:
        return 0 if job.kind.is_comm or job.kind.is_data_parallel else int(self._cost.duration_ns(job, num_stages))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cost, name)


def _recompute_per_job(plan: Any, cost: Any) -> Any:
    """Per job of ``plan``, the part of its duration (ns) that recomputes its forward under ``cost``
    (its optional ``recompute_time_ns``; 0 without it), as a numpy int64 array of shape ``(n,)``."""
    import numpy as np

    from harness.schedule.model import KIND_CODE

    cols = plan.arrays
    n_stages = plan.schedule.num_stages
    extra = np.zeros(plan.num_jobs, dtype=np.int64)
    recompute_of = getattr(cost, "recompute_time_ns", None)
    if callable(recompute_of):
        kinds = tuple(JobKind)
        for code in (KIND_CODE[JobKind.B], KIND_CODE[JobKind.I]):
            mine = np.flatnonzero(cols.kind == code)
            if not len(mine):
                continue
            stages, first, inverse = np.unique(cols.stage[mine], return_index=True, return_inverse=True)
            mbs = cols.microbatch[mine[first]].tolist()  # asked once per stage, with its first job
            per_stage = np.array([int(recompute_of(Job(int(k), kinds[code], None if b < 0 else b), n_stages))
                                  for k, b in zip(stages.tolist(), mbs)], dtype=np.int64)
            extra[mine] = per_stage[inverse]
    return extra


def recompute_by_rank(plan: Any, cost: Any) -> list[int]:
    """Per rank, the recomputation time of one step of ``plan`` under ``cost`` (ns): the sum over
    its ``B`` and ``I`` jobs of the cost model's optional ``recompute_time_ns(job, num_stages)``
    (all 0 without it). With the analytic busy time it gives the ``mindformers`` bubble:
    ``bubble_in("mindformers", a.makespan_ns, a.busy_ns, recompute_by_rank(plan, cost))``."""
    import numpy as np

    out = np.zeros(plan.schedule.num_ranks, dtype=np.int64)
    np.add.at(out, plan.arrays.rank, _recompute_per_job(plan, cost))
    return out.tolist()  # type: ignore[no-any-return]


def decompose(step_ns: int, plan: Any, cost: Any, busy_ns: list[int] | None = None,
              makespan_ns: int | None = None) -> BubbleDecomposition:
    """The decomposition of a step of ``step_ns`` of ``plan`` under ``cost``.

    Args:
        step_ns: the step to decompose (ns): the median measured step, or the plan's
            analytic makespan (:func:`harness.plan.timeline.simulate`).
        plan: the validated plan that ran.
        cost: its cost model; its optional method ``recompute_time_ns(job, num_stages)`` gives the part
            of a job's duration (ns) that recomputes its forward, where it models recomputation.
        busy_ns: per rank, the measured compute time of that step (ns), for a timed run:
            the work is then what ran, not what the cost model says (a ``compute``
            workload's GEMMs last what the machine makes of them), with the cost
            model's share of recomputation in it. ``None``: the cost model's durations.
        makespan_ns: ``plan``'s analytic makespan under ``cost``
            (:func:`harness.plan.timeline.simulate`, no ``edge`` delays) where the caller has it
            (a ``sim`` run's step); ``None`` simulates it.
    """
    import numpy as np

    from harness.plan.timeline import durations, simulate
    from harness.schedule.model import KIND_CODE

    p = plan.schedule.num_ranks
    dur = np.asarray(durations(plan, cost), dtype=np.int64)
    cols = plan.arrays
    moving = np.isin(cols.kind, [KIND_CODE[k] for k in JobKind if k.is_comm or k.is_data_parallel])
    compute = ~moving
    extra = _recompute_per_job(plan, cost)
    rank = cols.rank[compute]
    work_a = np.zeros(p, dtype=np.int64)
    np.add.at(work_a, rank, (dur - extra)[compute])
    rec_a = np.zeros(p, dtype=np.int64)
    np.add.at(rec_a, rank, extra[compute])
    work, rec = work_a.tolist(), rec_a.tolist()
    from harness.schedule.groups import groups_of

    if busy_ns is None and groups_of(plan.schedule):
        # Overlapped groups keep a rank busy for the union of their jobs' intervals, not their sum: the
        # work is the analytic timeline's busy time (harness.analysis.busy.busy_union), recomputation as modelled.
        from harness.analysis.busy import busy_union

        tl = simulate(plan, cost)
        at = np.flatnonzero(compute)
        model_busy = busy_union(cols.rank[at], np.asarray(tl.start, dtype=np.int64)[at], np.asarray(tl.end, dtype=np.int64)[at], p)
        for r in range(p):
            work[r] = int(model_busy[r]) - rec[r]
    if busy_ns is not None:
        if len(busy_ns) != p:
            raise ValueError(f"busy_ns has {len(busy_ns)} ranks, the plan {p}")
        for r in range(p):  # what ran, its recomputation in the cost model's proportion
            model = work[r] + rec[r]
            rec[r] = round(rec[r] * busy_ns[r] / model) if model else 0
            work[r] = int(busy_ns[r]) - rec[r]
    ideal = sum(work) / p
    h = max(range(p), key=lambda r: work[r] + rec[r])
    comm = 0
    from harness.schedule.blocking_placement import is_blocking

    blocking = is_blocking(plan.schedule)
    if blocking or (dur[moving] > 0).any():  # transfers that all take 0 ns delay nothing, except a blocking rendezvous
        full = simulate(plan, cost).makespan_ns if makespan_ns is None else makespan_ns
        if blocking:  # a rendezvous holds both ranks even when the transfer is free: compare with no transfers at all
            from harness.plan.build import build_plan
            from harness.schedule.passes import strip_communication

            comm = full - simulate(build_plan(strip_communication(plan.schedule)), _FreeTransfers(cost)).makespan_ns
        else:
            comm = full - simulate(plan, _FreeTransfers(cost)).makespan_ns
    imbalance = work[h] - ideal
    schedule = step_ns - ideal - imbalance - rec[h] - comm
    return BubbleDecomposition(int(step_ns), ideal, imbalance, rec[h], int(comm), schedule, h, work)
