"""The executor: runs a plan on a device for a number of steps and times every job.

For each step it records a reference event, makes every stream wait on it (so
all streams start the step together and share its time base), then walks the
plan's enqueue order. For each job it makes the job's stream wait on the end
events (or, for a receive, the start event) of its cross-stream dependencies,
records the job's start event, launches its work and records its end event.
After a synchronize, events are turned into ns relative to the first recorded
step's reference event. The executor only talks to the device interface.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection
from typing import Any

from harness._gcpause import gc_paused
from harness.errors import ConfigError
from harness.model.cost import CostModel
from harness.plan.graph import Plan
from harness.records import JobRecord, RunRecords
from harness.run.device.base import Device, Work
from harness.run.window import MAX_STEPS, FixedWindow, ProfilingWindow, parse_steps
from harness.schedule.model import JobKind

__all__ = ["MAX_STEPS", "execute", "parse_steps"]  # parse_steps and MAX_STEPS live in harness.run.window


def _works(plan: Plan, cost: CostModel) -> list[Work]:
    """Per job its :class:`Work`. The cost model is asked once per ``(stage, kind)``
    (costs do not depend on the micro-batch, see :class:`~harness.model.cost.CostModel`)."""
    from harness.model.chains import check_cost_for_chains

    schedule = plan.schedule
    check_cost_for_chains(cost, schedule)
    n_stages = schedule.num_stages
    per_key: dict[tuple[int, JobKind], tuple[int, float, int, bool, int | None]] = {}
    out = []
    for job in plan.jobs:
        key = (job.stage, job.kind)
        fields = per_key.get(key)
        if fields is None:
            peer = None
            if job.kind is JobKind.SEND_F and job.stage + 1 < n_stages:
                peer = schedule.rank_of(job.stage + 1)
            elif job.kind is JobKind.SEND_B and job.stage > 0:
                peer = schedule.rank_of(job.stage - 1)
            fields = per_key[key] = (
                int(cost.duration_ns(job, n_stages)),
                float(cost.flops(job, n_stages)),
                int(cost.nbytes(job, n_stages)),
                job.kind.is_comm,
                peer,
            )
        duration, flops, nbytes, is_copy, peer = fields
        out.append(Work(duration, flops, nbytes, is_copy, str(job), peer))
    from harness.plan.groups import group_durations

    base = [w.duration_ns for w in out]
    dur = group_durations(plan, cost, base)  # every job of an overlapped group lasts the group (harness.plan.groups)
    if dur is not base:
        out = [w if d == w.duration_ns else dataclasses.replace(w, duration_ns=d) for w, d in zip(out, dur)]
    return out


@gc_paused
def execute(
    plan: Plan,
    device: Device,
    cost: CostModel,
    steps: range | ProfilingWindow,
    ranks: Collection[int] | None = None,
    delays: list[int] | None = None,
    replay: bool = True,
) -> RunRecords:
    """Run ``plan`` on ``device`` for the steps of a profiling window and record them.

    Args:
        plan: the validated plan.
        device: any backend implementing :class:`~harness.run.device.base.Device`.
        cost: gives each job's work (duration ns, FLOPs, bytes).
        steps: the recorded steps as a ``range`` (steps ``0 .. steps.start-1``
            are warm-up), or a :class:`~harness.run.window.ProfilingWindow` (e.g.
            :class:`~harness.run.window.AdaptiveWindow`, which records until the
            median step time is stable); the run's ``window`` says why it stopped.
        ranks: the ranks this process runs (default: all). Jobs of other ranks
            are neither enqueued nor recorded; this is the seam for one rank
            per process, where remote dependencies arrive through a transport.
        delays: per job, ns between its end and the earliest start of a job on another
            rank that waits for it (the producer's transfer under the ``edge`` communication
            model, :func:`harness.plan.delays.edge_delays`); needs a device with ``wait_delayed``
            (``sim``). ``None`` (default) for none.
        replay: on a device that replays plans (``replays_plans``: ``sim``), compute the
            records with :func:`harness.run.replay.replay` instead of enqueueing every
            operation (the same records, ``enqueue_ns`` 0); ``False`` runs op by op.

    Python's cyclic garbage collector is paused for the run (as :mod:`timeit`
    does), so its passes neither show up as enqueue time nor stall launches;
    it collects as usual afterwards. On ``sim`` this alone makes a run three
    times faster (46 k → 149 k jobs/s at 48 k jobs).

    Returns:
        The run's records; times in ns relative to the first recorded step's
        reference event.

    Raises:
        ConfigError: ``steps`` not a range, an empty profiling window, unknown ranks,
            or ``delays`` on a device that cannot delay a wait.
        ExecutionError: the device failed or stalled.
    """
    if isinstance(steps, range):
        if steps.step != 1:
            raise ConfigError(f"the profiling window must be consecutive steps, range(START, END) with step 1, got {steps!r}")
        if len(steps) == 0 or steps.start < 0:
            raise ConfigError(f"nothing to record: profiling window {steps.start}:{steps.stop}")
        if steps.stop > MAX_STEPS:
            raise ConfigError(f"profiling window {steps.start}:{steps.stop}: at most {MAX_STEPS} steps per run")
        window: ProfilingWindow = FixedWindow(steps)
    elif all(hasattr(steps, a) for a in ("steps", "is_recorded", "observe", "outcome", "warmup_steps")):
        window = steps
    else:
        raise ConfigError(f"steps must be a range of step indices, e.g. range(1, 4) (one warm-up step, three recorded), "
                          f"or a profiling window (harness.run.window.AdaptiveWindow), got {steps!r}")
    p = plan.schedule.num_ranks
    local = set(range(p)) if ranks is None else set(ranks)
    if not local <= set(range(p)):
        raise ConfigError(f"ranks {sorted(local - set(range(p)))} are not in a {p}-rank pipeline")
    if ranks is not None and local != set(range(p)) and getattr(device, "transport", None) is None:
        raise ConfigError("running a subset of ranks needs a device with a cross-process transport (the mpi backend, "
                          "harness.distributed.mpi), whose transfers carry the other ranks' dependencies")
    delayed = delays is not None and any(delays)
    if delayed and not hasattr(device, "wait_delayed"):
        raise ConfigError(f"the {device.name} backend cannot delay a dependency (comm_model 'edge'); use comm_model 'stream'")
    if replay and getattr(device, "replays_plans", False) and local == set(range(p)):  # every rank in this process
        from harness.run.replay import replay as replay_plan

        return replay_plan(plan, device, cost, window, delays)
    works = _works(plan, cost)
    order = [j for j in plan.order if plan.rank[j] in local]
    stream_ids = [s for s in plan.streams_used() if plan.stream_rank[s] in local]
    streams: dict[int, Any] = {s: device.stream(plan.stream_names[s]) for s in stream_ids}
    n = plan.num_jobs
    start_ev = [device.event() for _ in range(n)]
    end_ev = [device.event() for _ in range(n)]
    records = RunRecords(
        backend=device.name,
        device=device.describe(),
        num_ranks=p,
        streams=[plan.stream_names[s] for s in stream_ids],
        warmup_steps=window.warmup_steps,
    )
    first = streams[stream_ids[0]]
    others = [streams[s] for s in stream_ids[1:]]
    base_ref: Any = None
    # Per-job fields that do not change between steps, computed once.
    jobs, rank_of, chunk_of, stream_of, names = plan.jobs, plan.rank, plan.chunk, plan.stream, plan.stream_names
    static = [(j, (rank_of[j], names[stream_of[j]], jobs[j][0], jobs[j][1].value, jobs[j][2], chunk_of[j])) for j in order]
    deps, start_deps = plan.deps, plan.start_deps
    record, wait, launch = device.record, device.wait, device.launch
    clock = time.perf_counter_ns
    enqueue_of = [0] * n
    for step in window.steps():
        ref = device.event()
        t0 = clock()
        record(ref, first)
        for s in others:
            wait(s, ref)
        t = clock()
        for j in order:
            s = streams[stream_of[j]]
            for d in deps[j]:
                if delayed and delays[d] and rank_of[d] != rank_of[j]:  # type: ignore[index]  # the producer's transfer
                    device.wait_delayed(s, end_ev[d], delays[d])  # type: ignore[attr-defined, index]
                else:
                    wait(s, end_ev[d])
            for d in start_deps[j]:
                wait(s, start_ev[d])
            record(start_ev[j], s)
            launch(s, works[j])
            record(end_ev[j], s)
            now = clock()
            enqueue_of[j] = now - t
            t = now
        enqueue = clock() - t0
        device.synchronize()
        if not window.is_recorded(step):
            continue
        if base_ref is None:
            base_ref = ref
            host_time = getattr(device, "host_time_ns", None)
            if host_time is not None:  # ties the time base to the host clock (cuda)
                records.device["host_anchor_ns"] = host_time(base_ref)
        offset = device.elapsed_ns(base_ref, ref)
        step_end = offset
        elapsed = device.elapsed_ns
        append = records.jobs.append
        for j, info in static:
            a = offset + elapsed(ref, start_ev[j])
            b = offset + elapsed(ref, end_ev[j])
            append(JobRecord(*info, step, a, b, enqueue_of[j]))
            if b > step_end:
                step_end = b
        records.steps.append(step)
        records.step_start_ns.append(offset)
        records.step_end_ns.append(step_end)
        records.enqueue_ns.append(enqueue)
        window.observe(step, step_end - offset)
    records.window = window.outcome()
    return records
