"""What one case produced: its schedule, plan, run records and every figure derived from them.

The data the reports (:mod:`harness.report`) and the terminal summary read; made by
:func:`harness.runner.run_case` for a run and by the importers for another tool's records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.analysis.bubble import BubbleDecomposition
from harness.analysis.critical_path import CriticalPath, RankWaiting
from harness.analysis.memory import MemoryProfile, format_bytes
from harness.analysis.metrics import RunMetrics
from harness.plan.graph import Plan
from harness.records import RunRecords
from harness.run.environment import CaseUsage
from harness.run.stability import Flag
from harness.schedule.model import Schedule

__all__ = ["CaseResult"]


@dataclass
class CaseResult:
    """Everything one case produced.

    Attributes:
        case_id: unique id (the pytest node id for cases run by pytest).
        label: short human label (``"1F1B p=4 m=8"``).
        schedule: the schedule that ran (with comm/OPT jobs if added).
        records: the timed jobs.
        metrics: measured figures.
        theory: closed-form figures where known (``bubble_ratio``,
            ``makespan_ns``, ``peak_inflight``), else empty.
        cost: the cost model's description.
        backend_reason: why this backend ran (e.g. the auto fallback).
        plan: the validated plan that ran (dependencies for reports).
        outcome: the pytest outcome of the test that ran the case
            (``"passed"``, ``"failed"``, ``"error"``, ``"skipped"``), or ``None``.
        warnings: notes on how far to trust the figures (e.g. jobs too short
            for the backend's timing), for the summary and the report.
        flags: ``unstable`` / ``contended`` flags with their reasons
            (:mod:`harness.run.stability`); empty for ``sim`` and stable runs.
        usage: how busy the machine was during the run (:mod:`harness.run.environment`).
        fidelity: measured median step against the cost model's exact step, with
            the median's CI (:func:`harness.run.stability.fidelity`), on backends whose
            jobs last their cost-model durations; else ``None``.
        memory: bytes held per rank over the run and their peaks
            (:mod:`harness.analysis.memory`), where the cost model models memory; else ``None``.
        decomposition: the median step split into ideal, imbalance, recomputation,
            communication and schedule bubble (:mod:`harness.analysis.bubble`).
        cost_model: the cost model itself (``cost`` is its description).
        critical_path: the chain of jobs that fixes the median step's length
            (:mod:`harness.analysis.critical_path`).
        waiting: per rank, the median step's idle time split by what it waited for.
        comm_model: the communication model the case ran under (:mod:`harness.model.comm`).
        options: the case's schedule-builder options with a scalar value (``{"overlap": False}``),
            for results and reports.
        assumptions: one short sentence per modelling assumption that moves the figures (overlap model,
            TP/SP degree, attention FLOPs, recomputation cost, comm model and placement, per-chunk
            durations; :mod:`harness.analysis.assumptions`); ``None`` where not recorded (older results,
            imports of other tools' records).
    """

    case_id: str
    label: str
    schedule: Schedule
    records: RunRecords
    metrics: RunMetrics
    theory: dict[str, Any] = field(default_factory=dict)
    cost: dict[str, Any] = field(default_factory=dict)
    backend_reason: str = ""
    plan: Plan | None = None
    outcome: str | None = None
    warnings: list[str] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    usage: CaseUsage | None = None
    fidelity: dict[str, Any] | None = None
    comm_model: str = "stream"
    memory: MemoryProfile | None = None
    decomposition: BubbleDecomposition | None = None
    cost_model: Any = field(default=None, repr=False)
    critical_path: CriticalPath | None = None
    waiting: list[RankWaiting] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    assumptions: list[str] | None = None

    @property
    def does_not_fit(self) -> str | None:
        """A one-line reason when the case's peak memory is over its ``memory_limit_bytes``, else ``None``."""
        mem = self.memory
        if mem is None or mem.limit_bytes is None or mem.fits:
            return None
        over = mem.over_limit()
        worst = max(over, key=lambda r: mem.peak_bytes[r])
        excess = mem.peak_bytes[worst] - mem.limit_bytes
        others = f" ({len(over)} of {len(mem.peak_bytes)} ranks over it)" if len(over) > 1 else ""
        return (f"rank {worst} peaks at {format_bytes(mem.peak_bytes[worst])}, {format_bytes(excess)} ({excess:,} bytes) above the "
                f"{format_bytes(mem.limit_bytes)} limit per rank{others}")

    @property
    def num_ranks(self) -> int:
        return self.schedule.num_ranks

    @property
    def num_microbatches(self) -> int:
        return self.schedule.num_microbatches

    @property
    def chunks(self) -> int:
        return self.schedule.chunks_per_rank
