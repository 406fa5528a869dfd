"""Frozen copies of the trace and HTA writers as they were before the column writers (issue 13):
the reference the new writers are compared with, event for event and byte for byte. Not used by the harness."""
# ruff: noqa
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any


from harness.report.layout import (
    job_label,
    rank_labels,
    rank_pid,
    rank_step_spans,
    steps_overlap,
    stream_slots,
    time_base_epoch_ns,
    track_overflow,
)

__all__ = ["KIND_CNAME", "OVERFLOW_TID", "case_trace", "write_trace"]

#: Reserved colour names of the classic trace viewer, per job kind.
KIND_CNAME = {
    "F": "thread_state_running",
    "B": "rail_load",
    "I": "rail_response",
    "W": "rail_animation",
    "SEND_F": "grey",
    "RECV_F": "grey",
    "SEND_B": "olive",
    "RECV_B": "olive",
    "OPT": "yellow",
}
STEP_CNAME = "generic_work"
#: tid offset of the extra thread that takes overlapping jobs of a stream.
OVERFLOW_TID = 100
#: tid of a rank's own step track, written where steps overlap across ranks.
RANK_STEP_TID = OVERFLOW_TID - 1


def _us(ns: int) -> float:
    return ns / 1000.0


def _inside(start_us: float, end_us: float, at_end: bool) -> float:
    """A time 1 ns inside ``[start_us, end_us]`` next to its end (or start); the
    midpoint for slices shorter than 2 ns."""
    if end_us - start_us < 0.002:
        return (start_us + end_us) / 2
    return end_us - 0.001 if at_end else start_us + 0.001


