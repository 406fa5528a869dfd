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
  path, after what the schedule hides); PyTorch's data-parallel jobs
  (``UNSHARD``, ``RESHARD``, ``REDUCE_GRAD``: collectives, not compute) count
  here with the transfers, and never in ``work_r``;
* ``schedule``: the rest, ``step - ideal - imbalance - recompute - comm``:
  the schedule's own bubble (warm-up and cool-down), plus, on a timed backend,
  whatever the run added over the cost model.

The five sum to the step exactly, by construction.

**Normalizations** of the bubble in use (:data:`NORMALIZATIONS`), one
function to convert (:func:`convert_bubble`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from harness.errors import ConfigError
from harness.schedule.model import Job, JobKind

__all__ = ["NORMALIZATIONS", "BubbleDecomposition", "convert_bubble", "decompose"]

#: The bubble's normalizations, with their sources. For one step, with ``I`` the
#: compute streams' idle time summed over ranks and ``W`` their busy time:
NORMALIZATIONS = {
    "idle_share": "idle / total: I / (p x step) - the zero-bubble repository's bubble rate "
                  "(sail-sg/zero-bubble-pipeline-parallelism; (p-1)/(m+p-1) for 1F1B)",
    "over_ideal": "(actual - ideal) / ideal with ideal = mean busy time per rank: I / W - "
                  "Victarry/PP-Schedule-Visualization's bubble rate ((p-1)/m for 1F1B)",
    "mindformers": "stages x end / compute - 1 = p x step / W - 1 = I / W - mindformers' toolkit/pipeline_balance; "
                   "for one step the same number as over_ideal",
}


def convert_bubble(value: float, from_: str, to: str) -> float:
    """Convert a bubble figure between :data:`NORMALIZATIONS` (exact: ``o = s / (1 - s)``,
    ``s = o / (1 + o)`` for the idle share ``s`` and the over-ideal ``o``).

    ``bubble_ratio`` and ``bubble_over_ideal`` (the results' field names) are
    accepted for ``idle_share`` and ``over_ideal``.

    Raises:
        ConfigError: an unknown normalization, a value that is not a finite
            number, or one outside its range (an idle share in [0, 1), an
            over-ideal figure >= 0).
    """
    import math

    aliases = {"bubble_ratio": "idle_share", "bubble_over_ideal": "over_ideal"}  # the results' field names
    from_, to = aliases.get(from_, from_), aliases.get(to, to)
    for name in (from_, to):
        if name not in NORMALIZATIONS:
            raise ConfigError(f"unknown bubble normalization {name!r}; valid: {', '.join(NORMALIZATIONS)} "
                              "(or the results' field names bubble_ratio, bubble_over_ideal)")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise ConfigError(f"a bubble figure must be a finite number, got {value!r}")
    share = {"idle_share": value}.get(from_)
    if share is None:
        if value < 0:
            raise ConfigError(f"a bubble over ideal time is >= 0, got {value!r}")
        share = value / (1 + value)
    elif not 0 <= share < 1:
        raise ConfigError(f"an idle share is in [0, 1), got {value!r}")
    return share if to == "idle_share" else share / (1 - share)


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


def decompose(step_ns: int, plan: Any, cost: Any, busy_ns: list[int] | None = None,
              makespan_ns: int | None = None) -> BubbleDecomposition:
    """The decomposition of a step of ``step_ns`` of ``plan`` under ``cost``.

    Args:
        step_ns: the step to decompose (ns): the median measured step, or the plan's
            analytic makespan (:func:`harness.plan.timeline.simulate`).
        plan: the validated plan that ran.
        cost: its cost model; ``recompute_ns(job, num_stages)`` where it models recomputation.
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

    n_stages = plan.schedule.num_stages
    p = plan.schedule.num_ranks
    dur = np.asarray(durations(plan, cost), dtype=np.int64)
    cols = plan.arrays
    moving = np.isin(cols.kind, [KIND_CODE[k] for k in JobKind if k.is_comm or k.is_data_parallel])
    compute = ~moving
    extra = np.zeros(plan.num_jobs, dtype=np.int64)
    recompute_of = getattr(cost, "recompute_ns", None)
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
    if (dur[moving] > 0).any():  # transfers that all take 0 ns delay nothing: the step with free transfers is this one
        full = simulate(plan, cost).makespan_ns if makespan_ns is None else makespan_ns
        comm = full - simulate(plan, _FreeTransfers(cost)).makespan_ns
    imbalance = work[h] - ideal
    schedule = step_ns - ideal - imbalance - rec[h] - comm
    return BubbleDecomposition(int(step_ns), ideal, imbalance, rec[h], int(comm), schedule, h, work)
