"""Figures of a schedule computed from the schedule and a cost model, without running it.

:func:`simulate` plays the plan's dependency graph once, in its enqueue order
(a topological order): a job starts at ``max(its stream is free, the ends of
the jobs it waits for, the starts of the sends a receive waits for)`` and ends
``duration`` later. This is exactly what :class:`harness.run.device.sim.SimDevice`
computes when :func:`harness.run.executor.execute` runs the same plan (same waits,
same FIFO streams, a shared start per step), so the two agree to the ns.

:func:`analyze` derives, from that timeline:

* makespan (ns);
* bubble in both normalizations used in the literature (see
  :class:`ScheduleAnalytics`);
* per-rank bubble inside the rank's own span, the measure of the zero-bubble
  paper (arXiv:2401.10241) once the optimizer synchronization is removed;
* peak in-flight micro-batches (activations held) per rank and per stage;
* point-to-point message count and bytes.

The simulation is one pass over the plan in its enqueue order and the figures
numpy over the plan's columns: linear in the number of jobs, apart from the
sort of activation events behind the peaks (``O(n log n)``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from harness._gcpause import gc_paused
from harness.errors import ConfigError
from harness.model.checked import checked
from harness.model.cost import CostModel
from harness.plan.build import build_plan
from harness.plan.graph import Plan
from harness.plan.timeline import _KINDS, _N_KINDS, Timeline, simulate
from harness.schedule.model import KIND_CODE, Job, JobKind, Schedule

__all__ = ["ScheduleAnalytics", "StepTime", "analyze", "analyze_plan", "step_time"]

R = TypeVar("R")


@dataclass(frozen=True)
class ScheduleAnalytics:
    """What a schedule costs under a cost model, from the simulated timeline.

    Attributes:
        makespan_ns: step time, first job start (0) to last job end (ns).
        busy_ns: per rank, compute-stream busy time (F, B, I, W, OPT) in ns; with
            overlapped groups (:mod:`harness.plan.groups`) the time the rank is busy,
            counting the overlap once.
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
        comm_model: the communication model of the analysis (:mod:`harness.model.comm`).
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
    comm_model: str = "stream"

    @property
    def max_span_bubble_ns(self) -> int:
        """``max(span_bubble_ns)``: the bubble as arXiv:2401.10241 counts it (ns)."""
        return max(self.span_bubble_ns, default=0)

def _group_max(values: Any, group: Any, size: int) -> list[int]:
    """Per group ``g < size``, the maximum of ``values[group == g]`` (``0`` for an
    empty group)."""
    import numpy as np

    out = np.zeros(size, np.int64)
    has = np.zeros(size, bool)
    has[group] = True
    if len(values):
        low = np.full(size, np.iinfo(np.int64).min, np.int64)
        np.maximum.at(low, group, values)
        out[has] = low[has]
    return out.tolist()  # type: ignore[no-any-return]

def _peaks(plan: Plan, start: Any, end: Any, key: Any, size: int) -> list[int]:
    """Peak of held activations per ``key`` group (rank or stage of each job, a
    numpy int64 array): a forward's start acquires one, the end of its backward
    (``B``; ``W`` when split, else ``I``) releases it. Releases count before
    acquisitions at equal times, as :func:`harness.analysis.metrics.peak_inflight_of`."""
    import numpy as np

    cols = plan.arrays
    kind, stage, mb = cols.kind, cols.stage, cols.microbatch
    is_w = kind == _CW
    split = np.zeros((plan.schedule.num_stages, plan.schedule.num_microbatches + 1), bool)
    split[stage[is_w], mb[is_w]] = True
    acquire = kind == _CF
    release = (kind == _CB) | is_w | ((kind == _CI) & ~split[stage, mb])
    from harness.analysis.metrics import held_peaks

    return held_peaks(acquire, release, key, start, end, size)

