"""How far a timed case's figures can be trusted: the ``unstable`` and ``contended`` flags, and fidelity.

A flag is a one-line reason shown in the pytest summary, the report's overview
and results.json (pyperf's "the benchmark may be unstable" warnings are the
model). ``compare`` does not gate a flagged case unless ``--strict``: its
change says more about the machine than about the schedule.

* **unstable**: the adaptive window's time budget or step cap ran out before
  the relative standard error of the median reached its target, or the step
  times' IQR is more than :data:`UNSTABLE_IQR` of their median.
* **contended**: the case needed more cores than it had: more streams running
  real work (the ``matmul`` workload) than usable cores, or other processes
  using the cores the case needed (their CPU time from ``/proc/stat``, see
  :mod:`harness.run.environment`; the 1-minute load average where that is not
  readable). The load average alone is not used on Linux: it counts the
  case's own threads, and lags the previous case by a minute.

**Fidelity** is the measured median step against the cost model's exact step
(the ``sim`` figure of the same plan) on a backend whose jobs last their
cost-model durations (``cpu/sleep``, ``cuda/spin``), with the CI of the median
carried over: ``(median / predicted - 1)`` in ``[ci_low / predicted - 1,
ci_high / predicted - 1]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.model.cost import CostModel
from harness.plan.graph import Plan
from harness.records import RunRecords, WindowOutcome
from harness.run.environment import CaseUsage
from harness.stats import SampleStats

__all__ = ["UNSTABLE_IQR", "Flag", "fidelity", "stability_flags"]

#: An IQR above this share of the median flags a case unstable.
UNSTABLE_IQR = 0.10
#: Other processes' CPU use (cores) below which a case is never called contended
#: (a shell, an editor, the kernel's own threads).
_OTHER_NOISE_CORES = 0.5
#: The share of the usable cores above which the machine counts as saturated.
_SATURATED = 0.9


@dataclass(frozen=True)
class Flag:
    """A reason not to trust a case's figures as they stand.

    Attributes:
        kind: ``"unstable"`` or ``"contended"``.
        reason: one line for people, with the figures that tripped it.
    """

    kind: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "reason": self.reason}


def stability_flags(
    step_stats: SampleStats,
    window: WindowOutcome | None,
    usage: CaseUsage | None = None,
    busy_streams: int = 0,
) -> list[Flag]:
    """The flags of one timed case (none for ``sim``: call it for timed backends only).

    Args:
        step_stats: the case's step-time summary (ns).
        window: how its profiling window ended.
        usage: the machine's load during the case (:class:`~harness.run.environment.UsageProbe`).
        busy_streams: streams that keep a core busy while they work (``cpu/matmul``
            compute streams); sleeping or GPU streams do not.
    """
    flags: list[Flag] = []
    if step_stats.n == 1:
        flags.append(Flag("unstable", "one recorded step: how much the step time varies is unknown, and a timed "
                                      "backend's steps vary (record more steps, e.g. --steps 1:6, or leave the window adaptive)"))
    if window is not None and window.target_missed:
        # the interval the summary's CI column shows (order statistics), not a ± of one standard error
        ci = ""
        if step_stats.n > 1 and step_stats.median:
            level = f" (its real coverage {100 * step_stats.ci_level:.0f}%)" if step_stats.ci_level_differs else ""
            ci = f"; the median's 95% confidence interval reaches ±{100 * step_stats.ci_reach:.1f}%{level}"
        flags.append(Flag("unstable", f"{window.describe()}{ci}"))
    if step_stats.n > 1 and step_stats.iqr_over_median > UNSTABLE_IQR:
        flags.append(Flag("unstable", f"step times spread widely: IQR {step_stats.iqr / 1e6:.3f} ms is "
                                      f"{100 * step_stats.iqr_over_median:.0f}% of the median (flagged above {100 * UNSTABLE_IQR:.0f}%)"))
    if usage is not None:
        cores = usage.cores
        if busy_streams > cores:
            flags.append(Flag("contended", f"{busy_streams} streams run real work on {cores} usable core(s): they share cores, "
                                           "so the figures measure the machine's scheduling as much as the pipeline"))
        need = max(float(busy_streams), usage.own_cores)
        if usage.other_cores is not None:
            if usage.other_cores >= _OTHER_NOISE_CORES and usage.other_cores + need > _SATURATED * cores:
                load = "" if usage.loadavg_before is None else f", load average {usage.loadavg_before:g} → {usage.loadavg_after:g}"
                flags.append(Flag("contended", f"other processes used {usage.other_cores:.1f} of {cores} core(s) during the case{load}"))
        elif usage.loadavg_before is not None and max(usage.loadavg_before, usage.loadavg_after or 0) > cores:
            flags.append(Flag("contended", f"load average {usage.loadavg_before:g} → {usage.loadavg_after:g} is above "
                                           f"the {cores} usable core(s)"))
    return flags


def fidelity(step_stats: SampleStats, predicted_step_ns: int) -> dict[str, Any]:
    """Measured median step against the cost model's exact step (see module doc).

    Args:
        step_stats: the case's step-time summary (ns).
        predicted_step_ns: the exact step time of the same plan (``sim``), ns.

    Returns:
        ``{"predicted_step_ns", "change", "ci_low", "ci_high", "ci_level"}``, changes as
        fractions (0.02 = measured 2 % longer than predicted); from one recorded step no
        interval is known: ``ci_low``, ``ci_high`` and ``ci_level`` are then ``None``.

    Raises:
        ValueError: ``predicted_step_ns`` is not positive.
    """
    if predicted_step_ns <= 0:
        raise ValueError(f"predicted step must be positive, got {predicted_step_ns} ns")
    known = step_stats.n > 1  # one step: a zero-width "interval" of coverage 0 would read as certainty
    return {
        "predicted_step_ns": int(predicted_step_ns),
        "change": step_stats.median / predicted_step_ns - 1,
        "ci_low": step_stats.ci_low / predicted_step_ns - 1 if known else None,
        "ci_high": step_stats.ci_high / predicted_step_ns - 1 if known else None,
        "ci_level": step_stats.ci_level if known else None,
    }


#: On the cpu backend a dependency between streams costs a thread hand-off of
#: roughly 50-100 µs; jobs shorter than this (ns) make that overhead show.
CPU_SHORTEST_TRUSTED_NS = 1_000_000

#: On the cpu backend's timed workload, a median step this much longer than the
#: cost model's exact step time (the sim figure) is reported.
CPU_STEP_STRETCH_WARN = 0.10

def trust_warnings(records: RunRecords, predicted_step_ns: int | None = None) -> list[str]:
    """Notes on figures the backend cannot measure well, on ``cpu``/``sleep``: jobs
    shorter than :data:`CPU_SHORTEST_TRUSTED_NS` (thread hand-offs inflate idle time),
    or else a median step more than :data:`CPU_STEP_STRETCH_WARN` longer than
    ``predicted_step_ns`` (the cost model's exact step time, ns), which happens when
    more streams than cores compete for the CPU."""
    import os
    import statistics

    out: list[str] = []
    if records.backend in ("cpu", "mpi") and records.device.get("workload") == "sleep":  # an mpi rank runs a cpu device
        cols = records.columns
        durations = sorted((cols.end_ns - cols.start_ns)[cols.kind_mask(("F", "B", "I", "W"))].tolist())
        steps = [b - a for a, b in zip(records.step_start_ns, records.step_end_ns)]
        if durations and durations[len(durations) // 2] < CPU_SHORTEST_TRUSTED_NS:
            out.append(
                f"median job {durations[len(durations) // 2] / 1000:.0f} µs: on the {records.backend} backend each cross-stage "
                "dependency costs a thread hand-off of ~50-100 µs, which inflates step time and bubble for jobs "
                "under 1 ms; use --backend=sim for exact figures"
            )
        elif predicted_step_ns and steps and statistics.median(steps) > (1 + CPU_STEP_STRETCH_WARN) * predicted_step_ns:
            median = statistics.median(steps)  # (short jobs explain a stretch already: one note, not two)
            cores = os.cpu_count() or 1
            crowd = (f"{len(records.streams)} streams share {cores} core(s): the threads that finish each job's sleep wait "
                     "for a core, so jobs and hand-offs stretch; " if len(records.streams) > cores else "")
            out.append(
                f"median step {median / 1e6:.3f} ms is {median / predicted_step_ns - 1:.0%} longer than the "
                f"{predicted_step_ns / 1e6:.3f} ms the cost model gives for this schedule: {crowd}"
                f"the {records.backend} backend's figures are host-timing estimates"
                + (" and include real transfers, which the cost model charges only as its p2p terms" if records.backend == "mpi" else "")
                + "; use --backend=sim for exact ones"
            )
    return out

#: Backend workloads whose jobs last their cost-model durations, so a run should match ``sim``.
TIMED_WORKLOADS = ("sleep", "spin")

def predicted_step_ns(plan: Plan, cost: CostModel, records: RunRecords, delays: list[int] | None = None) -> int | None:
    """The exact step time (ns) of ``plan`` under ``cost``, where the run should match it (a timed
    backend whose jobs last their durations); ``None`` elsewhere. ``delays``: the ``edge`` model's
    transfer delays per job (:func:`harness.plan.delays.edge_delays`), ns."""
    if records.backend == "sim" or records.device.get("workload") not in TIMED_WORKLOADS:
        return None
    from harness.plan.timeline import simulate

    return simulate(plan, cost, delays).makespan_ns
