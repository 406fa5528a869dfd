"""The analytic timeline: a plan's jobs timed under a cost model, without running anything.

:func:`simulate` plays the plan's dependency graph once, in its enqueue order
(a topological order): a job starts at ``max(its stream is free, the ends of
the jobs it waits for, the starts of the sends a receive waits for)`` and ends
``duration`` later. This is exactly what :class:`harness.run.device.sim.SimDevice`
computes when :func:`harness.run.executor.execute` runs the same plan (same waits,
same FIFO streams, a shared start per step), so the two agree to the ns. The
``sim`` backend's replay (:mod:`harness.run.replay`), the analysis
(:mod:`harness.analysis`) and the importers' replay read it.

One pass over the plan in its enqueue order: linear in the number of jobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness._gcpause import gc_paused
from harness.errors import ConfigError
from harness.model.cost import CostModel
from harness.plan.graph import Plan
from harness.schedule.model import Job, JobKind

__all__ = ["Timeline", "simulate"]


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

    Raises:
        ConfigError: a cost that differs by micro-batch, a group time out of range
            (:func:`harness.model.overlap.group_ns`), or a cost model that cannot describe
            the schedule's chains (:func:`harness.model.chains.check_cost_for_chains`).
    """
    import numpy as np

    from harness.model.chains import check_cost_for_chains

    check_cost_for_chains(cost, plan.schedule)
    n = plan.num_jobs
    if n == 0:
        return []
    cols = plan.arrays
    stage, kc, mb = cols.stage, cols.kind, cols.microbatch
    n_stages = plan.schedule.num_stages
    key = stage * _N_KINDS + kc
    size = int(key.max()) + 1
    first = np.full(size, n, np.int64)
    np.minimum.at(first, key, np.arange(n, dtype=np.int64))
    last = np.full(size, -1, np.int64)
    np.maximum.at(last, key, np.arange(n, dtype=np.int64))
    table = np.zeros(size, object)  # the cost model's int objects, shared by all jobs of a key
    for j in np.sort(first[first < n]).tolist():
        b = int(mb[j])
        job = Job(int(stage[j]), _KINDS[int(kc[j])], None if b < 0 else b)
        value = table[key[j]] = int(cost.duration_ns(job, n_stages))
        k = int(last[key[j]])
        if k != j and int(mb[k]) != b:  # costs may differ by stage and kind, not by micro-batch: say so, never flatten
            other = Job(int(stage[k]), _KINDS[int(kc[k])], int(mb[k]) if int(mb[k]) >= 0 else None)
            other_value = int(cost.duration_ns(other, n_stages))
            if other_value != value:
                raise ConfigError(
                    f"cost model {type(getattr(cost, 'inner', cost)).__name__}: job {other} lasts {other_value} ns but {job} lasts {value} ns; "
                    "costs may differ by stage and job kind, not by micro-batch (the timeline and the executor ask once per "
                    "stage and kind): give every micro-batch of a stage the same cost"
                )
    from harness.plan.groups import group_durations

    return group_durations(plan, cost, table[key].tolist())  # every job of an overlapped group lasts the group

_KINDS = tuple(JobKind)

_N_KINDS = len(JobKind)

@gc_paused
def simulate(plan: Plan, cost: CostModel, delays: list[int] | None = None) -> Timeline:
    """One-pass timeline of ``plan`` under ``cost`` (see module doc).

    Args:
        plan: the plan to play.
        cost: per-job durations (ns).
        delays: per job, ns between its end and the start of a job on another rank that
            waits for it (the ``edge`` communication model, :func:`harness.plan.delays.edge_delays`:
            the producer's transfer time); ``None`` for none.

    Returns:
        A :class:`Timeline`; times in ns from the step's start.
    """
    dur = durations(plan, cost)
    n = plan.num_jobs
    free = [0] * len(plan.stream_names)
    stream = plan.arrays.stream.tolist()
    wait = getattr(plan, "_wait", None)
    if delays is not None and any(delays):
        return _simulate_delayed(plan, dur, delays, wait)
    if wait is not None:
        # Each job waits for at most one time (an end or a start): one list of
        # times, ends at j and starts at n + j, and per job the index it waits on.
        times = [0] * (2 * n + 1)
        wait = wait.tolist()
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
    deps, sdeps = plan.deps, plan.start_deps
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

def _simulate_delayed(plan: Plan, dur: list[int], delays: list[int], wait: Any) -> Timeline:
    """:func:`simulate` with a delay on each cross-rank dependency (``edge``)."""
    n = plan.num_jobs
    free = [0] * len(plan.stream_names)
    stream = plan.arrays.stream.tolist()
    if wait is not None:  # one wait per job: the producer's delay where it waits for a job's end on another rank
        import numpy as np

        w = np.asarray(wait)
        producer = np.minimum(w, n - 1)
        rank_np = plan.arrays.rank
        cross = (w < n) & (rank_np[producer] != rank_np)
        delay = np.where(cross, np.asarray(delays, np.int64)[producer], 0).tolist()
        times = [0] * (2 * n + 1)
        wl = w.tolist()
        for j in plan.order:
            s = stream[j]
            t = free[s]
            e = times[wl[j]] + delay[j]
            if e > t:
                t = e
            times[n + j] = t
            t += dur[j]
            times[j] = t
            free[s] = t
        return Timeline(plan, times[n : 2 * n], times[:n], dur)
    rank = plan.rank
    deps, sdeps = plan.deps, plan.start_deps
    start = [0] * n
    end = [0] * n
    for j in plan.order:
        s = stream[j]
        t = free[s]
        r = rank[j]
        for d in deps[j]:
            e = end[d] + (delays[d] if rank[d] != r else 0)
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
