"""Layout and recomputation search: which layers each stage holds, and which stages recompute.

For one schedule at one size (``p`` ranks, ``m`` micro-batches, ``v`` chunks) and a
:class:`~harness.model.transformer.TransformerCost`, :func:`search_layout` finds the stage layout (a
Megatron-Core layout string, :mod:`harness.model.layout`) and the recomputation mode of every stage
(``none``, ``selective`` or ``full``, :mod:`harness.model.recompute`) that give the shortest predicted
step time (ns) whose memory peak (bytes, every rank) fits the limit.

Every candidate is judged by the exact analytic path a ``sim`` run takes (:mod:`harness.choose.candidates`:
the schedule built, its communication model applied, the plan simulated and its memory peaks read off
that timeline), so a candidate's ``step_ns`` is what ``run_case(candidate.case(...), backend="sim")``
measures. Where the schedule does not depend on the costs (every builder but a cost-aware one such as
ZB-auto, and every comm model but ``blocking``, whose send placement is timed), one plan serves every
candidate and only the durations change.

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
from dataclasses import dataclass, field
from typing import Any

from harness.choose.candidates import LEAST_MEMORY_OPTIONS, REBUILD_WEIGHT, REFUSED, Candidate, Candidates
from harness.choose.layout_dp import (
    StageLines,
    bottleneck_dp,
    compositions,
    even_counts,
    layout_text,
    space_size,
    stage_lows,
    too_few_layers,
)
from harness.errors import ConfigError
from harness.model.layout import parse_layout
from harness.model.recompute import RECOMPUTE
from harness.model.transformer import TransformerCost

__all__ = ["EVEN_BEST", "EVEN_NONE", "GIVEN_BEST", "GIVEN_NONE", "JOB_BUDGET", "LEAST_MEMORY_OPTIONS", "Candidate", "LayoutChoice",
           "even_counts", "layout_text", "reseed_layout", "search_layout"]

#: Simulated jobs the local search may spend on one (schedule, p, m, v): about 2-3 s on one core.
JOB_BUDGET = 600_000
#: The budget of a reseeded search (:func:`reseed_layout`): it starts from answers already searched.
RESEED_BUDGET = JOB_BUDGET // 4
#: The local search simulates at least this many candidates, whatever their size.
MIN_EVALUATIONS = 12
#: A space of at most this many candidates (splits x modes) is searched exhaustively.
EXHAUSTIVE_LIMIT = 256

#: A cost-built schedule's local search is timed on one shared plan; this many of its best are then rebuilt exactly.
FINALISTS = 3

#: Names of the two baselines shown beside the answer, as mindformers' SAPP prints its naive plan.
EVEN_NONE = "even split, no recomputation"
EVEN_BEST = "even split, best uniform recomputation"
#: Their names where the layout is given (``layout`` a layout string): the given split, not the even one.
GIVEN_NONE = "given layout, no recomputation"
GIVEN_BEST = "given layout, best uniform recomputation"


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
    search = Candidates(schedule, p, m, v, base, options or {}, comm_model, memory_limit_bytes)
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


def _uniform_search(search: Candidates, starts: Sequence[tuple[tuple[int, ...], tuple[str, ...]]], mode: str, lows: Sequence[int],
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


def _lows(search: Candidates) -> tuple[int, ...]:
    """The fewest transformer layers each stage may hold: one, and none on the last stage where it holds the LM head.

    Raises:
        ConfigError: fewer layers than that.
    """
    reason = too_few_layers(search.base.num_layers, search.vocab, search.p, search.num_stages)
    if reason is not None:
        raise ConfigError(reason)
    return stage_lows(search.num_stages, search.vocab)


def _descend(search: Candidates, starts: Sequence[tuple[tuple[int, ...], tuple[str, ...]]], modes: Sequence[str], lows: Sequence[int],
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


def _descent_text(search: Candidates, rough: int, improved: bool) -> str:
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
    are rebuilt for their own costs and simulated exactly. Where one beats ``current`` (:meth:`Candidates.key`:
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
    search = Candidates(schedule, p, m, v, base, options or {}, comm_model, memory_limit_bytes)
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


def _moves(search: Candidates, memo: Mapping[tuple[tuple[int, ...], tuple[str, ...]], Candidate],
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


def _stage_to_rank(search: Candidates) -> tuple[int, ...]:
    assert search.plan is not None  # set by the first candidate simulated
    return tuple(search.plan.schedule.stage_to_rank)


def _choice(search: Candidates, key: tuple[tuple[int, ...], tuple[str, ...]], baselines: dict[str, Candidate], lower_bound: int,
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
