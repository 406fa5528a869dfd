"""Layout and recomputation search: which layers each stage holds, and which stages recompute.

For one schedule at one size (``p`` ranks, ``m`` micro-batches, ``v`` chunks) and a
:class:`~harness.model.transformer.TransformerCost`, :func:`search_layout` finds the stage layout (a
Megatron-Core layout string, :mod:`harness.model.layout`) and the recomputation mode of every stage
(``none``, ``selective`` or ``full``, :mod:`harness.model.recompute`) that give the shortest predicted
step time (ns) whose memory peak (bytes, every rank) fits the limit.

Every candidate is judged by the exact analytic path a ``sim`` run takes: the case's schedule is
built, its communication model applied (:func:`harness.model.comm.lower`), the plan simulated
(:func:`harness.analysis.analytic.analyze`) and its memory peaks computed
(:func:`harness.analysis.memory.analytic_memory`), so a candidate's ``step_ns`` is what
``run_case(candidate.case(...), backend="sim")`` measures. Where the schedule does not depend on
the costs (every builder but a cost-aware one such as ZB-auto, and every comm model but
``blocking``, whose send placement is timed), one plan serves every candidate and only the
durations change.

The search (the plan is a sequence of stages, each holding a contiguous run of layers):

1. **Per-stage models.** Two probes (every stage holding one layer, then two) give each stage's work
   per micro-batch (ns: F + B, or F + I + W where the schedule splits the backward), static bytes and
   activation bytes per micro-batch as exact linear functions of its layer count, per mode.
2. **Exact DP on the bottleneck** (the linear-partition DP; the same objective as SAPP's
   per-stage balance in mindformers ``toolkit/pipeline_balance``): the split and per-stage modes
   that minimise the busiest stage's work, each stage's memory estimate (static + its peak
   in-flight micro-batches x activations) within the limit. Run once with modes mixed and once
   per uniform mode.
3. **Local search on the simulator**, first with each recomputation mode on every stage (one-layer moves
   from the even split and that mode's DP answer: what ``recompute=MODE`` finds), then from the best of
   all those starts with modes mixed, so searching the modes never ends behind one mode alone: move one layer
   between neighbouring stages, or change one stage's mode, keeping a move when the simulated
   key improves (fitting first, then step time; not fitting: lower peak first). Stages of the
   busiest rank (or the ranks over the limit) are tried first. The search stops at a local
   optimum or when its budget of simulated jobs is spent (:data:`JOB_BUDGET`).
4. **Exhaustive** when the space (splits x modes) is at most ``exhaustive_limit`` candidates:
   every one is simulated and the result is proven optimal.

:func:`reseed_layout` starts the same local search from other answers (the chooser's second pass gives
each row the answers of the other rows, :mod:`harness.choose.seeding`). The per-stage models and the DP
are in :mod:`harness.choose.layout_dp`.

A lower bound (ns) comes with the answer: no layout can beat ``m x max(total work / p, the DP's
busiest stage without recomputation)``, since every rank runs all ``m`` micro-batches of its
stages and the total work does not depend on the layout (recomputation only adds to it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from harness.analysis.analytic import analyze_plan, step_time
from harness.analysis.assumptions import case_assumptions
from harness.analysis.bubble import decompose
from harness.analysis.memory import analytic_memory
from harness.case import PipelineCase
from harness.choose.layout_dp import (
    StageLines,
    bottleneck_dp,
    compositions,
    even_counts,
    layout_text,
    space_size,
    stage_lines,
    stage_lows,
    too_few_layers,
)
from harness.errors import ConfigError
from harness.model.chains import check_cost_for_chains
from harness.model.comm import check_comm_model, lower
from harness.model.layout import parse_layout
from harness.model.recompute import RECOMPUTE
from harness.model.transformer import TransformerCost
from harness.plan.build import build_plan
from harness.plan.graph import Plan
from harness.schedule.model import Schedule
from harness.schedule.registry import builder_info

__all__ = ["EVEN_BEST", "EVEN_NONE", "GIVEN_BEST", "GIVEN_NONE", "JOB_BUDGET", "LEAST_MEMORY_OPTIONS", "Candidate", "LayoutChoice",
           "even_counts", "layout_text", "reseed_layout", "search_layout"]

#: Simulated jobs the local search may spend on one (schedule, p, m, v): about 2-3 s on one core.
JOB_BUDGET = 600_000
#: The budget of a reseeded search (:func:`reseed_layout`): it starts from answers already searched.
RESEED_BUDGET = JOB_BUDGET // 4
#: A candidate whose schedule is rebuilt (a cost-aware builder, or ``blocking``'s timed placement) costs
#: about this many times the jobs of one that reuses the plan (measured: ZB-auto at p=8, m=32).
REBUILD_WEIGHT = 10
#: The local search simulates at least this many candidates, whatever their size.
MIN_EVALUATIONS = 12
#: A space of at most this many candidates (splits x modes) is searched exhaustively.
EXHAUSTIVE_LIMIT = 256

#: A cost-built schedule's local search is timed on one shared plan; this many of its best are then rebuilt exactly.
FINALISTS = 3

#: The step (ns) and peak (bytes) of a candidate a cost-built schedule's builder refuses: it ranks after every built one.
REFUSED = 2**62

#: Per cost-built schedule, the options of its least-memory build: where its builder refuses the limit for a
#: candidate (below what one micro-batch needs on some stage), the candidate is built so instead, and shows its
#: peak over the limit (it cannot fit: the least build still holds one micro-batch). ZB-auto: one micro-batch
#: pending per stage at a time (:func:`harness.schedule.zb_auto.zb_auto_schedule`).
LEAST_MEMORY_OPTIONS: dict[str, dict[str, Any]] = {"ZB-auto": {"max_pending": 1}}

#: Names of the two baselines shown beside the answer, as mindformers' SAPP prints its naive plan.
EVEN_NONE = "even split, no recomputation"
EVEN_BEST = "even split, best uniform recomputation"
#: Their names where the layout is given (``layout`` a layout string): the given split, not the even one.
GIVEN_NONE = "given layout, no recomputation"
GIVEN_BEST = "given layout, best uniform recomputation"


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
class LayoutChoice:
    """What :func:`search_layout` found.

    Attributes:
        best: the fastest candidate that fits; where none fits, the one with the lowest peak.
        baselines: :data:`EVEN_NONE` and :data:`EVEN_BEST` (the even split without recomputation, and with the best
            uniform mode); where the layout is given, :data:`GIVEN_NONE` and :data:`GIVEN_BEST` (the given split
            so). A baseline a cost-built schedule's builder refuses (ZB-auto under a limit it cannot meet) is left out.
        evaluated: candidates simulated.
        lower_bound_ns: no layout or recomputation can give a shorter step (ns).
        proven_optimal: ``best`` is optimal: every candidate was simulated, or it meets the lower bound.
        method: how it was found, in words.
        decomposition: ``best``'s step decomposed (:class:`~harness.analysis.bubble.BubbleDecomposition`, as a dict).
        assumptions: what ``best``'s figures assume, in sentences (:func:`~harness.analysis.assumptions.case_assumptions`).
    """

    best: Candidate
    baselines: dict[str, Candidate]
    evaluated: int
    lower_bound_ns: int
    proven_optimal: bool
    method: str
    decomposition: dict[str, Any] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Built:
    """A schedule as built (``source``), with its communication model applied (``lowered``, send/receive jobs
    placed as ``placement`` says), and the plan of that."""

    source: Schedule
    lowered: Schedule
    plan: Plan
    placement: str | None


#: Plans that do not depend on the costs, shared by the searches of one process (a row's layout search, the
#: assumptions of its answer and its seeding rounds build the schedule once): at most :data:`SHARED_PLANS`, the
#: oldest dropped first. Keyed by (schedule, p, m, v, options, comm model, the model without its layout and recomputation).
_SHARED: dict[tuple[Any, ...], _Built] = {}
SHARED_PLANS = 4


class _Search:
    """One (schedule, p, m, v): the candidates simulated, memoised by (counts, modes)."""

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
        self.built: dict[tuple[Any, ...], _Built] = {}
        self.chains_checked = False
        #: the model less what the search chooses (a key of :data:`_SHARED`)
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

    def built_for(self, cost: TransformerCost, options: Mapping[str, Any] | None = None) -> _Built:
        """The schedule of ``cost`` (``options`` as :meth:`plan_for`), lowered and planned: where it does not depend on
        the costs, the one this process last built for the same schedule, sizes, options and comm model
        (:data:`_SHARED`); else built for ``cost`` (once per layout, recomputation and options)."""
        chosen = self.options if options is None else dict(options)
        if self.rebuild:
            key: tuple[Any, ...] = (cost.layout, cost.recompute, repr(sorted(chosen.items())))
            cache = self.built
        else:
            key = (self.schedule, self.p, self.m, self.v, repr(sorted(chosen.items())), self.comm_model, self.model)
            cache = _SHARED
        found = cache.get(key)
        if found is None:
            case = self.case_of(cost, options)
            source = case.compute_schedule(self.comm_model)
            check_cost_for_chains(cost, source)
            lowered = lower(source, cost, self.comm_model, case.comm, case.comm_placement)
            found = _Built(source, lowered, build_plan(lowered), case.comm_placement)
            if cache is _SHARED and len(_SHARED) >= SHARED_PLANS:
                del _SHARED[next(iter(_SHARED))]  # the oldest
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

def search_layout(
    schedule: str, p: int, m: int, v: int, base: TransformerCost, *, options: Mapping[str, Any] | None = None,
    comm_model: str = "stream", memory_limit_bytes: int | None = None, recompute: str = "search", layout: str = "search",
    exhaustive_limit: int = EXHAUSTIVE_LIMIT, job_budget: int = JOB_BUDGET,
) -> LayoutChoice:
    """The layout and per-stage recomputation of ``base`` with the shortest predicted step that fits.

    Args:
        schedule: a registered schedule name (``"ZB-H2"``).
        p, m, v: pipeline ranks, micro-batches per step, chunks (virtual stages) per rank.
        base: the model; its ``layout``, ``layers_per_stage`` and ``recompute`` are what is searched, so they are ignored.
        options: the builder's options (as a case's ``options``).
        comm_model: the communication model (:mod:`harness.model.comm`).
        memory_limit_bytes: device memory per rank (bytes); ``None`` searches the step time alone.
        recompute: ``"search"`` (each stage none, selective or full), or one mode for every stage.
        layout: ``"search"``, ``"even"`` (the even split: only the recomputation is searched) or a
            Megatron-Core layout string (kept as given).
        exhaustive_limit: a space of at most this many candidates is searched exhaustively.
        job_budget: simulated jobs the local search may spend (:data:`JOB_BUDGET`), half on the uniform modes' searches where
            the modes are searched.

    Returns:
        A :class:`LayoutChoice`; its ``best`` reproduces on ``sim`` through :meth:`Candidate.case`.

    Raises:
        ConfigError: the schedule refuses these sizes or options (the builder's own words), fewer
            layers than stages, an unknown ``recompute`` or ``layout`` choice, a layout string that
            does not parse or does not fit the stages, or a cost model that is not a TransformerCost.
        ScheduleError: the schedule deadlocks.
    """
    search = _Search(schedule, p, m, v, base, options or {}, comm_model, memory_limit_bytes)
    s, total = search.num_stages, base.num_layers
    modes = _modes(recompute, base)
    lows = _lows(search)
    fixed: tuple[int, ...] | None = None
    if layout not in ("search", "even"):
        parsed = parse_layout(layout, s, total)
        fixed = parsed.layers
    even = fixed or search.even
    baselines_raw = {mode: search.evaluate(even, (mode,) * s) for mode in modes}
    even_best = min(baselines_raw.values(), key=search.key)
    none = baselines_raw["none"] if "none" in baselines_raw else search.evaluate(even, ("none",) * s)
    # a baseline the builder refuses (built only as its least-memory build, or not at all) is left out
    names = (EVEN_NONE, EVEN_BEST) if fixed is None else (GIVEN_NONE, GIVEN_BEST)
    baselines = {name: c for name, c in zip(names, (none, even_best)) if c.step_ns != REFUSED and c.options is None}
    lin = search.linear(tuple(dict.fromkeys(("none", *modes))))
    stages_per_rank = max(1, s // p)
    # the lower bound: total work over p ranks, and the busiest stage at its least (no recomputation)
    total_work = sum(StageLines.at(lin.work["none"][k], n) for k, n in enumerate(even))
    dp_free = bottleneck_dp(lin, lows, total, ("none",), None, None, stages_per_rank) if fixed is None else None
    per_mb = max(math.ceil(total_work / p), dp_free[0] if dp_free else max(StageLines.at(lin.work["none"][k], n) for k, n in enumerate(even)))
    slack = 4 * s  # rounding of each job's duration to whole ns
    lower_bound = max(0, m * (per_mb - slack))
    starts: list[tuple[tuple[int, ...], tuple[str, ...]]] = [(even, (mode,) * s) for mode in modes]
    space = space_size(total, lows, len(modes)) if fixed is None and layout == "search" else len(modes) ** s
    if space * (REBUILD_WEIGHT if search.rebuild else 1) <= exhaustive_limit:
        splits = list(compositions(total, lows)) if fixed is None and layout == "search" else [even]
        for counts in splits:
            for combo in itertools.product(modes, repeat=s):
                search.evaluate(tuple(counts), combo)
        best_key = min((k for k in search.memo if set(k[1]) <= set(modes)), key=lambda k: search.key(search.memo[k]))
        method = f"exhaustive: every one of {len(search.memo)} candidates ({len(splits)} split(s) x {len(modes)}^{s} mode choices) simulated"
        return _choice(search, best_key, baselines, lower_bound, True, method)
    moved = layout == "search" and fixed is None
    dp_starts: dict[tuple[str, ...], tuple[tuple[int, ...], tuple[str, ...]]] = {}
    if moved:
        for mix in (modes, *((mode,) for mode in modes)):
            found = bottleneck_dp(lin, lows, total, mix, search.inflight, memory_limit_bytes, stages_per_rank)
            if found is not None:
                dp_starts[mix] = (found[1], found[2])
                starts.append((found[1], found[2]))
    for counts, combo in starts:
        search.evaluate(counts, combo)
    if search.plan is None:  # a cost-built schedule's builder refused every start: its own words
        raise ConfigError(search.refusals[0])
    if len(modes) > 1:
        # each uniform mode's own search first (what recompute=MODE finds), its answer a start of the mixed one: the
        # local search over mixed modes can stop at a local optimum that a uniform mode's search passes
        # half the budget to these, shared alike; the mixed search the other half (so the whole costs what one
        # search did): where a uniform search meets its local optimum within its share, as on every size checked, the
        # answer is never behind --recompute MODE's, whose search has the whole budget
        for mode in modes:
            uniform = [(even, (mode,) * s)] + ([dp_starts[(mode,)]] if (mode,) in dp_starts else [])
            starts.append(_uniform_search(search, uniform, mode, lows, moved, total, exhaustive_limit,
                                          job_budget // (2 * len(modes))))
        job_budget //= 2
    current, improved, rough = _descend(search, starts, modes, lows, moved, job_budget)
    best = search.memo[current]
    proven = best.fits and best.step_ns <= lower_bound
    method = ("DP on the busiest stage's work (exact for the per-stage balance), then local search on the simulated step "
              f"(one-layer moves{' and one-stage mode changes' if len(modes) > 1 else ''}): " + _descent_text(search, rough, improved))
    return _choice(search, current, baselines, lower_bound, proven, method)


def _uniform_search(search: _Search, starts: Sequence[tuple[tuple[int, ...], tuple[str, ...]]], mode: str, lows: Sequence[int],
                    moved: bool, total: int, exhaustive_limit: int, job_budget: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The best layout with ``mode`` on every stage, found as :func:`search_layout` with ``recompute=mode`` finds it:
    every split where that space is small (``exhaustive_limit``), else the local search (one-layer moves) from
    ``starts`` (the even split and the DP's answer for that mode). Returns its key, simulated, in ``search.memo``."""
    s = search.num_stages
    if moved and space_size(total, lows, 1) * (REBUILD_WEIGHT if search.rebuild else 1) <= exhaustive_limit:
        for counts in compositions(total, lows):
            search.evaluate(tuple(counts), (mode,) * s)
        return min((k for k in search.memo if set(k[1]) == {mode}), key=lambda k: search.key(search.memo[k]))
    for counts, combo in starts:
        search.evaluate(counts, combo)
    return _descend(search, starts, (mode,), lows, moved, job_budget)[0]


def _modes(recompute: str, base: TransformerCost) -> tuple[str, ...]:
    """The recomputation modes a stage may take: every one (``search``; ``selective`` not with flash attention, which
    stores no attention scores to save), or the one given.

    Raises:
        ConfigError: an unknown choice.
    """
    if recompute == "search":
        return tuple(r for r in RECOMPUTE if not (r == "selective" and base.flash_attention))
    if recompute in RECOMPUTE:
        return (recompute,)
    raise ConfigError(f"recompute must be 'search' or one of {', '.join(RECOMPUTE)}, got {recompute!r}")


def _lows(search: _Search) -> tuple[int, ...]:
    """The fewest transformer layers each stage may hold: one, and none on the last stage where it holds the LM head.

    Raises:
        ConfigError: fewer layers than that.
    """
    reason = too_few_layers(search.base.num_layers, search.vocab, search.p, search.num_stages)
    if reason is not None:
        raise ConfigError(reason)
    return stage_lows(search.num_stages, search.vocab)


def _descend(search: _Search, starts: Sequence[tuple[tuple[int, ...], tuple[str, ...]]], modes: Sequence[str], lows: Sequence[int],
             moved_layers: bool, job_budget: int) -> tuple[tuple[tuple[int, ...], tuple[str, ...]], bool, int]:
    """The local search from the best of ``starts`` (all simulated exactly already): one-layer moves (where
    ``moved_layers``) and one-stage mode changes while the key improves, within ``job_budget`` simulated jobs.
    A schedule built from the costs is timed on the first candidate's plan, and its best :data:`FINALISTS`
    rebuilt exactly.

    Returns:
        ``(best key, stopped at the budget, candidates timed on the shared plan)``; the best is in ``search.memo``.
    """
    current = min(starts, key=lambda k: search.key(search.memo[k]))
    jobs_per_eval = max(1, search.jobs_simulated // max(1, len(search.memo)))
    if search.rebuild:  # time the moves on the first candidate's plan; rebuild only the finalists
        search.exact = False
        jobs_per_eval = max(1, len(search.plan.rank) if search.plan is not None else jobs_per_eval)
        for start_key in starts:
            search.evaluate(*start_key)
    memo = search.memo if search.exact else search.rough
    # the budget counts the candidates simulated before (the starts): a descent after others in the same search (the
    # uniform modes' before the mixed one) gets its own budget, less what the starts took
    max_evals = len(memo) + max(MIN_EVALUATIONS, job_budget // jobs_per_eval - len(starts))
    improved = True
    while improved and len(memo) < max_evals:
        improved = False
        for move in _moves(search, memo, current, modes, lows, moved_layers):
            if len(memo) >= max_evals:
                break
            if search.key(search.evaluate(*move)) < search.key(memo[current]):
                current = move
                improved = True
                break
    rough = len(search.rough)
    if not search.exact:
        finalists = sorted(search.rough, key=lambda k: search.key(search.rough[k]))[:FINALISTS]
        search.exact = True
        for k in finalists:
            search.evaluate(*k)
        current = min((k for k in search.memo if set(k[1]) <= set(modes)), key=lambda k: search.key(search.memo[k]))
    return current, improved, rough


def _descent_text(search: _Search, rough: int, improved: bool) -> str:
    return ((f"{rough} candidates timed on one shared schedule, the best {FINALISTS} rebuilt for their own costs and "
             f"{len(search.memo)} simulated exactly, " if rough else f"{len(search.memo)} candidates simulated, ")
            + ("stopped at its budget" if improved else "stopped at a local optimum"))


def reseed_layout(
    schedule: str, p: int, m: int, v: int, base: TransformerCost, *, current: tuple[str, str | Sequence[str]],
    seeds: Sequence[tuple[str, str | Sequence[str]]], options: Mapping[str, Any] | None = None, comm_model: str = "stream",
    memory_limit_bytes: int | None = None, recompute: str = "search", layout: str = "search", job_budget: int = RESEED_BUDGET,
) -> tuple[LayoutChoice, tuple[str, str | tuple[str, ...]]] | None:
    """Try other answers (other schedules' layouts and recomputation) as starting points for this schedule.

    Every seed is simulated exactly for ``schedule``; where its builder reads the costs (or the comm model times the
    sends), every seed is first timed on the schedule built for ``current``, and only the :data:`FINALISTS` fastest
    are rebuilt for their own costs and simulated exactly. Where one beats ``current`` (:meth:`_Search.key`:
    fitting first, then the step time), the local search of :func:`search_layout` runs from the seeds that do,
    and the best candidate found is returned.

    Args:
        schedule, p, m, v, base, options, comm_model, memory_limit_bytes, recompute, layout, job_budget: as
            :func:`search_layout` (``recompute`` and ``layout`` bound the moves: modes tried, layers moved or not).
        current: the answer to beat, ``(layout string, recompute)``.
        seeds: the answers to try, ``(layout string, recompute)`` each (one mode, or one per stage); each
            must have this schedule's stage count.

    Returns:
        ``None`` where no seed beats ``current``; else ``(choice, seed)``: ``choice.best`` the better
        candidate (``baselines`` empty and ``lower_bound_ns`` 0: the caller keeps its first search's) and
        ``seed`` the one it started from.

    Raises:
        ConfigError: a seed or ``current`` whose layout does not fit the stages, or an unknown ``recompute``.
    """
    search = _Search(schedule, p, m, v, base, options or {}, comm_model, memory_limit_bytes)
    s = search.num_stages
    modes = _modes(recompute, base)
    lows = _lows(search)

    def key_of(answer: tuple[str, str | Sequence[str]]) -> tuple[tuple[int, ...], tuple[str, ...]]:
        text, rec = answer
        combo = (rec,) * s if isinstance(rec, str) else tuple(rec)
        if len(combo) != s:
            raise ConfigError(f"a recomputation of {len(combo)} stage(s) for {schedule}'s {s}")
        return parse_layout(text, s, base.num_layers).layers, combo

    here = key_of(current)
    search.evaluate(*here)
    tried = {here}
    candidates: list[tuple[tuple[tuple[int, ...], tuple[str, ...]], tuple[str, str | Sequence[str]]]] = []
    for seed in seeds:
        k = key_of(seed)
        if k not in tried:
            tried.add(k)
            candidates.append((k, seed))
    timed = ""
    if search.rebuild and len(candidates) > FINALISTS:
        # a schedule built from the costs: every seed timed on the schedule built for the current answer, the FINALISTS
        # fastest rebuilt for their own costs (as the local search does; a build costs hundreds of simulations). By the
        # step alone: the builder plans each build for the limit, so whether a seed fits another build says little
        search.exact = False
        candidates.sort(key=lambda c: search.evaluate(*c[0]).step_ns)  # stable: ties keep the seeds' order
        candidates = candidates[:FINALISTS]
        search.exact = True
        timed = f", timed on the schedule built for its own answer and the {FINALISTS} fastest rebuilt for their costs"
    better = [(k, seed) for k, seed in candidates if search.key(search.evaluate(*k)) < search.key(search.memo[here])]
    if not better:
        return None
    best_seed = min(better, key=lambda b: search.key(search.memo[b[0]]))[1]
    current_key, improved, rough = _descend(search, [k for k, _ in better], modes, lows, layout == "search", job_budget)
    best = search.memo[current_key]
    method = (f"{len(better)} of {len(tried) - 1} seed(s){timed} beat it; local search from them: "
              + _descent_text(search, rough, improved))
    choice = LayoutChoice(best, {}, len(search.memo), 0, False, method, search.decomposition(*current_key),
                          search.assumptions(*current_key))
    seed_rec = best_seed[1] if isinstance(best_seed[1], str) else tuple(best_seed[1])
    return choice, (best_seed[0], seed_rec)


def _moves(search: _Search, memo: Mapping[tuple[tuple[int, ...], tuple[str, ...]], Candidate],
           at: tuple[tuple[int, ...], tuple[str, ...]], modes: Sequence[str], lows: Sequence[int],
           layers: bool) -> list[tuple[tuple[int, ...], tuple[str, ...]]]:
    """Neighbours of ``at``: one layer to a neighbouring stage, one stage's mode changed; those touching the
    busiest rank's stages (or the ranks over the limit) first."""
    counts, combo = at
    cand = memo[at]
    s = len(counts)
    stage_rank = _stage_to_rank(search)
    if not cand.fits and search.limit is not None:
        hot = {r for r, b in enumerate(cand.peak_bytes_per_rank) if b > search.limit}
    else:
        busy = search.busy_of[id(cand)]
        hot = {max(range(len(busy)), key=lambda r: busy[r])}
    out: list[tuple[int, tuple[tuple[int, ...], tuple[str, ...]]]] = []
    if layers:
        for k in range(s - 1):
            for src, dst in ((k, k + 1), (k + 1, k)):
                if counts[src] - 1 < lows[src]:
                    continue
                new = list(counts)
                new[src] -= 1
                new[dst] += 1
                out.append((0 if stage_rank[src] in hot else 1, (tuple(new), combo)))
    for k in range(s):
        for mode in modes:
            if mode != combo[k] and counts[k] > 0:
                new_modes = list(combo)
                new_modes[k] = mode
                out.append((0 if stage_rank[k] in hot else 1, (counts, tuple(new_modes))))
    out.sort(key=lambda x: x[0])  # stable: hot stages first, in stage order
    return [move for _, move in out]


def _stage_to_rank(search: _Search) -> tuple[int, ...]:
    assert search.plan is not None  # set by the first candidate simulated
    return tuple(search.plan.schedule.stage_to_rank)


def _choice(search: _Search, key: tuple[tuple[int, ...], tuple[str, ...]], baselines: dict[str, Candidate], lower_bound: int,
            proven: bool, method: str) -> LayoutChoice:
    best = search.memo[key]
    if best.step_ns == REFUSED:  # the builder refused every candidate: its own words
        raise ConfigError(search.refusals[0])
    if best.options is not None:
        given = ", ".join(f"{k}={v}" for k, v in best.options.items() if search.options.get(k) != v)
        method += (f"; nothing tried fits: {search.schedule}'s builder refuses the limit for this layout and recomputation (below "
                   f"what one micro-batch needs on a stage), so it is shown as its least-memory build ({given})")
    return LayoutChoice(best, baselines, len(search.memo), min(lower_bound, best.step_ns), proven, method,
                        search.decomposition(*key), search.assumptions(*key))
