"""ZB-auto: a zero-bubble schedule (F, I, W; one stage per rank) searched for a memory limit from the
case's own per-stage costs.

Given per-stage durations of a forward ``F``, a backward for inputs ``I`` (the zero-bubble paper's
``B``) and a backward for weights ``W``, the transfer times between neighbouring stages and a limit
on the activations a stage may hold, :func:`zb_auto` returns one ordered job list per rank; the
registered builder ``ZB-auto`` (:func:`zb_auto_schedule`) turns it into a
:class:`~harness.schedule.model.Schedule`.

Problem (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR'24, arXiv:2401.10241, §3):

- dependencies: ``F(s, j)`` needs ``F(s-1, j)``; ``I(s, j)`` needs ``F(s, j)`` and ``I(s+1, j)``;
  ``W(s, j)`` needs ``I(s, j)``; a dependency between ranks is delayed by its transfer time (the
  ``edge`` comm model: consumer start >= producer end + transfer, transfers never queue); a rank
  runs its list in order, each job as early as it can (ASAP; :mod:`harness.schedule.zb_auto_eval`);
- memory: a micro-batch is *pending* on a stage from the start of its ``F`` to the end of its ``W``,
  the accounting of the zero-bubble repository's scheduler (``zb.py`` adds ``mem_f`` when it places an
  ``F`` and checks the limit then) and of the harness's ``peak_inflight`` and memory profile
  (:mod:`harness.analysis.memory`: allocations from a job's start, frees at its end). In bytes each
  job adds its kind's memory (``mem_f > 0``, ``mem_i <= 0``, ``mem_w <= 0``, summing to 0) and the
  running total must stay within the limit; ``max_pending`` is ``(1, 0, -1)`` with that limit;
- objective: the longest stage span, ``max_s (end of the last job of s - start of the first job of
  s)``, the objective of the repository's ``initial_solution`` (and of the paper's ILP); the step
  time (last job end, every rank starting at 0) is reported beside it and breaks ties.

Algorithm (deterministic): the eight variants of the repository's heuristic, ZB-H1 and ZB-H2 cut to
the limit and two list schedules valid for every limit (:mod:`harness.schedule.zb_auto_candidates`);
a local search from each in turn (:mod:`harness.schedule.zb_auto_search`); for small ``p m`` an exact
MILP (``scipy.optimize.milp``, HiGHS); a lower bound (:mod:`harness.schedule.zb_auto_exact`) stops
everything once met, and the result is then proven optimal (``ZBAutoResult.optimal``).
"""

from __future__ import annotations

import functools
import numbers
import time
from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import ConfigError
from harness.schedule.builders import _finish
from harness.schedule.costs import StageCosts
from harness.schedule.model import Job, JobKind, Schedule, loop_placement
from harness.schedule.registry import NOTES_PARAM, _check_sizes, register
from harness.schedule.zb_auto_candidates import _handcrafted, _list_schedule, _zb_greedy
from harness.schedule.zb_auto_eval import _key, _kinds_to_orders, _peaks, _simulate, _valid_string, delays, durations
from harness.schedule.zb_auto_exact import lower_bound, solve_exact
from harness.schedule.zb_auto_search import _local_search

__all__ = ["DEFAULT_SEARCH_EFFORT", "ZBAutoResult", "zb_auto", "zb_auto_schedule"]

#: The local search's default effort: jobs re-timed over all the moves it tries (about 0.2-0.8 s of
#: pure Python where the lower bound is not met first; on the zero-bubble paper's settings it is met
#: at 69 of 72 points, in 2-340 ms).
DEFAULT_SEARCH_EFFORT = 300_000


