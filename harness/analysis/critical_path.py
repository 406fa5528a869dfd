"""Why a step is as long as it is: its critical path, and what every rank's idle time waited for.

From a run's records (any backend) and the plan that ran (its dependencies and
stream order):

* :func:`critical_path`: the chain of jobs that fixes the step's length. From
  the job that ends last, walk back through the constraint that let each job
  start: the dependency that ended last before it (the end of a job it needs,
  or the start of the send a receive waits for), or the job before it on its
  stream, whichever came later (a dependency wins a tie: it is what couples the
  ranks). The chain's jobs and the gaps between them (host overhead on a timed
  backend; none on ``sim``) add up to the step time exactly. HTA's critical-path
  analysis (facebookresearch/HolisticTraceAnalysis, ``critical_path_analysis``)
  infers the same from kernel and CPU events; here the schedule's dependencies
  are known exactly.
* :func:`waiting`: per rank, its compute streams' idle time split by what the
  job after each gap waited for: ``warm-up`` (before the rank's first job),
  ``cool-down`` (after its last), ``waiting for rank q's B`` (the binding
  dependency's rank and kind), ``waiting for a transfer from rank q`` (a
  receive), or ``host gap`` (nothing it needed was late: launch overhead). The
  parts of a rank add up to its idle time exactly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["CriticalPath", "RankWaiting", "critical_path", "median_step", "middle_step_note", "waiting"]

_COMPUTE = ("F", "B", "I", "W", "OPT")


def _kinds() -> tuple[Any, ...]:
    from harness.schedule.model import JobKind

    return tuple(JobKind)


_KINDS = _kinds()


@dataclass(frozen=True)
class CriticalPath:
    """The chain of jobs that fixes one step's length.

    Attributes:
        step: the step.
        jobs: the chain's job labels (``"2F0"``), first to last.
        ranks: the rank of each.
        gaps_ns: before each job, the time since the chain's jobs before it ended (from the step's
            start, for the first) that none of them covers, 0 where one was still running: host
            overhead on a timed backend (a receive that starts inside its send has none), ns.
        length_ns: the chain's span, step start to the last job's end: the step time (ns).
        busy_ns: the time the chain's jobs run, the union of their intervals (ns; an overlapped
            F&B pair on the chain counts once); ``length_ns - busy_ns`` is the sum of the gaps
            wherever the chain's jobs start in order (always on one clock; an import whose ranks'
            clocks disagree can break it).
    """

    step: int
    jobs: list[str]
    ranks: list[int]
    gaps_ns: list[int]
    length_ns: int
    busy_ns: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RankWaiting:
    """One rank's idle time in one step, split by what it waited for.

    Attributes:
        rank: the rank.
        idle_ns: step time less the union of its compute jobs' intervals (ns).
        parts: reason -> ns (see the module docstring); they sum to ``idle_ns``.
    """

    rank: int
    idle_ns: int
    parts: dict[str, int]

    def describe(self) -> str:
        """``"rank 2 idle 14.700 ms: 9.100 ms waiting for rank 3's B, 5.600 ms warm-up"``."""
        parts = ", ".join(f"{ns / 1e6:.3f} ms {why}" for why, ns in sorted(self.parts.items(), key=lambda kv: -kv[1]) if ns)
        return f"rank {self.rank} idle {self.idle_ns / 1e6:.3f} ms" + (f": {parts}" if parts else "")

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "idle_ns": self.idle_ns, "parts": dict(self.parts), "description": self.describe()}


def median_step(records: Any) -> int:
    """The recorded step whose time is closest to the median (the first such)."""
    times = [b - a for a, b in zip(records.step_start_ns, records.step_end_ns)]
    ordered = sorted(times)
    median = ordered[(len(ordered) - 1) // 2]
    return int(records.steps[times.index(median)])


def middle_step_note(n_steps: int) -> str:
    """What the step chosen for a case's critical path and decomposition is
    (:func:`median_step`) among ``n_steps`` recorded steps: the median step
    where ``n_steps`` is odd; where it is even, the median lies between two steps and the lower
    middle one is taken, whose time differs from the median shown beside it."""
    if n_steps % 2 or n_steps == 0:
        return "the median step"
    return f"the lower middle of {n_steps} steps: the median falls between two"


#: The last :func:`_step_view` (its columns, plan, step and answer): the critical path and the waiting
#: split of one run ask for the same view one after the other. Holding the objects themselves keeps
#: their ids from being reused while the entry lives.
_LAST_VIEW: list[Any] = []


@dataclass(frozen=True)
class _StepView:
    """One recorded step's jobs laid out by plan job index ``j``: ``present[j]`` whether it was
    recorded, then its ``start``/``end`` (ns, run time base) and ``rank``: memoryviews of the arrays
    (a Python int or bool per index, fast, no copy)."""

    present: Any
    start: Any
    end: Any
    rank: Any
    t0: int
    t1: int
    arrays: tuple[Any, Any, Any, Any]  # the same four as numpy arrays


def _step_view(records: Any, plan: Any, step: int) -> _StepView:
    """The plan's jobs as recorded in ``step``, with the step's start and end (ns)."""
    cols = records.columns
    if _LAST_VIEW and _LAST_VIEW[0] is cols and _LAST_VIEW[1] is plan and _LAST_VIEW[2] == step:
        return _LAST_VIEW[3]  # type: ignore[no-any-return]
    view = _build_step_view(cols, records, plan, step)
    _LAST_VIEW[:] = [cols, plan, step, view]
    return view


def _build_step_view(cols: Any, records: Any, plan: Any, step: int) -> _StepView:
    import numpy as np

    from harness.records import KINDS

    k = records.steps.index(step)
    n = plan.num_jobs
    rows = np.flatnonzero((cols.step == step) & (cols.kind < len(KINDS)))  # an import's own kinds are no plan job's
    arrays = plan.arrays
    width = int(max(arrays.microbatch.max(initial=-1), cols.microbatch[rows].max(initial=-1))) + 2
    n_kinds = len(KINDS)

    def key(stage: Any, kind: Any, mb: Any) -> Any:
        return (stage.astype(np.int64) * n_kinds + kind) * width + (mb + 1)

    plan_key = key(arrays.stage, arrays.kind, arrays.microbatch)
    rec_key = key(cols.stage[rows], cols.kind[rows], cols.microbatch[rows])
    order = np.asarray(plan.order, dtype=np.int64)
    if len(rows) == n and np.array_equal(plan_key[order], rec_key):
        index = order  # the step's jobs in the plan's enqueue order, as the executor and the replay record them
    else:
        by_key = np.argsort(plan_key, kind="stable")
        pos = np.searchsorted(plan_key[by_key], rec_key)
        pos[pos >= n] = 0
        found = plan_key[by_key][pos] == rec_key if n else np.zeros(len(rows), dtype=bool)
        index = by_key[pos[found]]
        rows = rows[found]
    present = np.zeros(n, dtype=bool)
    start = np.zeros(n, dtype=np.int64)
    end = np.zeros(n, dtype=np.int64)
    rank = np.zeros(n, dtype=np.int64)
    present[index] = True  # a job recorded twice in a step: its last record counts
    start[index] = cols.start_ns[rows]
    end[index] = cols.end_ns[rows]
    rank[index] = cols.rank[rows]
    return _StepView(_view(present), _view(start), _view(end), _view(rank), int(records.step_start_ns[k]),
                     int(records.step_end_ns[k]), (present, start, end, rank))


#: The last :func:`_walk_of` (its plan and answer), for the same reason as :data:`_LAST_VIEW`.
_LAST_WALK: list[Any] = []


@dataclass(frozen=True)
class _Walk:
    """What walking back through a plan needs, per job ``j``: ``prev[j]``, the job before it on its stream
    (:func:`_stream_prev`), and its dependencies in CSR form (:class:`~harness.plan.graph.PlanArrays`' ``deps_*``
    and ``start_*``), all int64 memoryviews."""

    prev: Any
    ptr: Any
    idx: Any
    sptr: Any
    sidx: Any


def _walk_of(plan: Any) -> _Walk:
    if not (_LAST_WALK and _LAST_WALK[0] is plan):
        import numpy as np

        a = plan.arrays
        csr = [_view(np.ascontiguousarray(x, dtype=np.int64)) for x in (a.deps_ptr, a.deps_idx, a.start_ptr, a.start_idx)]
        _LAST_WALK[:] = [plan, _Walk(_stream_prev(plan), *csr)]
    return _LAST_WALK[1]  # type: ignore[no-any-return]


def _stream_prev(plan: Any) -> Any:
    """Per job, the job before it on its stream in enqueue order (-1 for the first)."""
    import numpy as np

    order = np.asarray(plan.order, dtype=np.int64)
    prev = np.full(plan.num_jobs, -1, dtype=np.int64)
    if len(order):
        stream = plan.arrays.stream[order]
        by_stream = np.argsort(stream, kind="stable")  # per stream, enqueue order kept
        o, s = order[by_stream], stream[by_stream]
        same = s[1:] == s[:-1]
        prev[o[1:][same]] = o[:-1][same]
    return _view(prev)


def _label(plan: Any, j: int) -> str:
    """Job ``j``'s text form (``"2F0"``) from the plan's columns, without making its job list."""
    a = plan.arrays
    mb = int(a.microbatch[j])
    return f"{int(a.stage[j])}{_KINDS[int(a.kind[j])].value}{'' if mb < 0 else mb}"


def _binding(j: int, view: _StepView, walk: _Walk) -> tuple[int, int, bool]:
    """The constraint that released job ``j``: ``(job, time, is_dependency)``, or ``(-1, -1, False)``."""
    best, t_best, dep = -1, -1, False
    present, start, end = view.present, view.start, view.end
    for k in range(walk.ptr[j], walk.ptr[j + 1]):
        d = walk.idx[k]
        if present[d] and end[d] >= t_best:
            best, t_best, dep = d, end[d], True
    for k in range(walk.sptr[j], walk.sptr[j + 1]):
        d = walk.sidx[k]
        if present[d] and start[d] >= t_best:
            best, t_best, dep = d, start[d], True
    q = walk.prev[j]
    if q >= 0 and present[q] and end[q] > t_best:  # strictly later: a dependency wins a tie
        best, t_best, dep = q, end[q], False
    return best, t_best, dep


def _view(array: Any) -> Any:
    """A memoryview of a contiguous numpy array: indexing it gives Python ints (or bools), fast."""
    return memoryview(array)


def critical_path(records: Any, plan: Any, step: int | None = None) -> CriticalPath:
    """The critical path of ``step`` (default: :func:`median_step`) of a run of ``plan``.

    Args:
        records: the run's :class:`~harness.records.RunRecords`.
        plan: the :class:`~harness.plan.graph.Plan` that ran.
        step: a recorded step.

    Raises:
        ValueError: ``step`` is not among the recorded ones, or it recorded no job of the plan.
    """
    import numpy as np

    step = median_step(records) if step is None else step
    if step not in records.steps:
        raise ValueError(f"step {step} was not recorded (recorded: {records.steps})")
    view = _step_view(records, plan, step)
    present, _, end_a, _ = view.arrays
    if not present.any():
        raise ValueError(f"step {step} recorded no job of the plan")
    walk = _walk_of(plan)
    ends = np.where(present, end_a, np.iinfo(np.int64).min)
    j = int(np.argmax(ends))  # the last to end; the first such in plan order
    end = view.end[j]
    chain: list[int] = []
    gaps: list[int] = []
    while j >= 0:
        chain.append(j)
        j = _binding(j, view, walk)[0]
    chain.reverse()
    covered = view.t0  # the gaps: what no earlier job of the chain covers (a receive running inside its send has none)
    for i in chain:
        gaps.append(max(0, view.start[i] - covered))
        covered = max(covered, view.end[i])
    from harness.analysis.busy import busy_union

    # the union of the chain's intervals: an overlapped group's jobs on it (a backward released by its
    # forward's start) count once
    busy = busy_union([0] * len(chain), [view.start[i] for i in chain], [view.end[i] for i in chain], 1)[0]
    return CriticalPath(step, [_label(plan, i) for i in chain], [view.rank[i] for i in chain], gaps, end - view.t0, busy)


def waiting(records: Any, plan: Any, step: int | None = None) -> list[RankWaiting]:
    """Per rank, its idle time in ``step`` (default: :func:`median_step`) split by what it waited for.

    Each rank's compute jobs are sorted by start; a gap is where a job starts after the union of
    the intervals before it ends (numpy, one sort); only the gaps are looked at one by one.

    Raises:
        ValueError: ``step`` is not among the recorded ones.
    """
    import numpy as np

    from harness.schedule.model import KIND_CODE, JobKind

    step = median_step(records) if step is None else step
    if step not in records.steps:
        raise ValueError(f"step {step} was not recorded (recorded: {records.steps})")
    view = _step_view(records, plan, step)
    t0, t1 = view.t0, view.t1
    walk = _walk_of(plan)
    kind_of = plan.arrays.kind
    compute_codes = np.array([KIND_CODE[JobKind(k)] for k in _COMPUTE], dtype=np.int64)
    present, start_a, end_a, rank_a = view.arrays
    mine_all = np.flatnonzero(present & np.isin(plan.arrays.kind, compute_codes))
    rank_all, start_all, end_all = rank_a[mine_all], start_a[mine_all], end_a[mine_all]
    order = np.lexsort((end_all, start_all, rank_all))  # per rank, by start then end
    mine_all, rank_all, start_all, end_all = mine_all[order], rank_all[order], start_all[order], end_all[order]
    bounds = np.searchsorted(rank_all, np.arange(plan.schedule.num_ranks + 1))
    out = []
    for r in range(plan.schedule.num_ranks):
        lo, hi = int(bounds[r]), int(bounds[r + 1])
        parts: dict[str, int] = {}

        def add(why: str, ns: int, parts: dict[str, int] = parts) -> None:
            if ns > 0:
                parts[why] = parts.get(why, 0) + ns

        covered = t0  # the union of the rank's compute intervals so far ends here
        if hi > lo:
            a, b = start_all[lo:hi], end_all[lo:hi]
            reach = np.maximum(np.maximum.accumulate(b), t0)
            before = np.concatenate(([t0], reach[:-1]))
            for n in np.flatnonzero(a > before).tolist():
                gap = int(a[n] - before[n])
                if n == 0:
                    add("warm-up", gap)
                    continue
                i = int(mine_all[lo + n])
                dep_b, _t, is_dep = _binding(i, view, walk)
                if dep_b < 0 or not is_dep:
                    add("host gap", gap)
                elif _KINDS[int(kind_of[dep_b])].is_comm:
                    sources = ([walk.sidx[k] for k in range(walk.sptr[dep_b], walk.sptr[dep_b + 1])]
                               + [walk.idx[k] for k in range(walk.ptr[dep_b], walk.ptr[dep_b + 1])])
                    peer = next((view.rank[d] for d in sources if view.present[d]), view.rank[dep_b])
                    add(f"waiting for a transfer from rank {peer}", gap)
                else:
                    add(f"waiting for rank {view.rank[dep_b]}'s {_KINDS[int(kind_of[dep_b])].value}", gap)
            covered = int(reach[-1])
        if t1 > covered:
            add("cool-down" if hi > lo else "no job this step", t1 - covered)
        out.append(RankWaiting(r, sum(parts.values()), parts))
    return out