@gc_paused
def analyze(
    schedule: Schedule | Plan, cost: CostModel, comm: bool | None = None, comm_model: str = "stream",
    placement: str | None = None,
) -> ScheduleAnalytics:
    """Simulate ``schedule`` under ``cost`` and derive its figures (see :class:`ScheduleAnalytics`).

    Numpy over the plan's columns: linear in the number of jobs apart from
    sorting the activation events (twice: per rank and per stage), so
    ``O(n log n)``.

    Args:
        schedule: a schedule (validated here) or an already built plan
            (analysed as it is: ``comm=None`` inserts nothing into a plan, so
            a plan built without send/receive jobs has free transfers, as it
            would have running on ``sim``).
        cost: per-job durations (ns) and transfer sizes (bytes).
        comm: insert send/receive jobs first
            (:func:`~harness.schedule.passes.add_communication`): ``None``
            (default) does so exactly when a case would, i.e. when the
            schedule has none and transfers take time under ``cost``
            (:func:`~harness.model.comm.transfers_cost_time`), so the
            figures predict what ``run_case`` measures; ``True`` always,
            ``False`` never (a compute-only schedule's transfers then cost
            nothing; send/receive jobs already in the schedule stay).
            Only under ``comm_model="stream"`` or ``"blocking"``.
        comm_model: ``"stream"`` (default: send/receive jobs on comm streams),
            ``"blocking"`` (send/receive jobs on the compute streams, a send meeting
            its receive), ``"edge"`` (no send/receive jobs; a consumer on another rank
            starts at its producer's end plus the transfer time, as the zero-bubble
            repository's simulator) or ``"free"`` (transfers cost nothing); see
            :mod:`harness.model.comm`. A plan is analysed as built; ``edge`` then needs
            one without send/receive jobs.
        placement: where inserted send/receive jobs go (``None``: the model's default,
            ``just-in-time`` under ``stream``, ``timed`` under ``blocking``; see
            :func:`harness.model.comm.lower`). Not for a plan.

    Raises:
        ScheduleError: the schedule is invalid or deadlocks.
        ConfigError: a custom cost model's answer that a run refuses too
            (:class:`~harness.model.checked.CheckedCost`: a negative duration or byte count...),
            the step would last 2**62 ns or more (a cost model in the
            wrong units), ``comm=True`` asked of a plan, or more jobs than
            :data:`~harness.schedule.registry.MAX_JOBS` with send/receive jobs added.
        ResourceError: memory ran out (names the jobs and the memory they need).
    """
    from harness.model import comm as comm_models
    from harness.schedule.passes import comm_jobs_added
    from harness.schedule.registry import memory_guard

    comm_model = comm_models.check_comm_model(comm_model)
    cost = checked(cost)  # a custom model's answers, as a run checks them
    if isinstance(schedule, Plan):
        if comm:
            raise ConfigError("analyze: comm=True needs a Schedule; a Plan is analysed as it was built")
        if placement is not None:
            raise ConfigError("analyze: placement needs a Schedule; a Plan is analysed as it was built (with its own placement)")
        lower, jobs, name = False, schedule.num_jobs, schedule.schedule.name
    else:
        # at most this many jobs (the guard's estimate asks the cost model nothing: comm.lower decides)
        lower = comm_model in comm_models.MODELS_WITH_JOBS and comm is not False and not schedule.has_comm
        jobs = schedule.num_jobs + (comm_jobs_added(schedule) if lower else 0)
        name = schedule.name
    with memory_guard(jobs, f"schedule {name!r}: analysing its timeline"):
        if isinstance(schedule, Plan):
            return _analyze(schedule, cost, comm_model)[0]
        return _analyze(build_plan(comm_models.lower(schedule, cost, comm_model, comm, placement)), cost, comm_model)[0]


@gc_paused
def analyze_plan(plan: Plan, cost: CostModel, comm_model: str = "stream") -> tuple[ScheduleAnalytics, Timeline]:
    """:func:`analyze` of a built plan, with the timeline it simulated (start and end of every job, ns), for
    what else is read off that timeline (:func:`harness.analysis.memory.analytic_memory`'s peaks) without
    simulating it again.

    Raises:
        ScheduleError, ConfigError, ResourceError: as :func:`analyze`.
    """
    return _guarded(_analyze, plan, cost, comm_model)


