"""Replay of a plan on the simulated device without a Python call per device operation.

The ``sim`` device (:class:`harness.run.device.sim.SimDevice`) plays each step's
enqueued records, waits and launches as in-order streams on a virtual clock. Every
step of a run enqueues the same operations and starts when all streams have
finished the previous one (its ``synchronize`` is a barrier), so every step has
the same timeline, shifted by the makespan: the analytic recurrence of
:func:`harness.plan.timeline.simulate` (per job, its start is the latest of its stream's
previous end, its dependencies' ends - plus the ``edge`` delay across ranks - and
its start dependencies' starts), computed once. :func:`replay` returns the records
:func:`harness.run.executor.execute` makes op by op on ``sim``, with one difference:
no host time is spent enqueueing, so ``enqueue_ns`` is 0 per job and per step.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.model.cost import CostModel
from harness.plan.graph import Plan
from harness.plan.timeline import simulate
from harness.records import JobColumns, RunRecords
from harness.run.window import ProfilingWindow

__all__ = ["replay"]

def _check_fits(makespan_ns: int, steps: int) -> None:
    """Raise :class:`~harness.errors.ConfigError` when ``steps`` steps of ``makespan_ns`` pass the
    records' 64-bit ns."""
    if makespan_ns * max(1, steps) >= 1 << 63:
        from harness.errors import ConfigError

        raise ConfigError(f"the step lasts {makespan_ns:,} ns: {steps} recorded step(s) would pass 2**63 ns (about 292 years), "
                          "past what the records hold; give the cost model shorter jobs")


def replay(plan: Plan, device: Any, cost: CostModel, window: ProfilingWindow, delays: list[int] | None = None) -> RunRecords:
    """The records of ``plan`` run on the sim ``device`` for ``window``'s steps (see module doc).

    Args:
        plan: a validated plan (all ranks).
        device: the sim device (its name and :meth:`describe` go into the records).
        cost: job durations (ns), asked once per stage and kind.
        window: the profiling window; told each recorded step's time.
        delays: per job, the ``edge`` model's delay (ns) between its end and the start of a job on
            another rank that waits for it (:func:`harness.plan.delays.edge_delays`), or ``None``.

    Returns:
        Records as :func:`harness.run.executor.execute` makes them (jobs in enqueue order per
        recorded step, ns from the first recorded step's start), ``enqueue_ns`` 0.

    Raises:
        ConfigError: the cost model gives micro-batches of one stage and kind different
            durations (:func:`harness.plan.timeline.durations`).
    """
    timeline = simulate(plan, cost, delays)
    _check_fits(timeline.makespan_ns, 1)
    order = np.asarray(plan.order, dtype=np.int64)
    cols = plan.arrays
    used = plan.streams_used()
    streams = [plan.stream_names[s] for s in used]
    start = np.asarray(timeline.start, dtype=np.int64)[order]
    end = np.asarray(timeline.end, dtype=np.int64)[order]
    makespan = int(end.max()) if len(end) else 0
    # the plan's stream ids -> indices into the records' streams
    to_used = np.full(len(plan.stream_names), -1, dtype=np.int64)
    to_used[np.asarray(used, dtype=np.int64)] = np.arange(len(used), dtype=np.int64)
    steps, offsets = [], []
    base: int | None = None
    for k, step in enumerate(window.steps()):
        if not window.is_recorded(step):
            continue
        if base is None:
            base = k
        offset = (k - base) * makespan
        steps.append(step)
        offsets.append(offset)
        window.observe(step, makespan)
    n, reps = len(order), len(steps)
    _check_fits(makespan, reps)
    shift = np.repeat(np.asarray(offsets, dtype=np.int64), n)
    columns = JobColumns(
        rank=np.tile(cols.rank[order].astype(np.int64), reps),
        stream=np.tile(to_used[cols.stream[order]], reps),
        stage=np.tile(cols.stage[order].astype(np.int64), reps),
        kind=np.tile(cols.kind[order].astype(np.int64), reps),  # plan kind codes are KINDS' indices
        microbatch=np.tile(cols.microbatch[order].astype(np.int64), reps),
        chunk=np.tile(cols.chunk[order].astype(np.int64), reps),
        step=np.repeat(np.asarray(steps, dtype=np.int64), n),
        start_ns=np.tile(start, reps) + shift,
        end_ns=np.tile(end, reps) + shift,
        enqueue_ns=np.zeros(n * reps, dtype=np.int64),
        streams=tuple(streams),
    )
    return RunRecords(backend=device.name, device=device.describe(), num_ranks=plan.schedule.num_ranks, streams=streams,
                      steps=steps, step_start_ns=list(offsets), step_end_ns=[o + makespan for o in offsets],
                      enqueue_ns=[0] * reps, warmup_steps=window.warmup_steps, window=window.outcome(), columns=columns)
