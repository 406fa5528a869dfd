"""Frozen copy of harness/analysis/critical_path.py as it was before it read the records' columns (issue 13):
the reference the column version is compared with on perturbed records. Not used by the harness."""
# ruff: noqa


from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["CriticalPath", "RankWaiting", "critical_path", "median_step", "waiting"]

_COMPUTE = ("F", "B", "I", "W", "OPT")


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


#: The last :func:`_step_view` (its records, plan, step, job count and answer): the critical path and
#: the waiting split of one run ask for the same view one after the other. Holding the objects
#: themselves keeps their ids from being reused while the entry lives.
_LAST_VIEW: list[Any] = []


def _step_view(records: Any, plan: Any, step: int) -> tuple[dict[int, Any], int, int]:
    """Plan job index -> its record in ``step``; the step's start and end (ns)."""
    if _LAST_VIEW and _LAST_VIEW[0] is records and _LAST_VIEW[1] is plan and _LAST_VIEW[2:4] == [step, len(records.jobs)]:
        return _LAST_VIEW[4]  # type: ignore[no-any-return]
    view = _build_step_view(records, plan, step)
    _LAST_VIEW[:] = [records, plan, step, len(records.jobs), view]
    return view


def _build_step_view(records: Any, plan: Any, step: int) -> tuple[dict[int, Any], int, int]:
    k = records.steps.index(step)
    by_key = {(j.stage, j.kind, j.microbatch): j for j in records.jobs if j.step == step}
    found = {}
    for i, (stage, kind, mb) in enumerate(plan.jobs):
        rec = by_key.get((stage, kind.value, mb))
        if rec is not None:
            found[i] = rec
    return found, int(records.step_start_ns[k]), int(records.step_end_ns[k])


def _stream_prev(plan: Any) -> list[int]:
    """Per job, the job before it on its stream in enqueue order (-1 for the first)."""
    last: dict[int, int] = {}
    prev = [-1] * plan.num_jobs
    stream = plan.stream
    for j in plan.order:
        s = stream[j]
        prev[j] = last.get(s, -1)
        last[s] = j
    return prev


def _binding(j: int, rec: dict[int, Any], plan: Any, prev: list[int]) -> tuple[int, int, bool]:
    """The constraint that released job ``j``: ``(job, time, is_dependency)``, or ``(-1, -1, False)``."""
    best, t_best, dep = -1, -1, False
    for d in plan.deps[j]:
        r = rec.get(d)
        if r is not None and r.end_ns >= t_best:
            best, t_best, dep = d, r.end_ns, True
    for d in plan.start_deps[j]:
        r = rec.get(d)
        if r is not None and r.start_ns >= t_best:
            best, t_best, dep = d, r.start_ns, True
    p = prev[j]
    r = rec.get(p) if p >= 0 else None
    if r is not None and r.end_ns > t_best:  # strictly later: a dependency wins a tie
        best, t_best, dep = p, r.end_ns, False
    return best, t_best, dep


def critical_path(records: Any, plan: Any, step: int | None = None) -> CriticalPath:
    """The critical path of ``step`` (default: :func:`median_step`) of a run of ``plan``.

    Args:
        records: the run's :class:`~harness.records.RunRecords`.
        plan: the :class:`~harness.plan.graph.Plan` that ran.
        step: a recorded step.

    Raises:
        ValueError: ``step`` is not among the recorded ones, or it recorded no job of the plan.
    """
    step = median_step(records) if step is None else step
    if step not in records.steps:
        raise ValueError(f"step {step} was not recorded (recorded: {records.steps})")
    rec, t0, _ = _step_view(records, plan, step)
    if not rec:
        raise ValueError(f"step {step} recorded no job of the plan")
    prev = _stream_prev(plan)
    j = max(rec, key=lambda i: (rec[i].end_ns, -i))
    end = rec[j].end_ns
    chain: list[int] = []
    gaps: list[int] = []
    while j >= 0:
        chain.append(j)
        j = _binding(j, rec, plan, prev)[0]
    chain.reverse()
    covered = t0
    for i in chain:
        gaps.append(max(0, rec[i].start_ns - covered))
        covered = max(covered, rec[i].end_ns)
    from harness.analysis.busy import busy_union

    # the union of the chain's intervals: an overlapped group's jobs on it (a backward released by its
    # forward's start) count once
    busy = busy_union([0] * len(chain), [rec[i].start_ns for i in chain], [rec[i].end_ns for i in chain], 1)[0]
    return CriticalPath(step, [rec[i].label for i in chain], [rec[i].rank for i in chain], gaps, end - t0, busy)


def waiting(records: Any, plan: Any, step: int | None = None) -> list[RankWaiting]:
    """Per rank, its idle time in ``step`` (default: :func:`median_step`) split by what it waited for.

    Raises:
        ValueError: ``step`` is not among the recorded ones.
    """
    step = median_step(records) if step is None else step
    if step not in records.steps:
        raise ValueError(f"step {step} was not recorded (recorded: {records.steps})")
    rec, t0, t1 = _step_view(records, plan, step)
    prev = _stream_prev(plan)
    jobs = plan.jobs
    out = []
    by_rank: dict[int, list[int]] = {}
    for i, x in rec.items():  # one pass: a scan per rank would be p x jobs
        if x.kind in _COMPUTE:
            by_rank.setdefault(x.rank, []).append(i)
    for r in range(plan.schedule.num_ranks):
        mine = sorted(by_rank.get(r, []), key=lambda i: (rec[i].start_ns, rec[i].end_ns))
        parts: dict[str, int] = {}

        def add(why: str, ns: int, parts: dict[str, int] = parts) -> None:
            if ns > 0:
                parts[why] = parts.get(why, 0) + ns

        covered = t0  # the union of the rank's compute intervals so far ends here
        for n, i in enumerate(mine):
            start, stop = rec[i].start_ns, rec[i].end_ns
            if start > covered:
                gap = start - covered
                if n == 0:
                    add("warm-up", gap)
                else:
                    b, _t, is_dep = _binding(i, rec, plan, prev)
                    if b < 0 or not is_dep:
                        add("host gap", gap)
                    elif jobs[b].kind.is_comm:
                        src = rec[b]
                        peer = next((rec[d].rank for d in list(plan.start_deps[b]) + list(plan.deps[b]) if d in rec), src.rank)
                        add(f"waiting for a transfer from rank {peer}", gap)
                    else:
                        add(f"waiting for rank {rec[b].rank}'s {rec[b].kind}", gap)
            covered = max(covered, stop)
        if t1 > covered:
            add("cool-down" if mine else "no job this step", t1 - covered)
        out.append(RankWaiting(r, sum(parts.values()), parts))
    return out