def _guarded(run: Callable[[Plan, CostModel, str], R], plan: Plan, cost: CostModel, comm_model: str) -> R:
    """``run(plan, cost, comm_model)`` on a built plan, as :func:`analyze` runs it: the comm model checked, a custom
    cost model's answers checked as a run checks them, inside the plan's memory guard."""
    from harness.model import comm as comm_models
    from harness.schedule.registry import memory_guard

    comm_model = comm_models.check_comm_model(comm_model)
    with memory_guard(plan.num_jobs, f"schedule {plan.schedule.name!r}: analysing its timeline"):
        return run(plan, checked(cost), comm_model)

@dataclass(frozen=True)
class StepTime:
    """A plan's step under a cost model, and no more: what a search reads off every candidate
    (:func:`step_time`; :func:`analyze` derives its other figures from the same numbers).

    Attributes:
        makespan_ns: step time, first job start (0) to last job end (ns).
        busy_ns: per rank, compute busy time (ns), as :attr:`ScheduleAnalytics.busy_ns`.
        bubble_ratio: ``sum(idle) / (p * makespan)`` (arXiv:2104.04473 §2.2.1), as :attr:`ScheduleAnalytics.bubble_ratio`.
        timeline: the simulated start and end of every job (ns), for what else is read off it
            (:func:`harness.analysis.memory.analytic_memory`'s peaks).
    """

    makespan_ns: int
    busy_ns: list[int]
    bubble_ratio: float
    timeline: Timeline


@gc_paused
def step_time(plan: Plan, cost: CostModel, comm_model: str = "stream") -> StepTime:
    """The step time, busy time per rank and bubble of a built plan under ``cost`` (:class:`StepTime`): the part of
    :func:`analyze` a search needs per candidate, without the activation peaks, spans and message counts.

    Raises:
        ScheduleError, ConfigError, ResourceError: as :func:`analyze`.
    """
    return _guarded(_step, plan, cost, comm_model)[0]


def _step(plan: Plan, cost: CostModel, comm_model: str) -> tuple[StepTime, Any, Any, Any, Any]:
    """:func:`step_time` inside the memory guard, and for :func:`_analyze` the arrays it made: every job's start and
    end (ns), the compute jobs' indices and their ranks."""
    import numpy as np

    from harness.plan.delays import edge_delays

    tl = simulate(plan, cost, edge_delays(plan, cost) if comm_model == "edge" else None)
    sched = plan.schedule
    p = sched.num_ranks
    makespan = tl.makespan_ns
    cols = plan.arrays
    if makespan >= 1 << 62:  # sums below would overflow int64
        raise ConfigError(
            f"schedule {sched.name!r}: the simulated step lasts {makespan} ns (over 146 years); check the cost model's units"
        )
    start = np.array(tl.start, np.int64)
    end = np.array(tl.end, np.int64)
    compute = np.flatnonzero(np.isin(cols.kind, _COMPUTE_CODES))  # spans are of compute work, as in harness.analysis.metrics
    rank = cols.rank[compute]  # ascending: jobs are listed rank by rank
    busy_np = np.zeros(p, np.int64)
    np.add.at(busy_np, rank, np.array(tl.duration, np.int64)[compute])
    busy = busy_np.tolist()
    if any("/overlap" in name for name in plan.stream_names):  # overlapped groups: time busy, not work summed
        from harness.analysis.busy import busy_union

        busy = busy_union(rank.tolist(), start[compute].tolist(), end[compute].tolist(), p)
    idle = sum(makespan - b for b in busy)
    step = StepTime(makespan, busy, idle / (p * makespan) if makespan else 0.0, tl)
    return step, start, end, compute, rank