@functools.cache
def _has_scipy() -> bool:
    try:
        import scipy.optimize  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class ZBAutoResult:
    """What :func:`zb_auto` found.

    Attributes:
        num_ranks, num_microbatches: ``p`` and ``m``.
        limits: the memory limit of each stage, in the units of ``memory`` (pending
            micro-batches for ``max_pending``).
        memory: ``(mem_f, mem_i, mem_w)`` per stage, the signed memory a job of each kind
            allocates (``(1, 0, -1)``: pending micro-batches).
        orders: per rank (= stage) its jobs in order, ``(kind, microbatch)`` with kind in
            ``"F"``, ``"I"``, ``"W"``.
        objective_ns: the longest stage span (ns).
        step_ns: the step time (ns), every rank starting at 0, jobs ASAP.
        spans_ns: per stage, last job end minus first job start (ns).
        peak_pending: per stage, the most micro-batches pending at once (F started, W not ended).
        peak_memory: per stage, the peak of the running memory total (units of ``memory``).
        lower_bound_ns: a proven lower bound on ``objective_ns``
            (:func:`~harness.schedule.zb_auto_exact.lower_bound`).
        optimal: ``objective_ns == lower_bound_ns``, or an exact solve proved it.
        method: which candidate won and what improved it.
        jobs_timed: jobs the builder timed, all candidates and search moves together (its work).
        note: set when ``max_pending`` is below what 1F1B holds (``p`` on stage 0): the warm-up
            is shortened and the schedule pays bubble for it.
    """

    num_ranks: int
    num_microbatches: int
    limits: tuple[float, ...]
    memory: tuple[tuple[float, float, float], ...]
    orders: tuple[tuple[tuple[str, int], ...], ...]
    objective_ns: int
    step_ns: int
    spans_ns: tuple[int, ...]
    peak_pending: tuple[int, ...]
    peak_memory: tuple[float, ...]
    lower_bound_ns: int
    optimal: bool
    method: str
    jobs_timed: int
    note: str | None = None

    def kind_strings(self) -> list[str]:
        """Each rank's list as a string of kinds (``"FFIFIW..."``)."""
        return ["".join(k for k, _ in row) for row in self.orders]


def _memory_model(
    p: int, max_pending: int | None, memory: object, limit: object
) -> tuple[list[tuple[float, float, float]], list[float]]:
    """Per stage the memory each kind adds and the limit: ``(1, 0, -1)`` and ``max_pending``, or the
    byte model ``memory`` (one triple, or one per stage) and ``limit``.

    Raises:
        ConfigError: both or neither of ``max_pending`` and ``limit``, bad values, or a limit below
            one forward's memory (nothing could run).
    """
    if (max_pending is None) == (limit is None):
        raise ConfigError("give exactly one of max_pending and memory_limit")
    if max_pending is not None:
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1:
            raise ConfigError(f"max_pending must be an integer >= 1, got {max_pending!r}")
        return [(1, 0, -1)] * p, [max_pending] * p
    if memory is None:
        raise ConfigError("memory_limit needs memory=(mem_f, mem_i, mem_w)")
    if isinstance(memory, tuple) and len(memory) == 3 and all(isinstance(x, (int, float)) for x in memory):
        mems = [memory] * p
    else:
        mems = [tuple(x) for x in memory]  # type: ignore[attr-defined]
    if len(mems) != p:
        raise ConfigError(f"memory: {len(mems)} entries for {p} stages")
    for mf, mi, mw in mems:
        if not (mf > 0 and mi <= 0 and mw <= 0) or abs(mf + mi + mw) > 1e-9 * mf:
            raise ConfigError(f"memory per stage must be (mem_f > 0, mem_i <= 0, mem_w <= 0) summing to 0, got {(mf, mi, mw)}")
    limits = [limit] * p if isinstance(limit, (int, float)) else list(limit)  # type: ignore[call-overload]
    if len(limits) != p:
        raise ConfigError(f"memory_limit: {len(limits)} values for {p} stages")
    for (mf, _, _), lim in zip(mems, limits):
        if lim < mf:
            raise ConfigError(f"memory_limit {lim} is below one micro-batch's forward memory {mf}: nothing can run")
    return mems, limits  # type: ignore[return-value]


