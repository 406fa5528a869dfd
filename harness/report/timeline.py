"""The review page's data of one case for its canvas timeline and grid, from numpy columns.

:func:`timeline_columns` computes it with the per-job fields as int64 arrays (one stable
sort, array arithmetic, dependencies resolved by label ids, the grid by one pass over its
edges: :func:`harness.report.grid.place_in_order`); :func:`timeline_data` gives the same
with lists (what the page's JSON holds). :func:`page_json` is the page's JSON encoder: it
writes the arrays with orjson's numpy encoder and everything else with :mod:`json`, into the
text ``json.dumps`` would write for the lists, byte for byte (jinja2's ``tojson`` filter uses
it, so ``<``, ``>``, ``&`` and ``'`` are still escaped).
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import orjson

from harness.report.cost_table import cost_durations, overlap_stretch
from harness.report.grid import GridCycleError, place_in_order, place_slots
from harness.report.jobtable import JobTable
from harness.report.layout import rank_labels, stream_slots

__all__ = ["ARRAY_FIELDS", "page_json", "timeline_columns", "timeline_data"]

_COMM = frozenset({"SEND_F", "RECV_F", "SEND_B", "RECV_B"})
#: The fields of :func:`timeline_columns` that are int64 arrays (``slot`` unless ``None``).
ARRAY_FIELDS = ("gap", "dur", "kind", "stage", "mb", "chunk", "step", "deps", "ov", "slot", "cp")


def timeline_data(case: dict[str, Any], kinds: list[dict[str, str]] | None = None, table: JobTable | None = None) -> dict[str, Any]:
    """Compact data of one case for the canvas timeline.

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
        kinds: the legend (default: :func:`harness.report.colours.kind_table` of this case).
        table: the case's jobs in columns, where the caller has them (:meth:`JobTable.from_case`).

    Raises:
        KeyError, TypeError, ValueError: the case lacks a field or holds a wrong-typed one.
    """
    data = timeline_columns(case, kinds, table)
    for key in ARRAY_FIELDS:
        if isinstance(data[key], np.ndarray):
            data[key] = data[key].tolist()
    return data


def _dep_triples(case: dict[str, Any], table: JobTable) -> np.ndarray:
    """Per recorded step (in ``case["steps"]`` order), per dependency (in ``case["deps"]`` order)
    whose two jobs the step holds: ``[src job, dst job, from_start]``, job indices in the case's
    order (the last job of a text in a step); int64, shape ``(d, 3)``."""
    deps = case.get("deps") or []
    if not deps or not table.n or not case["steps"]:
        return np.zeros((0, 3), dtype=np.int64)
    src, dst, start = table.dep_ids(deps)
    out = []
    for step in case["steps"]:
        a, b = table.find_step(step, src, by_text=True), table.find_step(step, dst, by_text=True)
        ok = (a >= 0) & (b >= 0)
        out.append(np.stack([a[ok], b[ok], start[ok].astype(np.int64)], axis=1))
    return out[0] if len(out) == 1 else np.concatenate(out)


def timeline_columns(case: dict[str, Any], kinds: list[dict[str, str]] | None = None, table: JobTable | None = None) -> dict[str, Any]:
    """:func:`timeline_data` with the per-job fields (:data:`ARRAY_FIELDS`) as int64 arrays."""
    if kinds is None:
        from harness.report.colours import kind_table

        kinds = kind_table([case])
    kind_index = {k["name"]: i for i, k in enumerate(kinds)}
    t = JobTable.from_case(case) if table is None else table
    jobs = case["jobs"]
    n = t.n
    base = min(case["step_start_ns"]) if case["step_start_ns"] else (int(t.start_ns.min()) if n else 0)
    order_a = t.stream_order()  # stream, start, end; ties keep job order
    pos_a = np.empty(n, np.int64)
    pos_a[order_a] = np.arange(n)
    starts_a = t.start_ns[order_a] - base
    durs_a = t.end_ns[order_a] - t.start_ns[order_a]
    step_bounds = [(a - base, b - base, s) for s, a, b in zip(case["steps"], case["step_start_ns"], case["step_end_ns"])]
    tick = 1
    for unit in (1000, 100, 10):  # the coarsest unit that divides every start, duration and step bound
        if not (starts_a % unit).any() and not (durs_a % unit).any() and all(x % unit == 0 for a, b, _ in step_bounds for x in (a, b)):
            tick = unit
            break
    lanes = case["streams"]
    lane_sorted = t.stream[order_a]
    nl = np.bincount(lane_sorted, minlength=len(lanes)).tolist() if n else [0] * len(lanes)
    new_lane = np.ones(n, bool)
    new_lane[1:] = lane_sorted[1:] != lane_sorted[:-1]
    prev_start = np.concatenate(([0], starts_a[:-1])) if n else starts_a
    gap = (starts_a - np.where(new_lane, 0, prev_start)) // tick
    deps = _dep_triples(case, t)
    deps[:, :2] = pos_a[deps[:, :2]]  # job indices -> sorted indices
    slots = stream_slots(case)
    names = rank_labels(case)
    comm_code = np.asarray([k in _COMM for k in t.kinds] or [False], dtype=bool)
    is_comm = comm_code[t.kind] if n else np.zeros(0, bool)
    comm_lane = [1] * len(lanes)
    for lane in np.unique(t.stream[~is_comm]).tolist():
        comm_lane[lane] = 0
    # The grid on the sorted order: a lane's jobs of one step are consecutive, deps already indices.
    step_sorted = t.step[order_a]
    chained = np.zeros(n, bool)
    chained[1:] = (lane_sorted[1:] == lane_sorted[:-1]) & (step_sorted[1:] == step_sorted[:-1])
    comm_sorted = is_comm[order_a]
    slot: np.ndarray | None
    grid_error = None
    placed = place_in_order(comm_sorted, chained, deps, starts_a)  # in the recorded times' order, where they give one
    if placed is not None:
        slot = np.asarray(placed, dtype=np.int64)
    else:
        cut = np.flatnonzero(~chained[1:]) + 1
        streams: list[list[int]] = [part.tolist() for part in np.split(np.arange(n), cut)] if n else []
        try:
            slot = np.asarray(place_slots(comm_sorted.tolist(), streams, deps.reshape(-1).tolist()), dtype=np.int64)
        except GridCycleError as e:  # a recorded order the dependencies contradict (an import): no grid, said so
            i = int(order_a[e.job])
            slot, grid_error = None, (f"the recorded stream order and the dependencies form a cycle through {jobs['stage'][i]}"
                                      f"{jobs['kind'][i]}{'' if jobs['microbatch'][i] is None else jobs['microbatch'][i]} of step {jobs['step'][i]}")
    cp: dict[str, Any] = case["critical_path"] if isinstance(case.get("critical_path"), dict) else {}
    kind_map = np.asarray([kind_index.get(k, 0) for k in t.kinds] or [0], dtype=np.int64)
    overlaps = np.asarray([x for pair in case.get("overlaps") or [] for x in pair], dtype=np.int64)
    return {
        "id": case["id"],
        "label": case.get("label", case["id"]),
        "tick": tick,
        "lanes": [f"{names[s.rank] if s.rank < len(names) else 'rank ' + str(s.rank)} · {s.name}" for s in slots],
        "steps": [[a // tick, b // tick, s] for a, b, s in step_bounds],
        "nl": nl,
        "gap": gap,
        "dur": durs_a // tick,
        "kind": kind_map[t.kind[order_a]] if n else np.zeros(0, np.int64),
        "stage": t.stage[order_a],
        "mb": t.microbatch[order_a],
        "chunk": t.chunk[order_a],
        "step": step_sorted,
        "deps": deps.reshape(-1),
        "ov": pos_a[overlaps],
        "mem": _memory_lanes(case, base),
        "lrank": [s.rank for s in slots],
        "lcomm": [1 if (comm_lane[k] and nl[k]) or s.name.startswith("comm") else 0 for k, s in enumerate(slots)],
        "slot": slot,
        "gridError": grid_error,
        "cp": _critical_jobs(cp, t, pos_a),
        "cost": cost_durations(case, t),
        "olap": overlap_stretch(case, t),
    }


def _critical_jobs(cp: dict[str, Any], table: JobTable, pos: np.ndarray) -> np.ndarray:
    """The sorted indices of the critical path's jobs (``cp["jobs"]``, texts of step ``cp["step"]``)
    found in that step; int64, shape ``(k,)``."""
    texts = [str(j) for j in cp.get("jobs") or []]
    step = cp.get("step")
    if not texts or not isinstance(step, (int, float)) or step != int(step) or not table.n:
        return np.zeros(0, dtype=np.int64)
    label = table.ids_of(texts)
    found = table.find(np.full(len(texts), int(step), dtype=np.int64), label, by_text=True)
    return pos[found[found >= 0]]


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


_MARK = "\x00array{}\x00"
_MARK_RE = re.compile(re.escape(json.dumps(_MARK.format("X"))).replace("X", "([0-9]+)"))
_PLAIN = frozenset({int, float, str, bool, type(None)})


def page_json(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(obj, **kwargs)`` where ``obj`` may hold int64 numpy arrays (in dicts and lists),
    written as ``json.dumps`` writes their ``tolist()``: the arrays by orjson's numpy encoder
    (an integer list's text is the same in both), the rest by :mod:`json` with ``kwargs``.

    Raises:
        TypeError, ValueError: as ``json.dumps`` (a non-finite float with ``allow_nan=False``).
    """
    arrays: list[np.ndarray] = []

    def swap(x: Any) -> Any:
        if isinstance(x, np.ndarray):
            if x.dtype.kind not in "iu" or x.ndim != 1:
                return x.tolist()
            arrays.append(x)
            return _MARK.format(len(arrays) - 1)
        if isinstance(x, dict):
            return {k: swap(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)) and not set(map(type, x)) <= _PLAIN:
            return [swap(v) for v in x]
        return x

    text = json.dumps(swap(obj), **kwargs)
    if not arrays:
        return text
    parts = _MARK_RE.split(text)  # text, index, text, index, ..., text
    for k in range(1, len(parts), 2):
        parts[k] = orjson.dumps(np.ascontiguousarray(arrays[int(parts[k])], dtype=np.int64), option=orjson.OPT_SERIALIZE_NUMPY).decode("ascii")
    return "".join(parts)
