"""The critical path in one line: where it runs, and how much of the step it holds.

The page shows it before the path's full chain of jobs (:func:`harness.report.html`'s critical-path
text): which rank holds most of the path's time, which kinds of job it runs there and whether that
stretch opens, closes or sits inside the path, with its share of the step, and how often the path
changes rank. E.g. ``"runs through rank 3's I/W tail, 62 % of the step on rank 3; 51 jobs on 4 rank(s), 9
hand-off(s) between ranks"``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["critical_summary"]


def critical_summary(case: dict[str, Any], table: Any = None) -> str | None:
    """One line on ``case``'s critical path (module doc), or ``None`` where it has none, or its jobs
    cannot be found among the case's recorded jobs.

    Args:
        case: a results-document case (its ``critical_path``: ``step``, ``jobs``, ``ranks``, ``length_ns``).
        table: the case's jobs in columns (:class:`harness.report.jobtable.JobTable`), where the caller has it.
    """
    from harness.report.jobtable import JobTable

    cp = case.get("critical_path")
    if not isinstance(cp, dict) or not isinstance(cp.get("jobs"), list) or not cp["jobs"] or cp.get("step") not in case["steps"]:
        return None
    jobs = [str(j) for j in cp["jobs"]]
    ranks = cp.get("ranks")
    t = JobTable.from_case(case) if table is None else table
    try:
        rows = t.find_step(int(cp["step"]), t.ids_of(jobs), by_text=True)
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    if len(rows) != len(jobs) or (rows < 0).any():
        return None
    if not isinstance(ranks, list) or len(ranks) != len(jobs):
        ranks = t.rank[rows].tolist()
    durations = (t.end_ns[rows] - t.start_ns[rows]).tolist()
    k = case["steps"].index(cp["step"])
    step_ns = case["step_end_ns"][k] - case["step_start_ns"][k]
    # stretches of consecutive path jobs on one rank: (rank, first, last) indices into the path
    runs: list[tuple[int, int, int]] = []
    for i, r in enumerate(ranks):
        if runs and runs[-1][0] == r:
            runs[-1] = (r, runs[-1][1], i)
        else:
            runs.append((int(r), i, i))
    on_rank: Counter[int] = Counter()
    for r, d in zip(ranks, durations):
        on_rank[int(r)] += int(d)
    top = max(on_rank, key=lambda r: (on_rank[r], -r))
    longest = max((run for run in runs if run[0] == top), key=lambda run: sum(durations[run[1]:run[2] + 1]))
    kinds = [j.lstrip("0123456789").rstrip("0123456789") for j in jobs[longest[1]:longest[2] + 1]]
    order = {k: i for i, k in enumerate(("F", "B", "I", "W"))}
    shown = "/".join(sorted(dict.fromkeys(k for k in kinds if k), key=lambda k: (order.get(k, 9), k)))
    where = ("whole run" if len(runs) == 1 else "tail" if longest[2] == len(jobs) - 1 else "head" if longest[1] == 0
             else "stretch")
    share = 100 * on_rank[top] / step_ns if step_ns else 0.0
    return (f"runs through rank {top}'s {shown} {where}, {share:.0f} % of the step on rank {top}; "
            f"{len(jobs)} jobs on {len(on_rank)} rank(s), {len(runs) - 1} hand-off(s) between ranks")