def zb_auto(
    p: int,
    m: int,
    f_ns: int | Sequence[int],
    i_ns: int | Sequence[int],
    w_ns: int | Sequence[int],
    comm_ns: float | tuple[Sequence[float], Sequence[float]],
    max_pending: int | None = None,
    *,
    memory: tuple[float, float, float] | Sequence[tuple[float, float, float]] | None = None,
    memory_limit: float | Sequence[float] | None = None,
    search_effort: int | None = None,
    exact: bool | None = None,
    time_budget: float | None = None,
) -> ZBAutoResult:
    """A zero-bubble schedule (one stage per rank, jobs F, I, W) that minimizes the longest
    stage span within a memory limit, under the ``edge`` comm model.

    Args:
        p, m: ranks (stage ``s`` on rank ``s``) and micro-batches, both >= 1.
        f_ns, i_ns, w_ns: per-stage (or one) durations of a forward, a backward for inputs
            and a backward for weights (ns).
        comm_ns: transfer delay of an activation or gradient between neighbouring ranks
            (ns): a consumer starts at least ``comm_ns`` after its producer ends; or per stage
            ``(forward_transfer_ns, backward_transfer_ns)`` as :class:`~harness.schedule.costs.StageCosts`
            holds them (stage ``k``'s output to ``k+1``; its input gradient to ``k-1``).
        max_pending: the most micro-batches a stage may hold at once (from the start of
            their F to the end of their W), >= 1. ``p`` gives ZB-H1's / ZB-1p's memory,
            ``2p`` ZB-2p's.
        memory, memory_limit: instead of ``max_pending``, a memory model: per micro-batch
            and stage, ``(mem_f, mem_i, mem_w)`` bytes allocated (``mem_f > 0``) and freed
            (``mem_i, mem_w <= 0``, summing to 0) by each kind, and a limit per stage in
            bytes, e.g. the zero-bubble paper's ``(34h+5as, -(2h+5as), -32h)`` per layer.
        search_effort: the most jobs the local search re-times, summed over the moves it
            tries (default :data:`DEFAULT_SEARCH_EFFORT`, 300,000: about 0.2-0.8 s of pure
            Python); 0 skips it. The search stops early at the lower bound.
        exact: run the MILP (:func:`~harness.schedule.zb_auto_exact.solve_exact`; pending limits
            only, needs scipy); default: when ``3 p m <= 36``, the heuristics did not reach the
            lower bound and scipy is installed.
        time_budget: optional wall-clock cap in seconds on the local search and the MILP.
            With it the result can depend on the machine's speed; without it (the default)
            the result is deterministic.

    Returns:
        A :class:`ZBAutoResult`; ``note`` says so when ``max_pending < p``.

    Raises:
        ConfigError: sizes below 1, bad durations, delays or memory inputs, both or neither of
            ``max_pending`` and ``memory_limit``, a limit below one micro-batch's memory, or
            ``exact=True`` without scipy.
    """
    for label, value in (("p", p), ("m", m)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{label} must be an integer >= 1, got {value!r}")
    c = delays(p, comm_ns)
    dur = durations(p, f_ns, i_ns, w_ns)
    mems, limits = _memory_model(p, max_pending, memory, memory_limit)
    pending_model = max_pending is not None
    t_start = time.perf_counter()
    deadline = None if time_budget is None else t_start + time_budget
    bound = lower_bound(p, m, dur, c, mems, limits)

    found: list[tuple[tuple[int, int, int], list[list[int]], str]] = []
    jobs_timed = 0

    def consider(kinds: list[list[int]] | None, name: str) -> None:
        nonlocal jobs_timed
        if kinds is None or any(len(ks) != 3 * m for ks in kinds):
            return
        if not all(_valid_string(ks, mem, lim) for ks, mem, lim in zip(kinds, mems, limits)):
            return
        res = _simulate(p, m, dur, c, kinds)
        jobs_timed += 3 * p * m
        if res is None:
            return
        key = _key(p, *res)
        if all(kinds != other for _, other, _ in found):
            found.append((key, kinds, name))

    def reached() -> bool:
        return any(k[0] <= bound for k, _, _ in found)

    for allow in (True, False):
        for prio in (True, False):
            for nbg in (True, False):
                if not reached():
                    consider(
                        _zb_greedy(p, m, dur, c, mems, limits, allow, prio, nbg),
                        f"zb-heuristic(allow_bubble_before_first_b={allow}, prioritize_b={prio}, no_bubble_greedy={nbg})",
                    )
    if pending_model:
        lim_int = [int(x) for x in limits]
        for mult in (1, 2):
            for defer_max in (False, True):
                for f_first in (True, False):
                    if not reached():
                        consider(
                            _handcrafted(p, m, lim_int, mult, defer_max, f_first),
                            f"handcrafted(mult={mult}, defer_max={defer_max}, f_first={f_first})",
                        )
    for policy in ("i-first", "f-first"):
        if not reached() or not found:
            consider(_list_schedule(p, m, dur, c, mems, limits, policy), f"list-schedule({policy})")
    if not found:  # the list schedules are valid for every limit of at least one micro-batch
        raise AssertionError(f"ZB-auto found no valid schedule for p={p}, m={m}, limits {limits}: a bug of the builder")
    found.sort(key=lambda x: x[0])
    key, kinds, method = found[0]

    # local search from each candidate in turn, best first, while effort is left
    budget = DEFAULT_SEARCH_EFFORT if search_effort is None else search_effort
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ConfigError(f"search_effort must be a whole number of jobs >= 0, got {search_effort!r}")
    for start_key, start_kinds, start_name in found:
        if key[0] <= bound or budget <= 0 or (deadline is not None and time.perf_counter() > deadline):
            break
        kinds2, key2, work, acc = _local_search(p, m, dur, c, mems, limits, start_kinds, start_key, bound, budget, deadline)
        jobs_timed += work
        budget -= work
        if key2 < key:
            key, kinds = key2, kinds2
            method = start_name + (f" + local search ({acc} moves)" if acc else "")
    proven = key[0] <= bound
    run_exact = exact if exact is not None else (3 * p * m <= 36 and _has_scipy())
    if run_exact and not _has_scipy():
        raise ConfigError("exact=True solves a MILP with scipy's HiGHS: install scipy (pip install scipy)")
    if run_exact and not proven and pending_model:
        left = None if deadline is None else max(1.0, deadline - time.perf_counter())
        solved = solve_exact(p, m, dur, c, [int(x) for x in limits], key[0], 30.0 if left is None else left)
        if solved is not None:
            ek, ok = solved
            if all(_valid_string(ks, mem, lim) for ks, mem, lim in zip(ek, mems, limits)):
                res = _simulate(p, m, dur, c, ek)
                jobs_timed += 3 * p * m
                if res is not None:
                    k3 = _key(p, *res)
                    if k3 < key:
                        if k3[0] < key[0]:
                            method += " + exact MILP"
                        key, kinds = k3, ek
                    if ok and k3[0] <= key[0]:
                        proven = True
    res = _simulate(p, m, dur, c, kinds)
    if res is None:  # every kept candidate was timed without deadlock
        raise AssertionError("ZB-auto's chosen lists deadlock: a bug of the builder")
    starts, free = res
    spans = tuple(free[s] - starts[s][0] for s in range(p))
    pend, memp = _peaks(kinds, mems)
    note = None
    if pending_model and max_pending is not None and max_pending < p:
        note = (
            f"max_pending={max_pending} is below p={p}, what 1F1B and ZB-H1 hold on stage 0: the warm-up is "
            f"shortened, and the schedule pays for the memory in bubble (longest stage span {max(spans):,} ns "
            f"against a busy time of {max(m * sum(d) for d in dur):,} ns)"
        )
    return ZBAutoResult(
        num_ranks=p,
        num_microbatches=m,
        limits=tuple(limits),
        memory=tuple(mems),
        orders=_kinds_to_orders(kinds),
        objective_ns=max(spans),
        step_ns=max(free),
        spans_ns=spans,
        peak_pending=tuple(pend),
        peak_memory=tuple(memp),
        lower_bound_ns=bound,
        optimal=proven or max(spans) <= bound,
        method=method,
        jobs_timed=jobs_timed,
        note=note,
    )


# --------------------------------------------------------------------------------------
# the registered builder


def _whole(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _byte_limits(p: int, m: int, costs: StageCosts, limit: int) -> tuple[list[tuple[float, float, float]], list[float], list[str]]:
    """Per stage the memory model and activation limit (``limit`` minus the stage's static bytes) of
    the byte form, and its notes.

    Raises:
        ConfigError: ``limit`` below one micro-batch's activations plus the static bytes on some
            stage; the message names that stage and the minimum limit.
    """
    acts = costs.activation_bytes or ((0, 0, 0),) * p
    static = costs.static_bytes or (0,) * p
    need = [static[s] + acts[s][0] for s in range(p)]
    worst = max(range(p), key=lambda s: (need[s], -s))
    if limit < need[worst]:
        raise ConfigError(
            f"schedule 'ZB-auto': memory_limit_bytes={limit:,} is below what one micro-batch needs on stage {worst}: its static "
            f"{static[worst]:,} bytes plus one forward's activations {acts[worst][0]:,} bytes; the minimum for these costs is "
            f"{need[worst]:,} bytes (the largest over the stages), which runs one micro-batch at a time"
        )
    mems: list[tuple[float, float, float]] = []
    limits: list[float] = []
    short = []
    for s in range(p):
        mf, mi, mw = acts[s]
        if mf == 0:  # this stage's activations cost nothing: no limit binds it
            mems.append((1, 0, -1))
            limits.append(m)
            continue
        mems.append((mf, mi, mw))
        limits.append(limit - static[s])
        held = min(m, p - s)  # 1F1B's peak on stage s: p - s forwards' activations
        if limit < static[s] + held * mf:
            short.append((s, static[s] + held * mf))
    notes = []
    if short:
        s, bytes_1f1b = short[0]
        notes.append(
            f"ZB-auto: memory_limit_bytes={limit:,} is below what 1F1B holds on stage {s} ({bytes_1f1b:,} bytes: static plus "
            f"{min(m, p - s)} forwards' activations"
            + (f"; {len(short) - 1} more stage(s) likewise" if len(short) > 1 else "")
            + "): the warm-up is shortened, and the schedule pays for the memory in bubble"
        )
    return mems, limits, notes


@register(
    "ZB-auto",
    summary="zero bubble searched for a memory limit from the case's per-stage costs: the zero-bubble repository's heuristic, "
    "local search, lower bound, MILP for small sizes (Qi et al., arXiv:2401.10241, §3)",
    splits_backward=True,
    takes_costs=True,
)
def zb_auto_schedule(
    num_ranks: int,
    num_microbatches: int,
    *,
    costs: StageCosts,
    max_pending: int | None = None,
    search_effort: int = DEFAULT_SEARCH_EFFORT,
    optimizer: bool = False,
) -> Schedule:
    """ZB-auto: the F/I/W order per rank (one stage per rank) with the shortest longest stage span
    this search finds within a memory limit, planned from the case's own costs (:func:`zb_auto`).

    The limit is one of:

    - ``max_pending`` (option): the most micro-batches a stage may hold at once, from the start
      of their ``F`` to the end of their ``W`` (the harness's peak in-flight), >= 1; ``p`` gives
      ZB-H1's memory (the paper's ZB-1p), ``2p`` ZB-H2's;
    - else the case's ``memory_limit_bytes`` with a cost model that models memory: each stage's
      static bytes plus its live activations (``mem_F`` from an F's start, ``mem_I``/``mem_W``
      freed at an I's / W's end) stay within it;
    - else ``max_pending = p``.

    Given both ``max_pending`` and ``memory_limit_bytes``, it is built for ``max_pending``; the byte limit is
    only checked after (the run's memory profile), and a note says so.

    It plans under the ``edge`` model with the cost model's transfer times (per stage and
    direction). Under ``free`` those are 0, which is what runs; under ``stream`` (send/receive
    jobs on FIFO comm streams) and ``blocking`` (on the compute streams) the order runs with
    send/receive jobs whose queueing and waiting it did not see (a note says so when transfers
    cost time). Below ``p`` pending (or below what 1F1B holds, in bytes) the
    warm-up is shortened and a note on the schedule says what the memory costs in bubble.

    Args:
        num_ranks, num_microbatches: ``p`` and ``m``.
        costs: the case's per-stage costs (:class:`~harness.schedule.costs.StageCosts`, ``p`` stages).
        max_pending: see above.
        search_effort: the most jobs the local search re-times (default :data:`DEFAULT_SEARCH_EFFORT`);
            0 keeps the best starting point. Results do not depend on the machine.
        optimizer: append an ``OPT`` per stage.

    Returns:
        The schedule; its ``params`` hold ``objective_ns`` (the longest stage span planned, ns),
        ``planned_step_ns``, ``lower_bound_ns``, ``optimal``, ``method``, the limit, and the
        notes (``params["notes"]``, carried to the case's warnings).

    Raises:
        ConfigError: ``costs`` for another number of stages, ``max_pending`` below 1 or not a whole
            number, ``search_effort`` below 0, or a byte limit below one micro-batch's activations
            plus a stage's static memory (the message names the minimum).
    """
    p, m, _ = _check_sizes(num_ranks, num_microbatches)
    if not isinstance(costs, StageCosts):
        raise ConfigError(f"schedule 'ZB-auto': costs must be StageCosts, got {type(costs).__name__}")
    if costs.num_stages != p:
        raise ConfigError(f"schedule 'ZB-auto': the costs describe {costs.num_stages} stages, but the schedule has p={p} (one stage per rank)")
    if max_pending is not None and (not _whole(max_pending) or max_pending < 1):
        raise ConfigError(
            f"schedule 'ZB-auto': option max_pending must be a whole number >= 1, the most micro-batches a stage holds at once "
            f"(the minimum, 1, runs one micro-batch at a time; p={p} holds what ZB-H1 does), got {max_pending!r}"
        )
    if not _whole(search_effort) or search_effort < 0:
        raise ConfigError(f"schedule 'ZB-auto': option search_effort must be a whole number of jobs >= 0, got {search_effort!r}")
    notes: list[str] = []
    limit = costs.memory_limit_bytes
    params: dict[str, object] = {}
    if max_pending is None and limit is not None and costs.models_memory:
        mems, limits, notes = _byte_limits(p, m, costs, limit)
        pending = None
        params["memory_limit_bytes"] = limit
    else:
        if max_pending is None and limit is not None:
            notes.append(f"ZB-auto: the cost model has no memory model, so memory_limit_bytes={limit:,} cannot be planned against; "
                         f"built for max_pending = p = {p} (ZB-H1's memory)")
        elif limit is not None:
            notes.append(f"ZB-auto: built for option max_pending={max_pending}, which takes precedence over memory_limit_bytes={limit:,}: "
                         "the byte limit is not planned against, only checked after, against the run's memory peaks"
                         + ("" if costs.models_memory else " (this cost model has no memory model, so nothing checks it)"))
        pending = p if max_pending is None else int(max_pending)
        params["max_pending"] = pending
    comm = (costs.forward_transfer_ns, costs.backward_transfer_ns)
    dur = (costs.forward_ns, costs.backward_input_ns, costs.backward_weight_ns)
    if pending is not None:
        res = zb_auto(p, m, *dur, comm, pending, search_effort=int(search_effort))
    else:
        res = zb_auto(p, m, *dur, comm, memory=mems, memory_limit=limits, search_effort=int(search_effort))
    if res.note:
        notes.insert(0, f"ZB-auto: {res.note}")
    if costs.comm_model in ("stream", "blocking") and (any(comm[0]) or any(comm[1])):
        how = ("send/receive jobs queue on one comm stream per pair of ranks" if costs.comm_model == "stream" else
               "a send and its receive meet on the compute streams")
        notes.append(
            f"ZB-auto planned this order under comm_model 'edge' (each transfer a delay of its own time on the dependency; longest "
            f"stage span {res.objective_ns:,} ns); it runs under {costs.comm_model!r}, where {how}, so its figures can differ from the plan"
        )
    ranks: list[list[Job | None]] = [
        [Job(s, JobKind(kind), j) for kind, j in row] for s, row in enumerate(res.orders)
    ]
    params.update(
        search_effort=int(search_effort), objective_ns=res.objective_ns, planned_step_ns=res.step_ns,
        lower_bound_ns=res.lower_bound_ns, optimal=res.optimal, method=res.method, planned_under="edge",
        peak_pending=max(res.peak_pending),
    )
    if notes:
        params[NOTES_PARAM] = tuple(notes)
    return _finish("ZB-auto", m, loop_placement(p), ranks, optimizer, **params)