def case_trace(case: dict[str, Any], flows: bool = True) -> dict[str, Any]:
    """Build the trace document of one results-document case.

    Args:
        case: a case of the results document.
        flows: add flow events for cross-stream dependencies.

    Returns:
        ``{"traceEvents": [...], "otherData": {...}}``; times in µs.
    """
    p = int(case["schedule"]["p"])
    slots = stream_slots(case)
    labels = rank_labels(case)
    events: list[dict[str, Any]] = []
    backend = case.get("backend", "")
    n_ranks = max([p, *(s.rank + 1 for s in slots)])
    steps_pid = rank_pid(n_ranks)  # after the ranks' pids
    events.append({"ph": "M", "pid": steps_pid, "tid": 0, "name": "process_name", "args": {"name": "Steps"}})
    events.append({"ph": "M", "pid": steps_pid, "tid": 0, "name": "process_sort_index", "args": {"sort_index": -1}})
    events.append({"ph": "M", "pid": steps_pid, "tid": 0, "name": "thread_name", "args": {"name": "step"}})
    for rank in range(n_ranks):
        name = labels[rank] if rank < len(labels) else f"rank {rank} ({backend})"
        events.append({"ph": "M", "pid": rank_pid(rank), "tid": 0, "name": "process_name", "args": {"name": name}})
        events.append({"ph": "M", "pid": rank_pid(rank), "tid": 0, "name": "process_sort_index", "args": {"sort_index": rank}})
    for s in slots:
        events.append({"ph": "M", "pid": rank_pid(s.rank), "tid": s.tid, "name": "thread_name", "args": {"name": s.name}})
        events.append({"ph": "M", "pid": rank_pid(s.rank), "tid": s.tid, "name": "thread_sort_index", "args": {"sort_index": s.tid}})
    step_list = list(zip(case["steps"], case["step_start_ns"], case["step_end_ns"]))
    on = track_overflow([a for _, a, _ in step_list], [b for _, _, b in step_list], list(range(len(step_list))))
    for t in sorted(set(on) - {0}):  # a step that starts before the previous one ended on every rank
        events.append({"ph": "M", "pid": steps_pid, "tid": t, "name": "thread_name",
                       "args": {"name": "step (overlaps the previous step across ranks)" if t == 1 else f"step (overlap {t})"}})
    for k, ((step, a, b), t) in enumerate(zip(step_list, on)):
        args: dict[str, Any] = {"step": step, "span": "the step: its reference time (step_start_ns) to its last job's end"}
        if k and step_list[k - 1][2] > a:
            args["overlaps_previous_step_ns"] = step_list[k - 1][2] - a
        events.append(
            {"ph": "X", "pid": steps_pid, "tid": t, "name": f"ProfilerStep#{step}", "cat": "step",
             "ts": _us(a), "dur": _us(b) - _us(a), "cname": STEP_CNAME, "args": args}
        )
    if steps_overlap(case):  # the union spans cannot say where each rank's step was: per rank, on its own track
        for rank in range(n_ranks):
            events.append({"ph": "M", "pid": rank_pid(rank), "tid": RANK_STEP_TID, "name": "thread_name", "args": {"name": "steps"}})
            events.append({"ph": "M", "pid": rank_pid(rank), "tid": RANK_STEP_TID, "name": "thread_sort_index", "args": {"sort_index": -1}})
        for (rank, step), (a, b) in sorted(rank_step_spans(case).items()):
            events.append(
                {"ph": "X", "pid": rank_pid(rank), "tid": RANK_STEP_TID, "name": f"ProfilerStep#{step}", "cat": "step",
                 "ts": _us(a), "dur": _us(b) - _us(a), "cname": STEP_CNAME, "args": {"step": step, "span": "this rank's jobs"}}
            )
    jobs = case["jobs"]
    n = len(jobs["kind"])
    starts, ends = jobs["start_ns"], jobs["end_ns"]
    by_stream: dict[int, list[int]] = defaultdict(list)
    for i in range(n):
        by_stream[jobs["stream"][i]].append(i)
    sub = [0] * n
    for s_index, order in by_stream.items():
        for i, t in zip(order, track_overflow(starts, ends, order)):
            sub[i] = t
        extra = {t for t in (sub[i] for i in order) if t}
        slot = slots[s_index]
        for t in sorted(extra):
            tid = OVERFLOW_TID * t + slot.tid
            label = f"{slot.name} (overlap{'' if t == 1 else t})"
            events.append({"ph": "M", "pid": rank_pid(slot.rank), "tid": tid, "name": "thread_name", "args": {"name": label}})
            events.append({"ph": "M", "pid": rank_pid(slot.rank), "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}})
    where: dict[tuple[int, str], tuple[int, int, float, float]] = {}
    recompute = {(int(st), str(k)): int(ns) for st, k, ns in case.get("recompute") or []}
    for i in range(n):
        kind = jobs["kind"][i]
        mb = jobs["microbatch"][i]
        stage = jobs["stage"][i]
        slot = slots[jobs["stream"][i]]
        tid = slot.tid + OVERFLOW_TID * sub[i]
        ts, end = _us(starts[i]), _us(ends[i])
        label = job_label(stage, kind, mb)
        events.append(
            {"ph": "X", "pid": rank_pid(slot.rank), "tid": tid, "name": label, "cat": kind, "ts": ts, "dur": end - ts,
             "cname": KIND_CNAME.get(kind, "generic_work"),
             "args": {"stage": stage, "microbatch": mb, "chunk": jobs["chunk"][i], "kind": kind, "step": jobs["step"][i]}}
        )
        where[(jobs["step"][i], label)] = (rank_pid(slot.rank), tid, ts, end)
        rec = recompute.get((stage, kind))
        if rec:  # the recomputation at the start of a backward, as its own sub-slice (nested)
            events.append({"ph": "X", "pid": rank_pid(slot.rank), "tid": tid, "name": "recompute", "cat": "recompute", "ts": ts,
                           "dur": min(rec / 1000.0, end - ts), "cname": "grey", "args": {"job": label, "recompute_ns": rec}})
    memory = case.get("memory")
    if isinstance(memory, dict):  # a counter track per rank: bytes held (static + activations)
        for rank, line in enumerate(memory.get("timeline") or []):
            for t, b in zip(line.get("t_ns", []), line.get("bytes", [])):
                events.append({"ph": "C", "pid": rank_pid(rank), "tid": 0, "name": "memory (bytes)", "ts": _us(t), "args": {"bytes": b}})
    if flows:
        flow_id = 1
        deps = case.get("deps", [])
        for step in case["steps"]:
            for src, dst, edge in deps:
                a = where.get((step, src))
                b = where.get((step, dst))
                if a is None or b is None:
                    continue
                # Each end sits 1 ns inside its slice (the producer's end, or its start for a
                # start dependency - a receive starts with its send -; the consumer's start), so
                # the enclosing slice is unambiguous and arrows point forward in time.
                events.append({"ph": "s", "id": flow_id, "pid": a[0], "tid": a[1], "ts": _inside(a[2], a[3], at_end=edge != "start"),
                               "name": "dependency", "cat": "dependency"})
                events.append({"ph": "f", "id": flow_id, "pid": b[0], "tid": b[1], "ts": _inside(b[2], b[3], at_end=False),
                               "name": "dependency", "cat": "dependency", "bp": "e"})
                flow_id += 1
    other = {
        "case": case["id"],
        "schedule": case["schedule"]["name"],
        "backend": backend,
        "time_unit_note": "ts and dur are in microseconds (Trace Event Format); source times were integer ns",
    }
    epoch = time_base_epoch_ns(case)
    if epoch is not None:  # ts 0 on the host's clock, as results.json keeps it (device.host_anchor_ns / time_base_epoch_ns)
        other["time_base_epoch_ns"] = epoch
    if case.get("warnings"):
        other["warnings"] = list(case["warnings"])
    return {"traceEvents": events, "otherData": other}


