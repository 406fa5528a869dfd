"""The candidates of a layout search: each (layer counts per stage, recomputation mode per stage) judged
on the exact analytic path a ``sim`` run takes, and the schedules and plans they are judged on.

A candidate's schedule is built (:meth:`harness.case.PipelineCase.compute_schedule`), its communication
model applied (:func:`harness.model.comm.lower`), the plan simulated
(:func:`harness.analysis.analytic.step_time`) and its memory peaks read off that timeline
(:func:`harness.analysis.memory.analytic_memory`), so a :class:`Candidate`'s ``step_ns`` is what
``run_case(candidate.case(...), backend="sim")`` measures. Where the schedule does not depend on the costs
(every builder but a cost-aware one such as ZB-auto, and every comm model but ``blocking``, whose send
placement is timed), one plan serves every candidate, and the process keeps the last few
(:data:`SHARED`); a cost-built schedule is built per candidate, or timed on one shared plan while
:attr:`Candidates.exact` is off. The search itself is :mod:`harness.choose.layout_search`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.analysis.analytic import analyze_plan, step_time
from harness.analysis.assumptions import case_assumptions
from harness.analysis.bubble import decompose
from harness.analysis.memory import analytic_memory
from harness.case import PipelineCase
from harness.choose.layout_dp import StageLines, even_counts, layout_text, stage_lines
from harness.errors import ConfigError
from harness.model.chains import check_cost_for_chains
from harness.model.comm import check_comm_model, lower
from harness.model.recompute import RECOMPUTE
from harness.model.transformer import TransformerCost
from harness.plan.build import build_plan
from harness.plan.graph import Plan
from harness.schedule.model import Schedule
from harness.schedule.registry import builder_info

__all__ = ["LEAST_MEMORY_OPTIONS", "REBUILD_WEIGHT", "REFUSED", "SHARED", "SHARED_PLANS", "Built", "Candidate", "Candidates", "Key"]

#: A candidate's key: layer counts per stage, recomputation mode per stage (stage 0 first).
Key = tuple[tuple[int, ...], tuple[str, ...]]

#: A candidate whose schedule is rebuilt (a cost-aware builder, or ``blocking``'s timed placement) costs
#: about this many times the jobs of one that reuses the plan (measured: ZB-auto at p=8, m=32).
REBUILD_WEIGHT = 10

#: The step (ns) and peak (bytes) of a candidate a cost-built schedule's builder refuses: it ranks after every built one.
REFUSED = 2**62

#: Per cost-built schedule, the options of its least-memory build: where its builder refuses the limit for a
#: candidate (below what one micro-batch needs on some stage), the candidate is built so instead, and shows its
#: peak over the limit (it cannot fit: the least build still holds one micro-batch). ZB-auto: one micro-batch
#: pending per stage at a time (:func:`harness.schedule.zb_auto.zb_auto_schedule`).
LEAST_MEMORY_OPTIONS: dict[str, dict[str, Any]] = {"ZB-auto": {"max_pending": 1}}


@dataclass(frozen=True)
class Candidate:
    """One layout and recomputation setting, as the analytic path predicts it.

    Attributes:
        layout: the stage layout, Megatron-Core syntax (``"Et*7|t*6|...|t*5L"``; ``E``/``L`` only with a vocabulary).
        recompute: one mode for every stage, or one per stage (``p x v``, stage 0 first).
        step_ns: predicted step time (ns): the plan's makespan, what ``sim`` measures.
        bubble: ``sum(idle) / (p x step)`` (the idle share of all ranks' time, arXiv:2104.04473 §2.2.1).
        peak_bytes: the largest memory peak over ranks (bytes: static + live activations).
        peak_bytes_per_rank: each rank's peak (bytes), rank 0 first.
        fits: every rank's peak is within the limit (``True`` without one).
        options: the builder options it was built with where they are not the search's: a cost-built
            schedule's least-memory build (:data:`LEAST_MEMORY_OPTIONS`), where its builder refuses the
            limit for this layout and recomputation; ``None`` otherwise.
    """

    layout: str
    recompute: str | tuple[str, ...]
    step_ns: int
    bubble: float
    peak_bytes: int
    peak_bytes_per_rank: tuple[int, ...]
    fits: bool
    options: dict[str, Any] | None = None

    def cost(self, base: TransformerCost) -> TransformerCost:
        """``base`` with this candidate's layout and recomputation."""
        return replace(base, layout=self.layout, layers_per_stage=None, recompute=self.recompute)

    def case(self, schedule: str, p: int, m: int, v: int, base: TransformerCost, *, options: Mapping[str, Any] | None = None,
             comm_model: str | None = None, memory_limit_bytes: int | None = None) -> PipelineCase:
        """The case that reproduces this candidate: ``run_case(case, backend="sim")`` measures :attr:`step_ns`
        (with :attr:`options` where set, else ``options``)."""
        chosen = self.options if self.options is not None else options
        return PipelineCase(schedule, stages=p, microbatches=m, chunks=v, cost=self.cost(base), options=dict(chosen or {}),
                            memory_limit_bytes=memory_limit_bytes, comm_model=comm_model)

    def to_dict(self) -> dict[str, Any]:
        """The candidate as plain JSON values."""
        return {"layout": self.layout, "recompute": self.recompute if isinstance(self.recompute, str) else list(self.recompute),
                "step_ns": self.step_ns, "bubble": self.bubble, "peak_bytes": self.peak_bytes,
                "peak_bytes_per_rank": list(self.peak_bytes_per_rank), "fits": self.fits}



@dataclass(frozen=True)
class Built:
    """A schedule as built (``source``), with its communication model applied (``lowered``, send/receive jobs
    placed as ``placement`` says), and the plan of that."""

    source: Schedule
    lowered: Schedule
    plan: Plan
    placement: str | None


#: Plans that do not depend on the costs, shared by the searches of one process (a row's layout search, the
#: assumptions of its answer and its seeding rounds build the schedule once): at most :data:`SHARED_PLANS`, the
#: oldest dropped first. Keyed by (schedule, p, m, v, options, comm model, the model without its layout and recomputation).
SHARED: dict[tuple[Any, ...], Built] = {}
SHARED_PLANS = 4


class Candidates:
    """The candidates of one (schedule, p, m, v) layout search: each judged on the exact analytic path (module doc),
    memoised by (layer counts per stage, mode per stage).

    Raises (on construction):
        ConfigError: ``base`` is not a TransformerCost; an unknown schedule or comm model.
    """

    def __init__(self, schedule: str, p: int, m: int, v: int, base: TransformerCost, options: Mapping[str, Any],
                 comm_model: str, limit: int | None) -> None:
        if not isinstance(base, TransformerCost):
            raise ConfigError(f"the layout search takes a TransformerCost (layers, embedding, LM head), got {type(base).__name__}")
        self.schedule, self.p, self.m, self.v = schedule, p, m, v
        self.base, self.options, self.limit = base, dict(options), limit
        self.info = builder_info(schedule)
        self.comm_model = check_comm_model(comm_model)
        self.num_stages = self.info.num_stages(p, v)
        self.vocab = base.vocab_size > 0
        self.even = even_counts(base.num_layers, self.num_stages)
        self.rebuild = self.info.takes_costs or self.comm_model == "blocking"
        #: ``False`` while the local search times a cost-built schedule on the even split's plan
        self.exact = True
        self.plan: Plan | None = None
        #: a cost-built schedule's builds for exact candidates, by (layout, recompute, options)
        self.built: dict[tuple[Any, ...], Built] = {}
        self.chains_checked = False
        #: the model less what the search chooses (a key of :data:`SHARED`)
        self.model = replace(base, layout=None, layers_per_stage=None, recompute="none")
        self.memo: dict[tuple[tuple[int, ...], tuple[str, ...]], Candidate] = {}
        #: candidates timed on the shared plan while ``exact`` is off (a cost-built schedule's local search)
        self.rough: dict[tuple[tuple[int, ...], tuple[str, ...]], Candidate] = {}
        self.jobs_simulated = 0
        #: what a cost-built schedule's builder said of the candidates it refused
        self.refusals: list[str] = []
        self.inflight: list[int] | None = None
        self.busy_of: dict[int, list[int]] = {}  # id(candidate) -> per rank busy ns
        self.uneven_of: dict[int, int] = {}  # id(candidate) -> layers away from the even split
        #: id(candidate) -> layers that recompute, weighted 1 selective, 2 full (RECOMPUTE's order)
        self.redone_of: dict[int, int] = {}

    # -- one candidate ------------------------------------------------------------------------
    def cost_of(self, counts: tuple[int, ...], modes: tuple[str, ...]) -> TransformerCost:
        uniform = modes[0] if len(set(modes)) == 1 else modes
        return replace(self.base, layout=layout_text(counts, self.vocab), layers_per_stage=None, recompute=uniform)

    def case_of(self, cost: TransformerCost, options: Mapping[str, Any] | None = None) -> PipelineCase:
        return PipelineCase(self.schedule, stages=self.p, microbatches=self.m, chunks=self.v, cost=cost,
                            options=self.options if options is None else dict(options), memory_limit_bytes=self.limit,
                            comm_model=self.comm_model)

    def plan_for(self, cost: TransformerCost, options: Mapping[str, Any] | None = None) -> Plan:
        """The plan of ``cost`` (with ``options`` instead of the search's, where given): built once and shared,
        or (``exact`` and a schedule built from the costs) built for ``cost`` itself."""
        if self.plan is not None and not (self.rebuild and self.exact):
            return self.plan
        plan = self.built_for(cost, options).plan
        if self.plan is None:
            self.plan = plan  # the first candidate's (the even split's): the one the local search times on
        return plan

    def built_for(self, cost: TransformerCost, options: Mapping[str, Any] | None = None) -> Built:
        """The schedule of ``cost`` (``options`` as :meth:`plan_for`), lowered and planned: where it does not depend on
        the costs, the one this process last built for the same schedule, sizes, options and comm model
        (:data:`SHARED`); else built for ``cost`` (once per layout, recomputation and options)."""
        chosen = self.options if options is None else dict(options)
        if self.rebuild:
            key: tuple[Any, ...] = (cost.layout, cost.recompute, repr(sorted(chosen.items())))
            cache = self.built
        else:
            key = (self.schedule, self.p, self.m, self.v, repr(sorted(chosen.items())), self.comm_model, self.model)
            cache = SHARED
        found = cache.get(key)
        if found is None:
            case = self.case_of(cost, options)
            source = case.compute_schedule(self.comm_model)
            check_cost_for_chains(cost, source)
            lowered = lower(source, cost, self.comm_model, case.comm, case.comm_placement)
            found = Built(source, lowered, build_plan(lowered), case.comm_placement)
            if cache is SHARED and len(SHARED) >= SHARED_PLANS:
                del SHARED[next(iter(SHARED))]  # the oldest
            cache[key] = found
        elif not self.rebuild and not self.chains_checked:
            check_cost_for_chains(cost, found.source)
        self.chains_checked = True
        return found

    def assumptions(self, counts: tuple[int, ...], modes: tuple[str, ...]) -> list[str]:
        """The assumptions of a candidate's figures (:func:`~harness.analysis.assumptions.case_assumptions`)."""
        cost = self.cost_of(counts, modes)
        built = self.built_for(cost, self.evaluate(counts, modes).options)
        return case_assumptions(built.source, built.lowered, cost, self.comm_model, built.placement)

    def evaluate(self, counts: tuple[int, ...], modes: tuple[str, ...]) -> Candidate:
        key = (counts, modes)
        memo = self.memo if self.exact else self.rough
        if key in memo:
            return memo[key]
        # a stage without transformer layers (the LM head's alone) recomputes nothing whatever its mode: judged, and
        # shown, with the mode of the stage before it, so 'full' on every stage reads 'full', not 'full[0],none[1]'
        plain = tuple(modes[k - 1] if n == 0 and k > 0 else mode for k, (n, mode) in enumerate(zip(counts, modes)))
        if plain != modes:
            memo[key] = self.evaluate(counts, plain)
            return memo[key]
        cost = self.cost_of(counts, modes)
        options: dict[str, Any] | None = None
        try:
            plan = self.plan_for(cost)
        except ConfigError as exc:
            if not self.info.takes_costs:
                raise
            # a builder planning from the costs refuses this candidate (e.g. ZB-auto: the limit is below what one
            # micro-batch needs on some stage); its least-memory build, where it has one, says how far over the limit
            # this candidate is, so the search can walk toward less memory; else it only ranks last
            self.refusals.append(str(exc))
            options = self.least_memory_options()
            try:
                if options is None:
                    raise
                plan = self.plan_for(cost, options)
            except ConfigError:
                cand = Candidate(layout_text(counts, self.vocab), cost.recompute, REFUSED, 1.0, REFUSED, (REFUSED,) * self.p, False)
                memo[key] = cand
                self.busy_of[id(cand)] = [REFUSED] * self.p
                self.uneven_of[id(cand)] = self.redone_of[id(cand)] = 0
                return cand
        figures = step_time(plan, cost, self.comm_model)
        memory = analytic_memory(plan, cost, self.limit, simulated=figures.timeline)  # the peaks of the timeline timed
        self.jobs_simulated += len(plan.rank) * (REBUILD_WEIGHT if self.rebuild and self.exact else 1)
        peaks = tuple(memory.peak_bytes) if memory is not None else (0,) * self.p
        peak = max(peaks, default=0)
        if self.inflight is None:  # the first candidate's: micro-batches each stage holds at once, for the DP's memory
            self.inflight = list(analyze_plan(plan, cost, self.comm_model)[0].peak_inflight_per_stage)
        cand = Candidate(layout_text(counts, self.vocab), cost.recompute, figures.makespan_ns, figures.bubble_ratio, peak, peaks,
                         self.limit is None or peak <= self.limit, options)
        memo[key] = cand
        self.busy_of[id(cand)] = list(figures.busy_ns)
        self.uneven_of[id(cand)] = sum(abs(n - e) for n, e in zip(counts, self.even))
        self.redone_of[id(cand)] = sum(n * RECOMPUTE.index(mode) for n, mode in zip(counts, modes))
        return cand

    def key(self, c: Candidate) -> tuple[int, int, int, int, int]:
        """Fitting first, by step (ns); at equal steps less recomputation (layers that recompute, full counted twice:
        not the busy time, whose per-job rounding to whole ns differs between layouts), then a lower peak (bytes),
        then the layout nearer the even split (layers moved). Not fitting: the lower peak first. The recomputation
        term lets the search walk a plateau of equal steps toward stages that recompute less; the last keeps the
        even split where moving layers gains nothing."""
        work, uneven = self.redone_of[id(c)], self.uneven_of[id(c)]
        return (0, c.step_ns, work, c.peak_bytes, uneven) if c.fits else (1, c.peak_bytes, c.step_ns, work, uneven)

    def linear(self, modes: Sequence[str]) -> StageLines:
        """Each stage's work and bytes as linear functions of its layer count, per mode (:func:`~harness.choose.layout_dp.stage_lines`)."""
        return stage_lines(self.base, self.num_stages, self.vocab, self.info.splits_backward, modes)

    def least_memory_options(self) -> dict[str, Any] | None:
        """The options of this schedule's least-memory build (:data:`LEAST_MEMORY_OPTIONS`), where it has one and
        the search's options do not already bound its memory; else ``None``."""
        least = LEAST_MEMORY_OPTIONS.get(self.schedule)
        if least is None or self.limit is None or any(k in self.options for k in least):
            return None
        return {**self.options, **least}

    def decomposition(self, counts: tuple[int, ...], modes: tuple[str, ...]) -> dict[str, Any]:
        cost = self.cost_of(counts, modes)
        cand = self.evaluate(counts, modes)
        plan = self.plan_for(cost, cand.options)
        step = cand.step_ns
        return decompose(step, plan, cost, makespan_ns=None if self.comm_model == "edge" else step).to_dict()
