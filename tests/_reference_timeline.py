"""The page's data as harness.report.html wrote it before issue 13's column version (frozen at
commit 0d550c7: timeline_data with harness/report/grid.py's place_slots of then, the busy bars, and
harness/report/cost_table.py's overlap_stretch, its sentence reworded since): the reference the new one must
equal, value for value."""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

from harness.report.colours import kind_table
from harness.report.cost_table import _group_rule, _ms, _rebuild, cost_durations
from harness.report.grid import GridCycleError
from harness.report.layout import rank_labels, stream_slots

_COMM = frozenset({"SEND_F", "RECV_F", "SEND_B", "RECV_B"})


def place_slots(comm: list[bool], streams: list[list[int]], deps: list[int]) -> list[int]:
    n = len(comm)
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for members in streams:
        for a, b in pairwise(members):
            succ[a].append(b)
            indeg[b] += 1
    for k in range(0, len(deps), 3):
        d = deps[k + 1]
        succ[deps[k]].append(~d if deps[k + 2] else d)
        indeg[d] += 1
    ready = [0] * n
    todo = [i for i in range(n) if indeg[i] == 0]
    done = 0
    while todo:
        i = todo.pop()
        done += 1
        here = ready[i]
        after = here if comm[i] else here + 1
        for j in succ[i]:
            if j < 0:
                j = ~j
                if here > ready[j]:
                    ready[j] = here
            elif after > ready[j]:
                ready[j] = after
            indeg[j] -= 1
            if indeg[j] == 0:
                todo.append(j)
    if done < n:
        raise GridCycleError(next(i for i in range(n) if indeg[i] > 0))
    return ready


