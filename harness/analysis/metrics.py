"""Measured figures from run records: step time, busy/idle, bubble, in-flight peak.

Bubble ratio normalization: **idle share of total**, i.e. the compute streams'
idle time summed over ranks divided by ``p x step time``. For FThenB/1F1B with
uniform stages this equals ``(p-1)/(m+p-1)`` (arXiv:2104.04473 §2.2.1). The
other common normalization, bubble over ideal compute time, is
``idle / busy`` and is reported beside it. A third, the **span bubble**,
counts each rank's idle time only between its own first job start and last
job end (summed over ranks, over the summed spans): the zero-bubble paper's
notion (Qi et al., arXiv:2401.10241, §4, with the optimizer synchronization
removed), which tells ZB-H1, ZB-H2 and ZB-V apart where the share of total
does not.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from harness.analysis.busy import busy_union
from harness.records import JobColumns, JobRecord, RunRecords
from harness.stats import SampleStats, summarize

__all__ = ["RunMetrics", "StepMetrics", "compute_metrics", "held_peaks", "metrics_to_dict", "peak_inflight_of", "peak_inflight_of_columns"]

#: Job kinds that do not keep a rank busy: transfers (on their own streams) and PyTorch's
#: data-parallel actions ``UNSHARD``, ``RESHARD``, ``REDUCE_GRAD`` (communication for FSDP/DDP,
#: counted as idle like an exposed transfer; docs/schedules.md, "Data-parallel jobs"). Every other
#: kind is busy time: the harness's F, B, I, W and OPT, and an importer's own kinds (Paddle's ``lr``, ...).
NOT_BUSY = frozenset({"SEND_F", "RECV_F", "SEND_B", "RECV_B", "UNSHARD", "RESHARD", "REDUCE_GRAD"})


@dataclass(frozen=True)
class StepMetrics:
    """Figures of one recorded step (times in ns).

    Attributes:
        step: step index.
        step_time_ns: from the step's reference event to its last job's end.
        busy_ns: per rank, compute-stream busy time.
        idle_ns: per rank, ``step_time_ns - busy_ns``.
        bubble_ratio: ``sum(idle) / (p * step_time)`` - idle share of total.
        bubble_over_ideal: ``sum(idle) / sum(busy)`` - bubble over ideal time.
        span_bubble_ratio: per rank, idle time between its first job start and
            last job end, summed over ranks, over the summed spans.
        peak_inflight: per rank, the most micro-batches whose forward had
            started and whose backward (``B``, or ``W`` when split) had not ended.
    """

    step: int
    step_time_ns: int
    busy_ns: list[int]
    idle_ns: list[int]
    bubble_ratio: float
    bubble_over_ideal: float
    peak_inflight: list[int]
    span_bubble_ratio: float = 0.0


@dataclass(frozen=True)
class RunMetrics:
    """Figures of a run: one :class:`StepMetrics` per recorded step, plus summaries.

    Attributes:
        steps: per recorded step.
        step_time_median_ns, step_time_min_ns, step_time_max_ns: over steps (ns).
        step_time_iqr_ns: inter-quartile range of step times (ns); 0 for fewer
            than two steps.
        bubble_ratio: median over steps of the idle share of total.
        bubble_over_ideal: median over steps of bubble over ideal time.
        span_bubble_ratio: median over steps of the span bubble.
        peak_inflight: per rank, the maximum over steps.
        peak_inflight_per_stage: per stage (chunk), the maximum over steps.
        enqueue_ns_per_job: host enqueue time per job, median over steps (ns).
        step_time_stats: the step times' full summary (ns): mean, stdev, MAD,
            the 95 % CI of the median, outliers (indices into ``steps``), the
            relative standard error of the median (:mod:`harness.stats`).
        bubble_stats: the same for the per-step bubble ratio (a share).
        busy_stats, idle_stats: per rank, the same for its per-step busy and
            idle time (ns).
    """

    steps: list[StepMetrics]
    step_time_median_ns: float
    step_time_min_ns: int
    step_time_max_ns: int
    step_time_iqr_ns: float
    bubble_ratio: float
    bubble_over_ideal: float
    peak_inflight: list[int]
    enqueue_ns_per_job: float
    span_bubble_ratio: float = 0.0
    peak_inflight_per_stage: list[int] = field(default_factory=list)
    normalization: str = field(default="idle share of total: sum of compute-stream idle / (p x step time); "
                                        "recomputation, where the cost model charges it, counts as busy work")
    step_time_stats: SampleStats | None = None
    bubble_stats: SampleStats | None = None
    busy_stats: list[SampleStats] = field(default_factory=list)
    idle_stats: list[SampleStats] = field(default_factory=list)


def peak_inflight_of(jobs: list[JobRecord], num_ranks: int, per: str = "rank") -> list[int]:
    """Peak number of micro-batches held (forward started, backward not finished),
    per rank (``per="rank"``, length ``num_ranks``; chunks of a rank add up) or
    per stage (``per="stage"``, length = highest stage + 1). A backward split into
    ``I`` and ``W`` frees at ``W``'s end. At equal times a release is counted
    before an acquisition. Numpy over the jobs' columns: one sort, ``O(n log n)``
    (:func:`peak_inflight_of_columns`)."""
    return peak_inflight_of_columns(JobColumns.from_jobs(jobs, []), num_ranks, per)


def peak_inflight_of_columns(cols: JobColumns, num_ranks: int, per: str = "rank") -> list[int]:
    """:func:`peak_inflight_of` of jobs given as :class:`~harness.records.JobColumns`."""
    import numpy as np

    by_stage = per == "stage"
    size = (int(cols.stage.max()) + 1 if len(cols) else 0) if by_stage else num_ranks
    lut = np.full(len(cols.kinds), -1, dtype=np.int8)
    for i, token in enumerate(cols.kinds):
        lut[i] = _HOLDS.get(token, -1)
    coded = lut[cols.kind]
    held = coded >= 0
    if not held.any():
        return [0] * size
    kind = coded[held]
    stage = cols.stage[held]
    mb = cols.microbatch[held]
    key = stage if by_stage else cols.rank[held]
    start = cols.start_ns[held]
    end = cols.end_ns[held]
    is_w = kind == 3
    # (stage, micro-batch) pairs whose backward is split: their I releases nothing, their W does
    width = int(mb.max()) + 2
    codes = stage * width + (mb + 1)
    w_codes = np.unique(codes[is_w])
    i_split = np.isin(codes, w_codes)
    acquire = kind == 0
    release = (kind == 1) | is_w | ((kind == 2) & ~i_split)
    return held_peaks(acquire, release, key, start, end, size)


def held_peaks(acquire: Any, release: Any, key: Any, start: Any, end: Any, size: int) -> list[int]:
    """Peak of held activations per ``key`` group (``size`` groups): a job where ``acquire`` takes one
    at its ``start``, a job where ``release`` gives one back at its ``end`` (ns); releases count first at
    equal times. Numpy arrays of one length (per job); one stable sort, ``O(n log n)``. Shared by
    :func:`peak_inflight_of` (run records) and :mod:`harness.analysis.analytic` (a plan's timeline)."""
    import numpy as np

    at = np.flatnonzero(acquire | release)
    if not len(at):
        return [0] * size
    up = acquire[at]
    delta = np.where(up, 1, -1)
    group = key[at]
    order = np.lexsort((delta, np.where(up, start[at], end[at]), group))  # per key by time, releases first
    group = group[order]
    running = np.cumsum(delta[order])  # over all groups; subtract what earlier groups left
    firsts = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
    left = np.concatenate(([0], running[firsts[1:] - 1]))
    running = running - np.repeat(left, np.diff(np.append(firsts, len(running))))
    peaks = [0] * size
    for g, top in zip(group[firsts].tolist(), np.maximum.reduceat(running, firsts).tolist()):
        peaks[g] = max(0, top)
    return peaks


#: The kinds that acquire or release held activations, coded for :func:`peak_inflight_of`.
_HOLDS = {"F": 0, "B": 1, "I": 2, "W": 3}


def _iqr(values: list[int]) -> float:
    if len(values) < 2:
        return 0.0
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[2] - q[0]


def compute_metrics(records: RunRecords) -> RunMetrics:
    """Compute per-step and summary figures from ``records`` (a run's or an import's).

    Busy time is that of every job but transfers (:data:`NOT_BUSY`). Where jobs of one
    rank overlap (overlapped groups, or an import's overlapping jobs, both placed on
    ``rank{r}/overlap`` streams), a rank's busy time is the union of its jobs'
    intervals, never their summed durations. Records without enqueue times (imports)
    give ``enqueue_ns_per_job`` 0.

    Raises:
        ValueError: the records hold no recorded step.
    """
    if not records.steps:
        raise ValueError("no recorded steps to analyse")
    import numpy as np

    p = records.num_ranks
    cols = records.columns
    busy_rows = ~cols.kind_mask(NOT_BUSY)
    overlapping = any("/overlap" in s for s in records.streams)  # overlapping jobs (groups, imports): time busy, not work summed
    by_step = np.argsort(cols.step, kind="stable")
    sorted_steps = cols.step[by_step]
    out: list[StepMetrics] = []
    for step, start, end in zip(records.steps, records.step_start_ns, records.step_end_ns):
        lo, hi = np.searchsorted(sorted_steps, [step, step + 1])
        rows = by_step[lo:hi]
        jobs = cols.select(rows)
        step_time = end - start
        mine = busy_rows[rows]
        rank, a, b = jobs.rank[mine], jobs.start_ns[mine], jobs.end_ns[mine]
        if overlapping:
            busy = busy_union(rank, a, b, p)
        else:
            sums = np.zeros(p, dtype=np.int64)
            np.add.at(sums, rank, b - a)
            busy = sums.tolist()
        first = np.full(p, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, rank, a)
        last = np.zeros(p, dtype=np.int64)
        np.maximum.at(last, rank, b)
        has = np.zeros(p, dtype=bool)
        has[rank] = True
        spans = np.where(has, last - np.where(has, first, 0), 0).tolist()
        idle = [max(0, step_time - x) for x in busy]
        total_idle, total_busy = sum(idle), sum(busy)
        out.append(
            StepMetrics(
                step=step,
                step_time_ns=step_time,
                busy_ns=busy,
                idle_ns=idle,
                bubble_ratio=total_idle / (p * step_time) if step_time > 0 else 0.0,
                bubble_over_ideal=total_idle / total_busy if total_busy > 0 else 0.0,
                peak_inflight=peak_inflight_of_columns(jobs, p),
                span_bubble_ratio=(sum(spans) - total_busy) / sum(spans) if sum(spans) > 0 else 0.0,
            )
        )
    times = [s.step_time_ns for s in out]
    n_jobs_per_step = records.num_jobs / len(records.steps)
    return RunMetrics(
        steps=out,
        step_time_median_ns=float(statistics.median(times)),
        step_time_min_ns=min(times),
        step_time_max_ns=max(times),
        step_time_iqr_ns=_iqr(times),
        bubble_ratio=float(statistics.median(s.bubble_ratio for s in out)),
        bubble_over_ideal=float(statistics.median(s.bubble_over_ideal for s in out)),
        peak_inflight=[max(s.peak_inflight[r] for s in out) for r in range(p)],
        span_bubble_ratio=float(statistics.median(s.span_bubble_ratio for s in out)),
        peak_inflight_per_stage=peak_inflight_of_columns(cols, p, per="stage"),
        enqueue_ns_per_job=(float(statistics.median(records.enqueue_ns)) / n_jobs_per_step
                            if n_jobs_per_step and records.enqueue_ns else 0.0),
        step_time_stats=summarize(times),
        bubble_stats=summarize([s.bubble_ratio for s in out]),
        busy_stats=[summarize([s.busy_ns[r] for s in out]) for r in range(p)],
        idle_stats=[summarize([s.idle_ns[r] for s in out]) for r in range(p)],
    )


def metrics_to_dict(m: RunMetrics) -> dict[str, object]:
    """``m`` in the results document's ``metrics`` layout: what :func:`harness.report.results.case_to_dict`
    writes, and what sources of records that build their case themselves (the Paddle importer) use."""
    from dataclasses import asdict

    return {
        "normalization": m.normalization,
        "step_time_median_ns": m.step_time_median_ns,
        "step_time_min_ns": m.step_time_min_ns,
        "step_time_max_ns": m.step_time_max_ns,
        "step_time_iqr_ns": m.step_time_iqr_ns,
        "bubble_ratio": m.bubble_ratio,
        "bubble_over_ideal": m.bubble_over_ideal,
        "span_bubble_ratio": m.span_bubble_ratio,
        "peak_inflight": m.peak_inflight,
        "peak_inflight_per_stage": m.peak_inflight_per_stage,
        "enqueue_ns_per_job": m.enqueue_ns_per_job,
        "per_step": [asdict(s) for s in m.steps],
        **({"stats": {
            "step_time_ns": m.step_time_stats.to_dict(),
            "bubble_ratio": m.bubble_stats.to_dict() if m.bubble_stats else None,
            "busy_ns": [x.to_dict() for x in m.busy_stats],
            "idle_ns": [x.to_dict() for x in m.idle_stats],
        }} if m.step_time_stats is not None else {}),
    }
