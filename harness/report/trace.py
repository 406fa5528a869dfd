"""Chrome Trace Event Format JSON for one case, for Perfetto and chrome://tracing.

Layout: one process per pipeline rank (device; pid = rank + 1, as viewers take pid 0
for the idle process), one thread per stream
(``compute`` tid 0, then one ``comm↔{q}`` per peer rank, in the case's stream order), named with
``process_name`` / ``thread_name`` metadata and ordered with sort indices; a
"Steps" process on top with one ``ProfilerStep#N`` slice per recorded step (from its
reference time, ``step_start_ns``, to the end of its last job: on a timed backend the
reference time is when the host began the step, a little before its first job starts). Where those spans overlap (imported logs: one device's
step ends after another began the next), a step that starts before the previous one
ended goes on a second Steps thread, "step (overlaps the previous step across ranks)",
with ``args.overlaps_previous_step_ns``, and each rank gets its own ``steps`` thread
(tid :data:`RANK_STEP_TID`) with its own step spans, so every track nests.
``otherData.time_base_epoch_ns`` is the epoch time (ns) of ``ts`` 0 where the run had
a host clock (cpu, cuda, imported logs). Jobs are complete events (``"ph": "X"``) with ``ts``/``dur`` in µs (floats,
ns precision) and ``args`` stage, micro-batch, chunk, kind, step.
Cross-stream dependencies are flow events (``s``/``f`` with integer ids,
``"bp": "e"``) bound to the slices they connect. Where the cost model
recomputes activations, a backward starts with a nested ``recompute`` slice;
where it models memory, each rank has a counter track ``memory (bytes)``
(``"ph": "C"``), the bytes held over time. Only reserved ``cname``
colours are used; ``displayTimeUnit`` is never set (Perfetto would rescale
``ts``). Should two jobs of one stream overlap (only imported, host-stamped
logs do that), the later one goes on an extra thread ``<stream> (overlap)``,
so every track nests strictly.

The file is written from columns (:mod:`harness.report.jobtable`,
:mod:`harness.report.jsontext`): per event shape, the number columns' texts made in C
interleaved with the constant text between the fields (:func:`~harness.report.jsontext.join_rows`),
streamed in chunks; its text is what ``json.dumps(case_trace(case), separators=(",", ":"))``
of the same events would be, byte for byte. Every step of it is linear in the
jobs (and the dependencies times the steps, for flows).

Input is one case of the results document (:mod:`harness.report.results`)::

    doc = load_results(Path("reports/results.json"))
    write_trace(Path("trace.json"), doc["cases"][0])
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from harness._gcpause import gc_paused
from harness.report.jobtable import JobTable
from harness.report.jsontext import (
    CHUNK_ROWS,
    document_parts,
    float_texts,
    int_texts,
    join_rows,
    microbatch_texts,
    number_text,
    pick,
    write_document,
)
from harness.report.layout import (
    rank_labels,
    rank_pid,
    rank_step_spans,
    steps_overlap,
    stream_slots,
    time_base_epoch_ns,
    track_overflow,
)
from harness.report.output import open_output

__all__ = ["KIND_CNAME", "OVERFLOW_TID", "case_trace", "first_steps", "trace_text", "write_trace"]

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
    "UNSHARD": "startup",
    "RESHARD": "light_memory_dump",
    "REDUCE_GRAD": "detailed_memory_dump",
}
STEP_CNAME = "generic_work"
#: tid offset of the extra thread that takes overlapping jobs of a stream.
OVERFLOW_TID = 100
#: tid of a rank's own step track, written where steps overlap across ranks.
RANK_STEP_TID = OVERFLOW_TID - 1
_SEP = (",", ":")


def _us(ns: int) -> float:
    return ns / 1000.0


def first_steps(case: dict[str, Any], steps: int | None) -> dict[str, Any]:
    """``case`` with only its first ``steps`` recorded steps (their jobs, step spans, and the
    memory counter points up to the last kept step's end); ``case`` itself when it has no
    more steps than that or ``steps`` is ``None``. Linear in the jobs. The cut case holds
    ``traced_steps`` (``{"traced", "recorded"}``), which the trace's ``otherData`` says.

    Raises:
        ValueError: ``steps`` under 1.
    """
    if steps is None or len(case["steps"]) <= steps:
        return case
    if steps < 1:
        raise ValueError(f"traced steps must be 1 or more, not {steps}")
    kept = case["steps"][:steps]
    step = np.asarray(case["jobs"]["step"], dtype=np.int64)
    take = np.flatnonzero(np.isin(step, np.asarray(kept, dtype=np.int64))).tolist()
    jobs = {name: [col[i] for i in take] for name, col in case["jobs"].items()}
    out = {**case, "steps": kept, "step_start_ns": case["step_start_ns"][:steps], "step_end_ns": case["step_end_ns"][:steps], "jobs": jobs,
           "traced_steps": {"traced": steps, "recorded": len(case["steps"])}}  # said in the trace's otherData
    out.pop("overlaps", None)  # job indices of the whole case
    memory = case.get("memory")
    if isinstance(memory, dict) and memory.get("timeline"):
        until = max(case["step_end_ns"][:steps])
        lines = []
        for line in memory["timeline"]:
            pairs = [(t, b) for t, b in zip(line.get("t_ns", []), line.get("bytes", [])) if t <= until]
            lines.append({**line, "t_ns": [t for t, _ in pairs], "bytes": [b for _, b in pairs]})
        out["memory"] = {**memory, "timeline": lines}
    return out


def _head_events(case: dict[str, Any], slots: list[Any]) -> list[dict[str, Any]]:
    """The metadata and step events, which come before the jobs' (few: per rank, stream and step)."""
    p = int(case["schedule"]["p"])
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
    return events


def _overflow_events(table: JobTable, slots: list[Any], sub: np.ndarray) -> list[dict[str, Any]]:
    """Thread metadata of the extra tracks that take overlapping jobs, per stream in the
    order of its first job."""
    events: list[dict[str, Any]] = []
    if not sub.any():
        return events
    streams, first = np.unique(table.stream, return_index=True)
    for s_index in streams[np.argsort(first, kind="stable")].tolist():
        slot = slots[s_index]
        for t in np.unique(sub[table.stream == s_index]).tolist():
            if not t:
                continue
            tid = OVERFLOW_TID * t + slot.tid
            label = f"{slot.name} (overlap{'' if t == 1 else t})"
            events.append({"ph": "M", "pid": rank_pid(slot.rank), "tid": tid, "name": "thread_name", "args": {"name": label}})
            events.append({"ph": "M", "pid": rank_pid(slot.rank), "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}})
    return events


class _Placed:
    """Per job: pid, tid, ts and end (µs floats), as the job events place them; ``track`` numbers
    each (pid, tid) pair, and ``track_head[track]`` is the text a job event of it starts with."""

    def __init__(self, table: JobTable, slots: list[Any], sub: np.ndarray) -> None:
        slot_pid = np.asarray([rank_pid(s.rank) for s in slots] or [0], dtype=np.int64)
        slot_tid = np.asarray([s.tid for s in slots] or [0], dtype=np.int64)
        self.pid = slot_pid[table.stream]
        self.tid = slot_tid[table.stream] + OVERFLOW_TID * sub
        self.ts = table.start_ns / 1000.0
        self.end = table.end_ns / 1000.0
        self.dur = self.end - self.ts
        levels = int(sub.max()) + 1 if len(sub) else 1
        self.track = table.stream + len(slot_pid) * sub
        s = len(slot_pid)
        self.track_ids = [(int(slot_pid[k % s]), int(slot_tid[k % s]) + OVERFLOW_TID * (k // s)) for k in range(s * levels)]
        self.track_head = [f'{{"ph":"X","pid":{pid},"tid":{tid},"name":"' for pid, tid in self.track_ids]


def _kind_texts(kinds: list[str]) -> tuple[list[str], list[str], list[str], list[str]]:
    """Per kind code, the constant texts of a job event that name its kind: the kind inside the
    ``name`` string, the text from ``name``'s end to ``ts``, from ``dur`` to ``args.stage`` (the
    colour) and from ``chunk`` to ``step``."""
    inner = [json.dumps(kind)[1:-1] for kind in kinds]  # the kind inside a JSON string; a job text is digits + kind + digits
    cname = [json.dumps(KIND_CNAME.get(kind, "generic_work")) for kind in kinds]
    return (inner, ['","cat":"' + k + '","ts":' for k in inner], [',"cname":' + c + ',"args":{"stage":' for c in cname],
            [',"kind":"' + k + '","step":' for k in inner])


def _job_rows(table: JobTable, placed: _Placed, recompute: dict[tuple[int, str], int]) -> Iterator[str]:
    """The job events (each followed by its ``recompute`` sub-slice where the cost model recomputes),
    in chunks of :data:`CHUNK_ROWS` jobs, each column's numbers made in C (:func:`join_rows`)."""
    in_name, to_ts, to_stage, to_step = _kind_texts(table.kinds)
    rec = np.zeros(table.n, dtype=np.int64)
    code = {kind: k for k, kind in enumerate(table.kinds)}
    wanted = [(st, code[kind], int(ns or 0)) for (st, kind), ns in recompute.items() if kind in code and ns]
    if wanted and table.n:  # per (stage, kind) the recomputed ns, looked up per job
        span = max(int(table.stage.max()), *(st for st, _, _ in wanted)) + 1
        by_pair = np.zeros((span, len(table.kinds)), dtype=np.int64)
        for st, k, ns in wanted:
            if st >= 0:
                by_pair[st, k] = ns
        rec = by_pair[table.stage, table.kind]
    for lo in range(0, table.n, CHUNK_ROWS):
        cut = slice(lo, min(table.n, lo + CHUNK_ROWS))
        kind = table.kind[cut]
        stage = int_texts(table.stage[cut])
        ts, dur = float_texts(placed.ts[cut]), float_texts(placed.dur[cut])
        mb_name, mb_arg = microbatch_texts(table.microbatch[cut])
        parts: list[Any] = [pick(placed.track_head, placed.track[cut]), stage, pick(in_name, kind), mb_name,
                            pick(to_ts, kind), ts, ',"dur":', dur, pick(to_stage, kind), stage, ',"microbatch":', mb_arg,
                            ',"chunk":', int_texts(table.chunk[cut]), pick(to_step, kind), int_texts(table.step[cut]), "}}"]
        with_rec = np.flatnonzero(rec[cut] > 0).tolist()
        if with_rec:  # the recomputation at the start of a backward, nested: after its job, in the same row
            tail = [""] * len(kind)
            for k in with_rec:
                i, r = lo + k, int(rec[lo + k])
                job = f"{stage[k]}{in_name[int(kind[k])]}{mb_name[k]}"
                tail[k] = (f',{{"ph":"X","pid":{placed.pid[i]},"tid":{placed.tid[i]},"name":"recompute","cat":"recompute","ts":{ts[k]},'
                           f'"dur":{min(r / 1000.0, float(placed.dur[i]))!r},"cname":"grey","args":{{"job":"{job}","recompute_ns":{r}}}}}')
            parts.append(tail)
        yield ("" if lo == 0 else ",") + join_rows(parts, ",")


def _memory_rows(case: dict[str, Any]) -> Iterator[str]:
    """The per-rank memory counter events (bytes held over time)."""
    memory = case.get("memory")
    if not isinstance(memory, dict):
        return
    row = '{"ph":"C","pid":%d,"tid":0,"name":"memory (bytes)","ts":%r,"args":{"bytes":%s}}'
    first = True
    for rank, line in enumerate(memory.get("timeline") or []):
        pid = rank_pid(rank)
        pairs = list(zip(line.get("t_ns", []), line.get("bytes", [])))
        if not pairs:
            continue
        text = ",".join([row % (pid, _us(t), number_text(b)) for t, b in pairs])
        yield text if first else "," + text
        first = False


def _flow_points(case: dict[str, Any], table: JobTable, placed: _Placed) -> Iterator[tuple[Any, Any, Any, Any, int]]:
    """Per chunk of :data:`CHUNK_ROWS` dependencies of each recorded step: the producers' and consumers'
    rows and the two ends' times (µs) of the arrows that point forward in time (see :func:`_flow_rows`),
    and how many of the chunk's dependencies get none."""
    deps = case.get("deps") or []
    if not deps or not table.n:
        return
    src, dst, at_start = table.dep_ids(deps)
    at_end = ~at_start
    for step in case["steps"]:  # step by step, dependency by dependency
        a, b = table.find_step(step, src), table.find_step(step, dst)
        ok = (a >= 0) & (b >= 0)
        a, b, end_side = a[ok], b[ok], at_end[ok]
        for lo in range(0, len(a), CHUNK_ROWS):
            ca, cb, ce = a[lo:lo + CHUNK_ROWS], b[lo:lo + CHUNK_ROWS], end_side[lo:lo + CHUNK_ROWS]
            a0, a1, b0, b1 = placed.ts[ca], placed.end[ca], placed.ts[cb], placed.end[cb]
            s_ts = np.where(a1 - a0 < 0.002, (a0 + a1) / 2, np.where(ce, a1 - 0.001, a0 + 0.001))
            # the consumer's start; later inside it where the arrow leaves later (a receive posted before its send
            # starts, as MPI runs post them), so that it never points back in time
            f_ts = np.where(b1 - b0 < 0.002, (b0 + b1) / 2, np.minimum(np.maximum(b0 + 0.001, s_ts), b1 - 0.001))
            forward = f_ts >= s_ts  # not where the consumer ended before the producer's point (see _backward_flows)
            dropped = len(forward) - int(forward.sum())
            if dropped:
                ca, cb, s_ts, f_ts = ca[forward], cb[forward], s_ts[forward], f_ts[forward]
            yield ca, cb, s_ts, f_ts, dropped


def _backward_flows(case: dict[str, Any], table: JobTable, placed: _Placed) -> int:
    """How many dependencies get no arrow because their consumer ended before the producer's end (or, for
    a receive, before its send started): a receive that only posts, as an imported ``torch.profiler``
    trace records PyTorch's ``irecv``, or a pair the clock alignment misplaces within its bound."""
    return sum(dropped for *_, dropped in _flow_points(case, table, placed))


def _flow_rows(case: dict[str, Any], table: JobTable, placed: _Placed) -> Iterator[str]:
    """Flow events for each dependency in each recorded step, bound to the slices they connect.

    Each end sits 1 ns inside its slice (the producer's end, or its start for a start
    dependency - a receive starts with its send -; the consumer's start, or later in the consumer
    where the producer's end is later, as for a receive posted before its send starts), so the
    enclosing slice is unambiguous and arrows point forward in time; the midpoint in slices under 2 ns.
    A dependency whose consumer ended before that point gets no arrow (:func:`_backward_flows` counts
    them for ``otherData``). Where a step holds two jobs of one text, the later one is taken. Written
    in chunks of :data:`CHUNK_ROWS` dependencies (:func:`join_rows`).
    """
    mid = [f',"pid":{pid},"tid":{tid},"ts":' for pid, tid in placed.track_ids]
    flow_id, first = 1, True
    for ca, cb, s_ts, f_ts, _ in _flow_points(case, table, placed):
        ids = int_texts(np.arange(flow_id, flow_id + len(ca), dtype=np.int64))
        flow_id += len(ca)
        text = join_rows(['{"ph":"s","id":', ids, pick(mid, placed.track[ca]), float_texts(s_ts),
                          ',"name":"dependency","cat":"dependency"},{"ph":"f","id":', ids, pick(mid, placed.track[cb]), float_texts(f_ts),
                          ',"name":"dependency","cat":"dependency","bp":"e"}'], ",")
        yield text if first else "," + text
        first = False


def _other_data(case: dict[str, Any]) -> dict[str, Any]:
    other = {
        "case": case["id"],
        "schedule": case["schedule"]["name"],
        "backend": case.get("backend", ""),
        "time_unit_note": "ts and dur are in microseconds (Trace Event Format); source times were integer ns",
    }
    epoch = time_base_epoch_ns(case)
    if epoch is not None:  # ts 0 on the host's clock, as results.json keeps it (device.host_anchor_ns / time_base_epoch_ns)
        other["time_base_epoch_ns"] = epoch
    if case.get("warnings"):
        other["warnings"] = list(case["warnings"])
    cut = case.get("traced_steps")
    if isinstance(cut, dict):
        other["traced_steps"] = (f"the first {cut['traced']} of the case's {cut['recorded']} recorded steps (--trace-steps "
                                 f"{cut['traced']}); results.json, the HTA files and the report page hold all {cut['recorded']}")
    return other


@gc_paused  # millions of short-lived strings: the cyclic collector would scan them over and over
def write_trace_to(fh: IO[str], case: dict[str, Any], flows: bool = True, table: JobTable | None = None) -> None:
    """Write the trace document of one results-document case to the text file ``fh``
    (see module doc for its layout; times in µs). ``table``: the case's jobs in columns,
    where the caller has them (:meth:`JobTable.from_case` of this very case).

    Raises:
        KeyError, TypeError, ValueError, IndexError: the case lacks a field or holds a
            wrong-typed one (:func:`harness.report.fields.check_cases` names it first).
    """
    table = JobTable.from_case(case) if table is None else table
    slots = stream_slots(case)
    sub = table.sub_tracks()
    placed = _Placed(table, slots, sub)
    recompute = {(int(st), str(k)): int(ns) for st, k, ns in case.get("recompute") or []}
    head_events = _head_events(case, slots) + _overflow_events(table, slots, sub)
    other = _other_data(case)
    # sim's timeline keeps every dependency (a receive starts with its send): only measured or imported runs can lack arrows
    backward = _backward_flows(case, table, placed) if flows and case.get("backend") != "sim" else 0
    if backward:
        other["dependencies_without_arrow"] = (
            f"{backward} dependencies get no arrow: their consumer ended before the producer's point (a receive that only "
            "posts, as torch.profiler records irecv, or a pair the clock alignment misplaces within its bound)")
    head, tail = document_parts({"traceEvents": [], "otherData": other}, "traceEvents", _SEP)
    pieces = [
        [",".join(json.dumps(e, separators=_SEP, allow_nan=False) for e in head_events)],
        _job_rows(table, placed, recompute),
        _memory_rows(case),
        _flow_rows(case, table, placed) if flows else [],
    ]
    write_document(fh, head, pieces, tail, ",")


def trace_text(case: dict[str, Any], flows: bool = True) -> str:
    """The trace file's text for ``case`` (what :func:`write_trace` writes)."""
    buf = io.StringIO()
    write_trace_to(buf, case, flows=flows)
    return buf.getvalue()


def case_trace(case: dict[str, Any], flows: bool = True) -> dict[str, Any]:
    """The trace document of one results-document case, parsed (for checks and tests).

    Args:
        case: a case of the results document.
        flows: add flow events for cross-stream dependencies.

    Returns:
        ``{"traceEvents": [...], "otherData": {...}}``; times in µs.
    """
    return json.loads(trace_text(case, flows=flows))


def write_trace(path: Path, case: dict[str, Any], flows: bool = True, table: JobTable | None = None) -> Path:
    """Atomically write the trace of ``case`` to ``path``; gzip-compressed where ``path``
    ends in ``.gz`` (Perfetto and chrome://tracing open both).

    Raises:
        OSError: the file cannot be written (the previous one is kept).
    """
    with open_output(path) as fh:
        write_trace_to(fh, case, flows=flows, table=table)
    return path
