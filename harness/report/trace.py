"""Chrome Trace Event Format JSON for one case, for Perfetto and chrome://tracing.

Layout: one process per pipeline rank (device), one thread per stream
(``compute`` tid 0, ``comm`` tid 1), named with ``process_name`` /
``thread_name`` metadata and ordered with sort indices; a "Steps" process on
top with one ``ProfilerStep#N`` slice per recorded step. Jobs are complete
events (``"ph": "X"``) with ``ts``/``dur`` in µs (floats, ns precision) and
``args`` stage, micro-batch, chunk, kind, step. Cross-stream dependencies are
flow events (``s``/``f`` with integer ids, ``"bp": "e"``) bound to the slices
they connect. Only reserved ``cname`` colours are used; ``displayTimeUnit`` is
never set (Perfetto would rescale ``ts``).

Input is one case of the results document (:mod:`harness.report.results`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.report.atomic import atomic_write_json

__all__ = ["KIND_CNAME", "case_trace", "write_trace"]

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


def _us(ns: int) -> float:
    return ns / 1000.0


def _tid(stream: str) -> int:
    return 1 if stream.endswith("/comm") else 0


def case_trace(case: dict[str, Any], flows: bool = True) -> dict[str, Any]:
    """Build the trace document of one results-document case.

    Args:
        case: a case of the results document.
        flows: add flow events for cross-stream dependencies.

    Returns:
        ``{"traceEvents": [...], "otherData": {...}}``.
    """
    p = int(case["schedule"]["p"])
    streams: list[str] = case["streams"]
    events: list[dict[str, Any]] = []
    backend = case.get("backend", "")
    steps_pid = p
    events.append({"ph": "M", "pid": steps_pid, "tid": 0, "name": "process_name", "args": {"name": "Steps"}})
    events.append({"ph": "M", "pid": steps_pid, "tid": 0, "name": "process_sort_index", "args": {"sort_index": -1}})
    events.append({"ph": "M", "pid": steps_pid, "tid": 0, "name": "thread_name", "args": {"name": "step"}})
    for rank in range(p):
        events.append({"ph": "M", "pid": rank, "tid": 0, "name": "process_name", "args": {"name": f"rank {rank} ({backend})"}})
        events.append({"ph": "M", "pid": rank, "tid": 0, "name": "process_sort_index", "args": {"sort_index": rank}})
    for name in streams:
        rank = int(name.split("/")[0].removeprefix("rank"))
        tid = _tid(name)
        events.append({"ph": "M", "pid": rank, "tid": tid, "name": "thread_name", "args": {"name": name.split("/")[1]}})
        events.append({"ph": "M", "pid": rank, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}})
    for step, a, b in zip(case["steps"], case["step_start_ns"], case["step_end_ns"]):
        events.append(
            {"ph": "X", "pid": steps_pid, "tid": 0, "name": f"ProfilerStep#{step}", "cat": "step",
             "ts": _us(a), "dur": _us(b) - _us(a), "cname": STEP_CNAME, "args": {"step": step}}
        )
    jobs = case["jobs"]
    n = len(jobs["kind"])
    where: dict[tuple[int, str], tuple[int, int, float, float]] = {}
    for i in range(n):
        kind = jobs["kind"][i]
        mb = jobs["microbatch"][i]
        stage = jobs["stage"][i]
        stream = streams[jobs["stream"][i]]
        rank = jobs["rank"][i]
        tid = _tid(stream)
        ts, end = _us(jobs["start_ns"][i]), _us(jobs["end_ns"][i])
        label = f"{stage}{kind}{'' if mb is None else mb}"
        events.append(
            {"ph": "X", "pid": rank, "tid": tid, "name": label, "cat": kind, "ts": ts, "dur": end - ts,
             "cname": KIND_CNAME.get(kind, "generic_work"),
             "args": {"stage": stage, "microbatch": mb, "chunk": jobs["chunk"][i], "kind": kind, "step": jobs["step"][i]}}
        )
        where[(jobs["step"][i], label)] = (rank, tid, ts, end)
    if flows:
        flow_id = 1
        for step in case["steps"]:
            for src, dst, _edge in case.get("deps", []):
                a = where.get((step, src))
                b = where.get((step, dst))
                if a is None or b is None:
                    continue
                # Bind each end inside its slice (midpoint), so "enclosing slice" is unambiguous.
                events.append({"ph": "s", "id": flow_id, "pid": a[0], "tid": a[1], "ts": (a[2] + a[3]) / 2,
                               "name": "dependency", "cat": "dependency", "bp": "e"})
                events.append({"ph": "f", "id": flow_id, "pid": b[0], "tid": b[1], "ts": (b[2] + b[3]) / 2,
                               "name": "dependency", "cat": "dependency", "bp": "e"})
                flow_id += 1
    return {
        "traceEvents": events,
        "otherData": {
            "case": case["id"],
            "schedule": case["schedule"]["name"],
            "backend": backend,
            "time_unit_note": "ts and dur are in microseconds (Trace Event Format); source times were integer ns",
        },
    }


def write_trace(path: Path, case: dict[str, Any], flows: bool = True) -> Path:
    """Atomically write the trace of ``case`` to ``path``."""
    return atomic_write_json(path, case_trace(case, flows=flows))
