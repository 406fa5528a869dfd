"""Figures of a schedule computed from the schedule and a cost model, without running it.

:func:`simulate` plays the plan's dependency graph once, in its enqueue order
(a topological order): a job starts at ``max(its stream is free, the ends of
the jobs it waits for, the starts of the sends a receive waits for)`` and ends
``duration`` later. This is exactly what :class:`harness.device.sim.SimDevice`
computes when :func:`harness.executor.execute` runs the same plan (same waits,
same FIFO streams, a shared start per step), so the two agree to the ns.

:func:`analyze` derives, from that timeline:

* makespan (ns);
* bubble in both normalizations used in the literature (see
  :class:`ScheduleAnalytics`);
* per-rank bubble inside the rank's own span, the measure of the zero-bubble
  paper (arXiv:2401.10241) once the optimizer synchronization is removed;
* peak in-flight micro-batches (activations held) per rank and per stage;
* point-to-point message count and bytes.

Everything is one pass over flat per-job arrays: linear in the number of jobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter

from harness._gcpause import gc_paused
from harness.cost import CostModel
from harness.plan import Plan, build_plan
from harness.schedule.model import Job, JobKind, Schedule, _kind_codes

__all__ = ["ScheduleAnalytics", "Timeline", "analyze", "simulate"]

_COMPUTE = frozenset({JobKind.F, JobKind.B, JobKind.I, JobKind.W, JobKind.OPT})


@dataclass(frozen=True)
class Timeline:
    """Simulated start and end (ns from the step's start) of every job of a plan.

    ``start[j]``, ``end[j]``, ``duration[j]`` refer to ``plan.jobs[j]``.
    """

    plan: Plan
    start: list[int]
    end: list[int]
    duration: list[int]

    @property
    def makespan_ns(self) -> int:
        """Time from the step's start to the last job's end (ns)."""
        return max(self.end, default=0)


def durations(plan: Plan, cost: CostModel) -> list[int]:
    """Per job of ``plan``, its duration in ns from ``cost``.

    Cost models are asked once per distinct ``(stage, kind)`` (durations do not
    depend on the micro-batch), in order of first appearance, which keeps this
    linear with a small constant.
    """
    import numpy as np

    jobs = plan.jobs
    n = len(jobs)
    if n == 0:
        return []
    arrays = getattr(plan, "_arrays", None)
    if arrays is not None:
        stage, kc = arrays.stage, arrays.kind
    else:
        kc = _kind_codes(jobs)
        stage = np.array(list(map(_STAGE, jobs)))
        if int(kc.min()) < 0 or stage.dtype.kind not in "iu" or int(stage.min()) < 0:
            return _durations_loop(plan, cost)
    n_stages = plan.schedule.num_stages
    key = stage * _N_KINDS + kc
    size = int(key.max()) + 1
    first = np.full(size, n, np.int64)
    np.minimum.at(first, key, np.arange(n, dtype=np.int64))
    table = np.zeros(size, object)  # the cost model's int objects, shared by all jobs of a key
    for j in np.sort(first[first < n]).tolist():
        table[key[j]] = int(cost.duration_ns(jobs[j], n_stages))
    return table[key].tolist()  # type: ignore[no-any-return]


def _durations_loop(plan: Plan, cost: CostModel) -> list[int]:
    n_stages = plan.schedule.num_stages
    cache: dict[tuple[int, JobKind], int] = {}
    out = [0] * plan.num_jobs
    for j, job in enumerate(plan.jobs):
        key = (job.stage, job.kind)
        d = cache.get(key)
        if d is None:
            d = cache[key] = int(cost.duration_ns(job, n_stages))
        out[j] = d
    return out


_STAGE = itemgetter(0)
_N_KINDS = len(JobKind)


@gc_paused
def simulate(plan: Plan, cost: CostModel) -> Timeline:
    """One-pass timeline of ``plan`` under ``cost`` (see module doc).

    Returns:
        A :class:`Timeline`; times in ns from the step's start.
    """
    dur = durations(plan, cost)
    n = plan.num_jobs
    free = [0] * len(plan.stream_names)
    stream, deps, sdeps = plan.stream, plan.deps, plan.start_deps
    arrays = getattr(plan, "_arrays", None)
    if arrays is not None and arrays.wait is not None:
        # Each job waits for at most one time (an end or a start): one list of
        # times, ends at j and starts at n + j, and per job the index it waits on.
        times = [0] * (2 * n + 1)
        wait = arrays.wait.tolist()
        for j in plan.order:
            s = stream[j]
            t = free[s]
            e = times[wait[j]]
            if e > t:
                t = e
            times[n + j] = t
            t += dur[j]
            times[j] = t
            free[s] = t
        return Timeline(plan, times[n : 2 * n], times[:n], dur)
    start = [0] * n
    end = [0] * n
    for j in plan.order:
        s = stream[j]
        t = free[s]
        for d in deps[j]:
            e = end[d]
            if e > t:
                t = e
        for d in sdeps[j]:
            e = start[d]
            if e > t:
                t = e
        start[j] = t
        t += dur[j]
        end[j] = t
        free[s] = t
    return Timeline(plan, start, end, dur)


@dataclass(frozen=True)
class ScheduleAnalytics:
    """What a schedule costs under a cost model, from the simulated timeline.

    Attributes:
        makespan_ns: step time, first job start (0) to last job end (ns).
        busy_ns: per rank, compute-stream busy time (F, B, I, W, OPT) in ns.
        idle_ns: per rank, ``makespan_ns - busy_ns``.
        bubble_ratio: idle share of total, ``sum(idle) / (p * makespan)``; for
            FThenB/1F1B with uniform stages ``(p-1)/(m+p-1)`` (arXiv:2104.04473 §2.2.1).
        bubble_over_ideal: bubble over ideal time, ``sum(idle) / sum(busy)``;
            ``(p-1)/m`` for 1F1B and ``(p-1)/(v m)`` for interleaved 1F1B
            (arXiv:2104.04473 §2.2.2).
        span_bubble_ns: per rank, idle time between the rank's first compute job
            start and its last compute job end. The zero-bubble paper's bubble (arXiv:2401.10241,
            Table 2) is ``max(span_bubble_ns)``: it ignores the parallelogram skew
            that vanishes once steps overlap (paper §4).
        peak_inflight: per rank, the most micro-batch activations held at once
            (a forward started, its backward - ``B``, or ``W`` when split - not ended).
        peak_inflight_per_stage: the same per stage.
        p2p_messages: point-to-point transfers (explicit ``SEND_*`` jobs, or the
            cross-rank edges a schedule without comm jobs implies).
        p2p_bytes: bytes those transfers move, from ``cost.nbytes``.
    """

    makespan_ns: int
    busy_ns: list[int]
    idle_ns: list[int]
    bubble_ratio: float
    bubble_over_ideal: float
    span_bubble_ns: list[int]
    peak_inflight: list[int]
    peak_inflight_per_stage: list[int]
    p2p_messages: int
    p2p_bytes: int

    @property
    def max_span_bubble_ns(self) -> int:
        """``max(span_bubble_ns)``: the bubble as arXiv:2401.10241 counts it (ns)."""
        return max(self.span_bubble_ns, default=0)


def _peaks(plan: Plan, tl: Timeline, key: list[int], size: int) -> list[int]:
    """Peak of held activations per ``key`` group (rank or stage); releases count
    before acquisitions at equal times, as :func:`harness.metrics.peak_inflight_of`."""
    jobs = plan.jobs
    split = {(job.stage, job.microbatch) for job in jobs if job.kind is JobKind.W}
    events: list[list[tuple[int, int]]] = [[] for _ in range(size)]
    for j, job in enumerate(jobs):
        kind = job.kind
        if kind is JobKind.F:
            events[key[j]].append((tl.start[j], 1))
        elif kind is JobKind.B or kind is JobKind.W or (kind is JobKind.I and (job.stage, job.microbatch) not in split):
            events[key[j]].append((tl.end[j], -1))
    peaks = [0] * size
    for g, evs in enumerate(events):
        evs.sort()
        cur = peak = 0
        for _, delta in evs:
            cur += delta
            if cur > peak:
                peak = cur
        peaks[g] = peak
    return peaks


def analyze(schedule: Schedule | Plan, cost: CostModel) -> ScheduleAnalytics:
    """Simulate ``schedule`` under ``cost`` and derive its figures (see :class:`ScheduleAnalytics`).

    Args:
        schedule: a schedule (validated here) or an already built plan.
        cost: per-job durations (ns) and transfer sizes (bytes).

    Raises:
        ScheduleError: the schedule is invalid or deadlocks.
    """
    plan = schedule if isinstance(schedule, Plan) else build_plan(schedule)
    tl = simulate(plan, cost)
    sched = plan.schedule
    p = sched.num_ranks
    makespan = tl.makespan_ns
    busy = [0] * p
    first = [-1] * p
    last = [0] * p
    for j, job in enumerate(plan.jobs):
        if job.kind not in _COMPUTE:  # spans are of compute work, as in harness.metrics
            continue
        r = plan.rank[j]
        busy[r] += tl.duration[j]
        if first[r] < 0 or tl.start[j] < first[r]:
            first[r] = tl.start[j]
        if tl.end[j] > last[r]:
            last[r] = tl.end[j]
    idle = [makespan - b for b in busy]
    span_bubble = [max(0, (last[r] - first[r]) - busy[r]) if first[r] >= 0 else 0 for r in range(p)]
    total_busy = sum(busy)
    messages, nbytes = _p2p(plan, cost)
    return ScheduleAnalytics(
        makespan_ns=makespan,
        busy_ns=busy,
        idle_ns=idle,
        bubble_ratio=sum(idle) / (p * makespan) if makespan else 0.0,
        bubble_over_ideal=sum(idle) / total_busy if total_busy else 0.0,
        span_bubble_ns=span_bubble,
        peak_inflight=_peaks(plan, tl, list(plan.rank), p),
        peak_inflight_per_stage=_peaks(plan, tl, [job.stage for job in plan.jobs], sched.num_stages),
        p2p_messages=messages,
        p2p_bytes=nbytes,
    )


def _p2p(plan: Plan, cost: CostModel) -> tuple[int, int]:
    sched = plan.schedule
    n_stages = sched.num_stages
    rank_of = sched.stage_to_rank
    messages = nbytes = 0
    has_comm = any(job.kind.is_comm for job in plan.jobs)
    size: dict[tuple[int, JobKind], int] = {}
    for job in plan.jobs:
        kind = job.kind
        if has_comm:
            if kind is not JobKind.SEND_F and kind is not JobKind.SEND_B:
                continue
            msg = job
        elif kind is JobKind.F and job.stage + 1 < n_stages and rank_of[job.stage + 1] != rank_of[job.stage]:
            msg = Job(job.stage, JobKind.SEND_F, job.microbatch)
        elif (kind is JobKind.B or kind is JobKind.I) and job.stage > 0 and rank_of[job.stage - 1] != rank_of[job.stage]:
            msg = Job(job.stage, JobKind.SEND_B, job.microbatch)
        else:
            continue
        key = (msg.stage, msg.kind)
        b = size.get(key)
        if b is None:
            b = size[key] = int(cost.nbytes(msg, n_stages))
        messages += 1
        nbytes += b
    return messages, nbytes