def timeline_data(case: dict[str, Any], kinds: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """The page data of one case, as before (see module doc).

    Jobs are sorted by lane (stream) and start; ``nl[l]`` is the number of jobs
    on lane ``l``; ``gap`` is each job's start minus the previous job's start on
    its lane (the first: minus 0), ``dur`` its duration, both integers in units
    of ``tick`` ns, relative to the first recorded step's start. ``mb`` is -1
    for none. ``deps`` holds triples ``[src, dst, from_start]`` of sorted job
    indices per recorded step; ``ov`` pairs of overlapping jobs (imported logs).
    For the grid view and the controls: ``slot`` each job's grid slot
    (:func:`harness.report.grid.place_slots`, as :func:`~harness.report.grid.grid_slots`;
    ``None`` with ``gridError`` saying why),
    ``lrank``/``lcomm`` each lane's rank and whether it carries transfers only,
    ``cp`` the critical path's job indices (its step), ``cost`` the cost model's
    duration per ``"stage,kind"`` in ns (:func:`harness.report.cost_table.cost_durations`), ``olap``
    per job label of an overlapped F&B group how the group's time stretches it
    (:func:`harness.report.cost_table.overlap_stretch`).

    Args:
        case: a results-document case.
        kinds: the legend (default: :func:`kind_table` of this case).
    """
    import numpy as np

    kinds = kinds or kind_table([case])
    kind_index = {k["name"]: i for i, k in enumerate(kinds)}
    jobs = case["jobs"]
    n = len(jobs["kind"])
    base = min(case["step_start_ns"]) if case["step_start_ns"] else min(jobs["start_ns"], default=0)
    # Columns in numpy: the per-job work below is a sort and array arithmetic, not a Python loop per job.
    stream_a = np.array(jobs["stream"], np.int64)
    start_a = np.array(jobs["start_ns"], np.int64)
    end_a = np.array(jobs["end_ns"], np.int64)
    order_a = np.lexsort((end_a, start_a, stream_a)) if n else np.zeros(0, np.int64)  # stable: ties keep job order
    order = order_a.tolist()
    pos_a = np.empty(n, np.int64)
    pos_a[order_a] = np.arange(n)
    pos = pos_a.tolist()
    starts_a = start_a[order_a] - base
    durs_a = end_a[order_a] - start_a[order_a]
    step_bounds = [(a - base, b - base, s) for s, a, b in zip(case["steps"], case["step_start_ns"], case["step_end_ns"])]
    tick = 1
    for unit in (1000, 100, 10):  # the coarsest unit that divides every start, duration and step bound (_tick)
        if not (starts_a % unit).any() and not (durs_a % unit).any() and all(x % unit == 0 for a, b, _ in step_bounds for x in (a, b)):
            tick = unit
            break
    lanes = case["streams"]
    lane_sorted = stream_a[order_a]
    nl = np.bincount(lane_sorted, minlength=len(lanes)).tolist() if n else [0] * len(lanes)
    new_lane = np.ones(n, bool)
    new_lane[1:] = lane_sorted[1:] != lane_sorted[:-1]
    prev_start = np.concatenate(([0], starts_a[:-1])) if n else starts_a
    gap = ((starts_a - np.where(new_lane, 0, prev_start)) // tick).tolist()
    labels = [f"{st}{k}{'' if mb is None else mb}" for st, k, mb in zip(jobs["stage"], jobs["kind"], jobs["microbatch"])]
    label_of: dict[tuple[int, str], int] = dict(zip(zip(jobs["step"], labels), pos))
    deps: list[int] = []
    for step in case["steps"]:
        for src, dst, edge in case.get("deps", []):
            a, b = label_of.get((step, src)), label_of.get((step, dst))
            if a is not None and b is not None:
                deps.extend((a, b, 1 if edge == "start" else 0))
    slots = stream_slots(case)
    names = rank_labels(case)
    is_comm = np.array([k in _COMM for k in jobs["kind"]], bool)
    comm_lane = [1] * len(lanes)
    for lane in np.unique(stream_a[~is_comm]).tolist():
        comm_lane[lane] = 0
    # The grid on the sorted order: a lane's jobs of one step are consecutive, deps already indices.
    step_sorted = np.array(jobs["step"], np.int64)[order_a]
    cut = np.flatnonzero((lane_sorted[1:] != lane_sorted[:-1]) | (step_sorted[1:] != step_sorted[:-1])) + 1
    streams: list[list[int]] = [part.tolist() for part in np.split(np.arange(n), cut)] if n else []
    try:
        slot: list[int] | None = place_slots(is_comm[order_a].tolist(), streams, deps)
        grid_error = None
    except GridCycleError as e:  # a recorded order the dependencies contradict (an import): no grid, said so
        i = order[e.job]
        slot, grid_error = None, (f"the recorded stream order and the dependencies form a cycle through {jobs['stage'][i]}"
                                  f"{jobs['kind'][i]}{'' if jobs['microbatch'][i] is None else jobs['microbatch'][i]} of step {jobs['step'][i]}")
    cp: dict[str, Any] = case["critical_path"] if isinstance(case.get("critical_path"), dict) else {}
    return {
        "id": case["id"],
        "label": case.get("label", case["id"]),
        "tick": tick,
        "lanes": [f"{names[s.rank] if s.rank < len(names) else 'rank ' + str(s.rank)} · {s.name}" for s in slots],
        "steps": [[a // tick, b // tick, s] for a, b, s in step_bounds],
        "nl": nl,
        "gap": gap,
        "dur": (durs_a // tick).tolist(),
        "kind": [kind_index.get(jobs["kind"][i], 0) for i in order],
        "stage": [jobs["stage"][i] for i in order],
        "mb": [-1 if jobs["microbatch"][i] is None else jobs["microbatch"][i] for i in order],
        "chunk": [jobs["chunk"][i] for i in order],
        "step": step_sorted.tolist(),
        "deps": deps,
        "ov": [pos[x] for pair in case.get("overlaps", []) for x in pair],
        "mem": _memory_lanes(case, base),
        "lrank": [s.rank for s in slots],
        "lcomm": [1 if (comm_lane[k] and nl[k]) or s.name.startswith("comm") else 0 for k, s in enumerate(slots)],
        "slot": slot,
        "gridError": grid_error,
        "cp": [label_of[(cp["step"], str(j))] for j in cp.get("jobs") or [] if (cp.get("step"), str(j)) in label_of],
        "cost": cost_durations(case),
        "olap": overlap_stretch(case),
    }


def _memory_lanes(case: dict[str, Any], base: int) -> dict[str, Any] | None:
    """For the timeline's memory lanes: per rank the bytes held as a step function, times in µs
    from the timeline's base, and the scale (the largest peak, or the limit if higher)."""
    mem = case.get("memory")
    if not isinstance(mem, dict) or not isinstance(mem.get("timeline"), list):
        return None
    lines = []
    for line in mem["timeline"]:
        if not isinstance(line, dict):
            return None
        lines.append({"t": [(t - base) / 1000 for t in line.get("t_ns", [])], "b": list(line.get("bytes", []))})
    peaks = [int(x) for x in mem.get("peak_bytes") or [0]]
    limit = mem.get("limit_bytes")
    top = max(peaks + ([int(limit)] if isinstance(limit, int) else []) + [1])
    return {"lines": lines, "peak": peaks, "limit": limit if isinstance(limit, int) else None, "top": top}




def _stage_bars(case: dict[str, Any]) -> list[dict[str, Any]]:
    """Per rank: mean busy time per stage over recorded steps, mean idle, as % of mean step time."""
    jobs = case["jobs"]
    steps = case["steps"]
    p = int(case["schedule"]["p"])
    if not steps:
        return []
    busy: dict[tuple[int, int], int] = defaultdict(int)
    for i in range(len(jobs["kind"])):
        if jobs["kind"][i] not in _COMM:
            busy[(jobs["rank"][i], jobs["stage"][i])] += jobs["end_ns"][i] - jobs["start_ns"][i]
    per_step = case["metrics"].get("per_step") or []
    step_time = sum(b - a for a, b in zip(case["step_start_ns"], case["step_end_ns"])) / len(steps)
    labels = rank_labels(case)
    out = []
    for r in range(p):
        segs = []
        for (rank, stage), ns in sorted(busy.items()):
            if rank == r:
                mean = ns / len(steps)
                segs.append({"stage": stage, "ns": mean, "pct": 100 * mean / step_time if step_time else 0.0})
        if per_step and all(r < len(s["idle_ns"]) and r < len(s["busy_ns"]) for s in per_step):
            idle = sum(s["idle_ns"][r] for s in per_step) / len(per_step)
            busy_r = sum(s["busy_ns"][r] for s in per_step) / len(per_step)
            summed = sum(s["ns"] for s in segs)
            if summed > busy_r > 0:  # overlapping imported jobs: busy is their union, scale the stages to it
                for s in segs:
                    s["ns"] *= busy_r / summed
                    s["pct"] *= busy_r / summed
        else:
            idle = max(0.0, step_time - sum(s["ns"] for s in segs))
        total_pct = sum(s["pct"] for s in segs)
        out.append({"rank": r, "label": labels[r], "segs": segs, "idle_ns": idle,
                    "idle_pct": max(0.0, min(100.0 - min(total_pct, 100.0), 100 * idle / step_time if step_time else 0.0)),
                    "busy_ns": sum(s["ns"] for s in segs)})
    return out


def overlap_stretch(case: dict[str, Any]) -> dict[str, str]:
    """For a job's tooltip: per job label of an overlapped F&B group (``OVERLAP_F_B``, jobs joined by
    a ``start`` dependency in ``case["deps"]``) one sentence that says how long the group lasts
    (:func:`harness.model.overlap.group_ns`) and that the job spans it (the sentence as worded since
    issue 25, when a group's jobs stopped being stretched; the sifting is the frozen version's).

    Args:
        case: a results-document case with ``cost``, ``deps`` and ``jobs``.

    Returns:
        ``{"0F3": "in an overlapped F&B group with 7B1 ...", ...}``; empty without groups or without a
        cost model that can be rebuilt (:func:`cost_durations`).
    """
    table = cost_durations(case)
    cost = case.get("cost")
    if not table or not isinstance(cost, dict):
        return {}
    firsts: dict[str, list[str]] = {}
    for src, dst, edge in case.get("deps") or []:
        # a group's later jobs start with its first; a receive starting with its send is no group
        if edge == "start" and not any(t in str(src) or t in str(dst) for t in ("SEND", "RECV")):
            firsts.setdefault(str(src), [str(src)]).append(str(dst))
    if not firsts:
        return {}
    from harness.errors import ConfigError
    from harness.model.overlap import group_ns
    from harness.schedule.model import parse_job

    model = _rebuild(cost)
    num_stages = int(case["schedule"]["p"]) * int(case["schedule"]["v"])
    rule = _group_rule(cost)
    out: dict[str, str] = {}
    for members in firsts.values():
        try:
            jobs = tuple(parse_job(label) for label in members)
            alone = tuple(table[f"{j.stage},{j.kind.value}"] for j in jobs)
            g = group_ns(model, jobs, alone, num_stages)
        except (ConfigError, KeyError, ValueError):
            continue
        for label, d in zip(members, alone):  # (the sentence as issue 25 words it: every job spans its group)
            others = ", ".join(x for x in members if x != label)
            out[label] = (f"overlapped F&B group with {others}: the group lasts {_ms(g)} ms ({rule}) from when every member's "
                          f"input is in; this job ({_ms(d)} ms alone) spans it and hands its output on at its end")
    return out