def _analyze(plan: Plan, cost: CostModel, comm_model: str) -> tuple[ScheduleAnalytics, Timeline]:
    """:func:`analyze` of a built plan, inside its memory guard, and the timeline simulated."""
    import numpy as np

    step, start, end, compute, rank = _step(plan, cost, comm_model)
    tl, makespan, busy = step.timeline, step.makespan_ns, step.busy_ns
    sched = plan.schedule
    p = sched.num_ranks
    cols = plan.arrays
    last = _group_max(end[compute], rank, p)
    first = [-t for t in _group_max(-start[compute], rank, p)]
    has_compute = np.bincount(rank, minlength=p).tolist()
    idle = [makespan - b for b in busy]
    span_bubble = [max(0, (last[r] - first[r]) - busy[r]) if has_compute[r] else 0 for r in range(p)]
    total_busy = sum(busy)
    messages, nbytes = _p2p(plan, cost)
    return ScheduleAnalytics(
        makespan_ns=makespan,
        busy_ns=busy,
        idle_ns=idle,
        bubble_ratio=step.bubble_ratio,
        bubble_over_ideal=sum(idle) / total_busy if total_busy else 0.0,
        span_bubble_ns=span_bubble,
        peak_inflight=_peaks(plan, start, end, cols.rank, p),
        peak_inflight_per_stage=_peaks(plan, start, end, cols.stage, sched.num_stages),
        p2p_messages=messages,
        p2p_bytes=nbytes,
        comm_model=comm_model,
    ), tl

def _p2p(plan: Plan, cost: CostModel) -> tuple[int, int]:
    """Point-to-point message count and bytes: the plan's ``SEND_*`` jobs, or in a
    schedule without comm jobs the cross-rank edges (``F`` to the next stage,
    ``B``/``I`` to the previous one, within the stage's chain). ``cost.nbytes`` is asked once per distinct
    ``(stage, kind)``."""
    import numpy as np

    cols = plan.arrays
    kind, stage, mb = cols.kind, cols.stage, cols.microbatch
    st_rank = np.array(plan.schedule.stage_to_rank, np.int64)
    n_stages = len(st_rank)
    if bool(np.isin(kind, _COMM_CODES).any()):
        at = np.flatnonzero((kind == _CSF) | (kind == _CSB))
        msg_kind = kind[at]
    else:
        from harness.schedule.chains import links

        has_prev, has_next = (np.array(x, bool) for x in links(plan.schedule))  # within each chain
        away_next = np.zeros(n_stages, bool)
        away_next[:-1] = st_rank[1:] != st_rank[:-1]
        away_prev = np.zeros(n_stages, bool)
        away_prev[1:] = away_next[:-1]
        away_next &= has_next
        away_prev &= has_prev
        fwd = (kind == _CF) & away_next[stage]
        bwd = ((kind == _CB) | (kind == _CI)) & away_prev[stage]
        at = np.flatnonzero(fwd | bwd)
        msg_kind = np.where(fwd[at], _CSF, _CSB)
    if not len(at):
        return 0, 0
    keys, first, counts = np.unique(stage[at] * _N_KINDS + msg_kind, return_index=True, return_counts=True)
    nbytes = 0
    for key, j, count in zip(keys.tolist(), at[first].tolist(), counts.tolist()):
        b = int(mb[j])
        msg = Job(key // _N_KINDS, _KINDS[key % _N_KINDS], None if b < 0 else b)
        nbytes += int(cost.nbytes(msg, n_stages)) * count
    return len(at), nbytes

_CODES = KIND_CODE

_CF, _CB, _CI, _CW = _CODES[JobKind.F], _CODES[JobKind.B], _CODES[JobKind.I], _CODES[JobKind.W]

_CSF, _CSB = _CODES[JobKind.SEND_F], _CODES[JobKind.SEND_B]

_COMPUTE_CODES = [_CODES[k] for k in (JobKind.F, JobKind.B, JobKind.I, JobKind.W, JobKind.OPT)]

_COMM_CODES = [_CODES[k] for k in (JobKind.SEND_F, JobKind.RECV_F, JobKind.SEND_B, JobKind.RECV_B)]
