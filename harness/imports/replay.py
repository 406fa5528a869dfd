"""An imported run beside its schedule: how far the real run is from what its order should give, and why.

From an import (:class:`harness.actions.torch_assemble.TorchRun`: an import or a ``torch`` backend run):

1. **cost model fitted** from the measured jobs (:class:`FittedCost`): per stage and
   kind, the median compute duration (first operator to range end, ns); per
   direction (``SEND_F``/``SEND_B``) one transfer time: the median of ``receive
   completed - send started`` (the end of ``gloo:recv`` minus the SEND range's
   start) over the matched transfers whose consumer was already waiting when the
   send started (its range began first, so the span is the transfer alone, not a
   late wait call), or, without such transfers, the smallest such span; traces
   without send/receive actions (GPipe, rebuilt 1F1B) take the smallest gap from a
   producer's end to its consumer's start on another rank (a lower bound), applied
   as the ``edge`` model's delay. Where the ranks' clocks were offset by offsets
   known only within a bound (fitted across hosts, :mod:`harness.actions.clocks`) or
   given and shown wrong (they put a receive before its send), a span measured across
   two clocks holds the error of their offset: ``+e`` from rank a to rank b,
   ``-e`` from b to a. Every transfer then takes, per pair of ranks that send both
   ways, the mean of the two directions' fastest transfers (smallest spans over the
   matched transfers), the median over such rank pairs; it does not depend on ``e`` (a round trip is timed on one clock in effect), assuming
   equal transfer times both ways as NTP does (RFC 5905, §8). Per-direction times
   clamped at 0 instead (the earlier rule) made a round trip longer in the replay
   than in the records whenever ``e`` exceeded the transfer time: with
   ``--clock-offsets 0,-3000000`` on the interleaved example the simulated step
   was 78 ms beside a measured 48 ms, and the split's last part -31 ms;
2. **simulated step**: the recovered order played with the fitted costs on the
   harness's analytic timeline (:func:`harness.plan.timeline.simulate`, the ``sim``
   backend's path) under the ``stream`` communication model (sends and receives on
   their own streams, so posting them costs the compute stream nothing);
3. **the difference split** per step, each part a replay of the same order
   (:func:`replay_order`), so that the parts add up to ``measured - simulated``
   exactly:

   * ``jitter_ns``: every job with its own measured duration instead of its stage's
     median (replay ``T_j``), minus the simulated step;
   * ``host_overhead_ns``: additionally each compute job delayed by the host time
     its rank spent since its previous compute job ended before the job's range
     started (posting sends and receives, UNSHARD/RESHARD/REDUCE_GRAD, Python
     between actions): replay ``T_h - T_j``; 0 for rebuilt (Schedule1F1B)
     actions, whose waits and host time cannot be told apart (both land in the next part);
   * ``transfer_wait_ns``: the rest, ``measured - T_h``: waiting on transfers
     beyond the fitted transfer time (and anything else the replay does not model);
   * ``unexplained_ns``: what the parts above cannot hold. Host overhead and
     waiting are never negative: one that comes out below 0 is shown as 0, and its
     (negative) value goes here, so that the four still add up to ``measured -
     simulated``. Jitter alone is signed, and is explained when negative: the
     step's jobs ran shorter than their medians (a fast step).
     The known cause is clock offsets that break causality (``--clock-offsets``
     that put a receive before its send): the fitted transfer time of one
     direction then holds the skew (``receive done - send started`` grows by it)
     while the other direction's is clamped at 0, so the replay waits on
     transfers longer than the measured run could have, and ``measured - T_h``
     goes negative.

**One reference step**: the measured figures shown (step time, bubble, the split)
are those of one real step, the lower median of the imported steps by measured
step time (with 2 steps, the shorter one; with 3, the middle one), never a mean of
two steps; :attr:`Replay.reference_step` names it.

Bubbles are the idle share of total (:mod:`harness.analysis.metrics`): measured from the
records, simulated from the timeline's compute jobs.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.schedule.model import Job

__all__ = ["FittedCost", "Replay", "StepReplay", "fit_cost", "replay", "replay_order"]

_COMPUTE = frozenset({"F", "B", "I", "W", "OPT"})  # OPT: the torch backend marks each stage's optimizer step


@dataclass(frozen=True)
class FittedCost:
    """A cost model (:class:`harness.model.cost.CostModel`) fitted from measured jobs.

    Attributes:
        table: ``(stage, kind) -> ns``: median measured duration of compute jobs.
        transfer_ns: ``"SEND_F"``/``"SEND_B"`` -> ns, the fitted transfer time (also used for
            the matching receives).
        samples: ``(stage, kind) -> number of jobs`` the median is of.
    """

    table: dict[tuple[int, str], int]
    transfer_ns: dict[str, int] = field(default_factory=dict)
    samples: dict[tuple[int, str], int] = field(default_factory=dict)

    def duration_ns(self, job: Job, num_stages: int) -> int:
        """The fitted duration of ``job`` (ns); a send or receive lasts its direction's transfer time.

        Raises:
            KeyError: no measured job of this stage and kind.
        """
        kind = job.kind.value
        if kind in ("SEND_F", "RECV_F"):
            return self.transfer_ns.get("SEND_F", 0)
        if kind in ("SEND_B", "RECV_B"):
            return self.transfer_ns.get("SEND_B", 0)
        return self.table[(job.stage, kind)]

    def flops(self, job: Job, num_stages: int) -> float:
        return 0.0

    def nbytes(self, job: Job, num_stages: int) -> int:
        return 0

    def is_uniform(self, num_stages: int) -> bool:
        return False

    def describe(self) -> dict[str, Any]:
        return {"model": "fitted from the trace (median per stage and kind)",
                "table_ns": [[s, k, ns] for (s, k), ns in sorted(self.table.items())],
                "transfer_ns": dict(self.transfer_ns)}


def fit_cost(imp: Any) -> FittedCost:
    """The :class:`FittedCost` of an import (see module doc, step 1)."""
    durs: dict[tuple[int, str], list[int]] = {}
    for j in imp.records.jobs:
        if j.kind in _COMPUTE:
            durs.setdefault((j.stage, j.kind), []).append(j.end_ns - j.start_ns)
    table = {k: int(statistics.median(v)) for k, v in durs.items()}
    by = {(a.step, a.stage, a.kind, a.microbatch): a for a in imp.actions}
    spans: dict[str, list[tuple[int, bool]]] = {"SEND_F": [], "SEND_B": []}
    fastest: dict[tuple[int, int], int] = {}  # (sender, receiver) -> smallest span
    for a in imp.actions:
        if a.kind not in ("RECV_F", "RECV_B"):
            continue
        peer = a.stage - 1 if a.kind == "RECV_F" else a.stage + 1
        send = by.get((a.step, peer, "SEND_F" if a.kind == "RECV_F" else "SEND_B", a.microbatch))
        consumers = ("F",) if a.kind == "RECV_F" else ("B", "I")
        cons = next((by[k] for c in consumers if (k := (a.step, a.stage, c, a.microbatch)) in by), None)
        if send is None or cons is None:
            continue
        tr = imp.ranks[a.rank]
        got = tr.recv_end.get((a.stage, a.kind, a.microbatch, a.step))
        done = got + imp.clock.offsets_ns[a.rank] - imp.time_base_epoch_ns if got is not None else cons.compute_start_ns
        # the receiver was waiting before the send started: the span is the transfer alone
        spans[send.kind].append((done - send.start_ns, cons.start_ns <= send.start_ns))
        fastest[(send.rank, a.rank)] = min(fastest.get((send.rank, a.rank), done - send.start_ns), done - send.start_ns)
    if not any(spans.values()):  # no send/receive actions (GPipe, rebuilt 1F1B): producer end -> consumer start
        rec = {(j.step, j.stage, j.kind, j.microbatch): j for j in imp.records.jobs}
        for j in imp.records.jobs:
            src = (j.stage - 1, ("F",)) if j.kind == "F" else (j.stage + 1, ("B", "I")) if j.kind in ("B", "I") else None
            if src is None:
                continue
            prod = next((rec[k] for kd in src[1] if (k := (j.step, src[0], kd, j.microbatch)) in rec), None)
            if prod is not None and prod.rank != j.rank:
                spans["SEND_F" if j.kind == "F" else "SEND_B"].append((max(0, j.start_ns - prod.end_ns), False))
    transfer = {}
    for kind, vals in spans.items():
        waited = [v for v, w in vals if w]
        if waited:
            transfer[kind] = int(statistics.median(waited))
        elif vals:
            transfer[kind] = min(v for v, _ in vals)
    trips = [(v + fastest[(b, a)]) // 2 for (a, b), v in fastest.items() if a < b and (b, a) in fastest]
    method = getattr(imp.clock, "method", "shared")
    unsure = method == "fitted" or (method == "given" and getattr(imp.clock, "breaks_causality", False))
    if unsure and trips:
        # clocks offset across ranks by an offset known only within a bound (fitted), or given and shown wrong
        # (they break causality): the spans a -> b hold +e, b -> a -e; the mean of the two directions'
        # fastest transfers does not depend on e (module doc, step 1). Given offsets that keep every pair
        # causal are trusted, as one host's shared clock is.
        both = int(statistics.median(trips))
        transfer = {"SEND_F": both, "SEND_B": both}
    transfer = {k: max(0, v) for k, v in transfer.items()}
    return FittedCost(table, transfer, {k: len(v) for k, v in durs.items()})


def replay_order(plan: Any, durations: list[int], before: list[int] | None = None) -> list[tuple[int, int]]:
    """Play ``plan``'s order with per-job ``durations`` (ns), each job starting no earlier than
    ``before[j]`` ns after its stream's previous job ended (host time), as
    :func:`harness.plan.timeline.simulate` does with one duration per stage and kind.

    Returns:
        Per job ``(start, end)``, ns from the step's start.
    """
    n = plan.num_jobs
    free = [0] * len(plan.stream_names)
    stream = list(plan.stream)
    start, end = [0] * n, [0] * n
    for j in plan.order:
        s = stream[j]
        t = free[s] + (before[j] if before else 0)
        for d in plan.deps[j]:
            t = max(t, end[d])
        for d in plan.start_deps[j]:
            t = max(t, start[d])
        start[j] = t
        end[j] = t + durations[j]
        free[s] = end[j]
    return list(zip(start, end))


def _bubble(plan: Any, times: list[tuple[int, int]], p: int) -> tuple[int, float]:
    """``(makespan, idle share of total)`` of a replayed step (compute jobs of the compute streams)."""
    if not times:
        return 0, 0.0
    t0 = min(a for a, _ in times)
    span = max(b for _, b in times) - t0
    busy = sum(b - a for (a, b), job in zip(times, plan.jobs) if job.kind.value in _COMPUTE)
    return span, (p * span - busy) / (p * span) if span > 0 else 0.0


@dataclass(frozen=True)
class StepReplay:
    """One step, measured beside its replays (ns).

    Attributes:
        step: the step.
        measured_ns: the measured step (first job start to last job end, all ranks).
        jitter_ns, host_overhead_ns, transfer_wait_ns: the split of ``measured - simulated``
            (module doc); the last two ``>= 0``, jitter signed.
        unexplained_ns: the remainder those cannot hold (``<= 0``; module doc); the four add up
            to ``measured - simulated`` exactly.
        bubble: the step's measured idle share of total.
    """

    step: int
    measured_ns: int
    jitter_ns: int
    host_overhead_ns: int
    transfer_wait_ns: int
    unexplained_ns: int = 0
    bubble: float = 0.0


def _split(step: int, measured: int, parts: tuple[int, int, int], bubble: float) -> StepReplay:
    """A :class:`StepReplay`: the waiting and host parts clamped at 0, the negative remainder in
    ``unexplained_ns``; jitter keeps its sign (module doc)."""
    jitter, host, wait = parts
    host_kept, wait_kept = max(0, host), max(0, wait)
    return StepReplay(step, measured, jitter, host_kept, wait_kept, (host - host_kept) + (wait - wait_kept), bubble)


@dataclass(frozen=True)
class Replay:
    """The run beside its schedule.

    Attributes:
        simulated_step_ns: the recovered order with the fitted costs (analytic timeline).
        simulated_bubble: its idle share of total.
        measured_step_ns: the reference step's measured step (ns; module doc: the lower median
            step, a real step).
        measured_step_spread_ns: max - min of the measured steps (0 for one step).
        measured_bubble: the reference step's measured idle share of total.
        difference_ns: the reference step's measured step less the simulated one.
        jitter_ns, host_overhead_ns, transfer_wait_ns, unexplained_ns: the reference step's split
            of the difference (they add up to it; host overhead and waiting ``>= 0``, unexplained
            ``<= 0``, jitter signed).
        steps: per step.
        cost: the fitted cost model's description.
        comm_model: ``stream`` (send/receive jobs: transfers on their own streams) or ``edge``
            (traces without them: the fitted transfer time is a delay on cross-rank dependencies).
        median_step: the reference step (kept under its older name).
        reference_step: the reference step.
    """

    simulated_step_ns: int
    simulated_bubble: float
    measured_step_ns: float
    measured_step_spread_ns: int
    measured_bubble: float
    difference_ns: int
    jitter_ns: int
    host_overhead_ns: int
    transfer_wait_ns: int
    steps: list[StepReplay]
    cost: dict[str, Any]
    comm_model: str
    median_step: int = 0
    reference_step: int = 0
    unexplained_ns: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def replay(imp: Any, plan: Any) -> Replay:
    """Fit, simulate and split (module doc) for an import and the plan of its recovered schedule."""
    from harness.analysis.metrics import compute_metrics
    from harness.plan.delays import edge_delays
    from harness.plan.timeline import simulate

    cost = fit_cost(imp)
    p = imp.records.num_ranks
    has_comm = any(j.kind.is_comm for j in plan.jobs)
    delays = None if has_comm else edge_delays(plan, cost)
    timeline = simulate(plan, cost, delays)
    sim_times = list(zip(timeline.start, timeline.end))
    sim_step, sim_bubble = _bubble(plan, sim_times, p)
    index = {(job.stage, job.kind.value, job.microbatch): i for i, job in enumerate(plan.jobs)}
    metrics = compute_metrics(imp.records)
    per_step: list[StepReplay] = []
    jobs_of: dict[int, list[Any]] = {}
    acts_of: dict[int, list[Any]] = {}
    for j in imp.records.jobs:
        jobs_of.setdefault(j.step, []).append(j)
    for a in imp.actions:
        acts_of.setdefault(a.step, []).append(a)
    for k, step in enumerate(imp.records.steps):
        measured = imp.records.step_end_ns[k] - imp.records.step_start_ns[k]
        dur = list(timeline.duration)
        before = [0] * plan.num_jobs
        for j in jobs_of.get(step, []):
            if (i := index.get((j.stage, j.kind, j.microbatch))) is not None:
                dur[i] = j.end_ns - j.start_ns if j.kind in _COMPUTE else dur[i]
        # host time before each compute job: since its rank's previous compute job ended, until its range started
        acts = sorted(acts_of.get(step, []), key=lambda a: a.start_ns)
        last_end: dict[int, int] = {}
        for a in acts if imp.marking != "inferred" else ():  # rebuilt actions: host time and waits are not told apart
            if a.kind in _COMPUTE and (i := index.get((a.stage, a.kind, a.microbatch))) is not None:
                if a.rank in last_end:
                    before[i] = max(0, a.start_ns - last_end[a.rank])
                last_end[a.rank] = a.end_ns
        if delays is not None:  # edge model: the transfer is a delay on the cross-rank dependency
            dur_edge = dur
            t_j = _edge_span(plan, dur_edge, delays, None)
            t_h = _edge_span(plan, dur_edge, delays, before)
        else:
            t_j = _bubble(plan, replay_order(plan, dur), p)[0]
            t_h = _bubble(plan, replay_order(plan, dur, [b if plan.jobs[i].kind.value in _COMPUTE else 0
                                                         for i, b in enumerate(before)]), p)[0]
        per_step.append(_split(step, measured, (t_j - sim_step, t_h - t_j, measured - t_h),
                               metrics.steps[k].bubble_ratio))
    times = [s.measured_ns for s in per_step]
    med = sorted(per_step, key=lambda s: (s.measured_ns, s.step))[(len(per_step) - 1) // 2]
    return Replay(
        simulated_step_ns=sim_step, simulated_bubble=sim_bubble,
        measured_step_ns=med.measured_ns, measured_step_spread_ns=max(times) - min(times),
        measured_bubble=med.bubble, difference_ns=med.measured_ns - sim_step, median_step=med.step,
        jitter_ns=med.jitter_ns, host_overhead_ns=med.host_overhead_ns, transfer_wait_ns=med.transfer_wait_ns,
        steps=per_step, cost=cost.describe(), comm_model="stream" if has_comm else "edge",
        reference_step=med.step, unexplained_ns=med.unexplained_ns,
    )


def _edge_span(plan: Any, dur: list[int], delays: list[int], before: list[int] | None) -> int:
    """Makespan of ``plan`` with per-job ``dur``, each cross-rank dependency delayed by its producer's
    ``delays`` (the ``edge`` model, :func:`harness.plan.delays.edge_delays`) and host time ``before``
    each job (ns)."""
    n = plan.num_jobs
    rank = list(plan.rank)
    free = [0] * len(plan.stream_names)
    stream = list(plan.stream)
    start, end = [0] * n, [0] * n
    for j in plan.order:
        t = free[stream[j]] + (before[j] if before else 0)
        for d in plan.deps[j]:
            t = max(t, end[d] + (delays[d] if rank[d] != rank[j] else 0))  # the producer's transfer
        for d in plan.start_deps[j]:
            t = max(t, start[d])
        start[j], end[j] = t, t + dur[j]
        free[stream[j]] = end[j]
    return max(end, default=0) - min(start, default=0)

