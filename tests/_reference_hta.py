"""Frozen copy of the HTA rank writer before issue 13 (see tests/_reference_trace.py)."""
# ruff: noqa
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


from harness.report.layout import job_label, rank_labels, rank_pid, rank_step_spans, steps_overlap, stream_slots, time_base_epoch_ns

__all__ = ["COMM_KERNEL_PREFIX", "CORRELATION_BASE", "HOST_TID", "STREAM_BASE", "hta_idle_offset_us", "hta_rank_trace", "write_hta_traces"]

COMM_KERNEL_PREFIX = "ncclDevKernel_SendRecv "
#: tid of the host thread that holds ProfilerStep slices and launches.
HOST_TID = 1
#: First correlation id (see :func:`hta_rank_trace`).
CORRELATION_BASE = 1_000_000
#: CUDA-like stream number of a rank's first stream (PyTorch traces start at 7).
STREAM_BASE = 7
_COMM_KINDS = frozenset({"SEND_F", "RECV_F", "SEND_B", "RECV_B"})


def _us(ns: int) -> float:
    return ns / 1000.0


def _step_of(case: dict[str, Any]) -> dict[int, int]:
    return {s: i for i, s in enumerate(case["steps"])}


def hta_rank_trace(case: dict[str, Any], rank: int) -> dict[str, Any]:
    """The HTA-readable trace of one rank of a results-document case (see module doc).

    Raises:
        ValueError: ``rank`` is not a rank of the case.
    """
    p = int(case["schedule"]["p"])
    if not 0 <= rank < p:
        raise ValueError(f"rank {rank} is not in 0..{p - 1}")
    slots = stream_slots(case)
    label = rank_labels(case)[rank]
    pid = rank_pid(rank)  # pid 0 is the idle process to trace viewers; distributedInfo.rank stays the rank
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": label}},
        {"ph": "M", "pid": pid, "tid": HOST_TID, "name": "thread_name", "args": {"name": "host"}},
    ]
    for s in slots:
        if s.rank == rank:
            events.append({"ph": "M", "pid": pid, "tid": STREAM_BASE + s.tid, "name": "thread_name",
                           "args": {"name": f"stream {STREAM_BASE + s.tid} ({s.name})"}})
    step_index = _step_of(case)
    starts = list(case["step_start_ns"])
    spans = list(zip(case["steps"], case["step_start_ns"], case["step_end_ns"]))
    if steps_overlap(case):  # imported logs: each rank's own step spans, which nest on its host thread
        own = rank_step_spans(case)
        spans = [(step, *own[(rank, step)]) for step in case["steps"] if (rank, step) in own]
        for step, a, _ in spans:
            starts[step_index[step]] = a  # launches at this rank's step start, inside its step slice
    for step, a, b in spans:
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": pid, "tid": HOST_TID,
                       "ts": _us(a), "dur": _us(b) - _us(a), "args": {"step": step}})
    jobs = case["jobs"]
    # Large ids, as PyTorch's are: HTA 0.5 downcasts the column to the smallest
    # integer type, and with small ids (int8) it fails under pandas 3 when it
    # stores row indices into it.
    correlation = CORRELATION_BASE
    for i in range(len(jobs["kind"])):
        if jobs["rank"][i] != rank:
            continue
        slot = slots[jobs["stream"][i]]
        kind, mb, stage = jobs["kind"][i], jobs["microbatch"][i], jobs["stage"][i]
        text = job_label(stage, kind, mb)
        name = COMM_KERNEL_PREFIX + text if kind in _COMM_KINDS else text
        step = jobs["step"][i]
        launch_ns = starts[step_index[step]] if step in step_index else jobs["start_ns"][i]
        ts, end = _us(jobs["start_ns"][i]), _us(jobs["end_ns"][i])
        stream = STREAM_BASE + slot.tid
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": HOST_TID,
                       "ts": _us(launch_ns), "dur": 0.0, "args": {"correlation": correlation, "external id": correlation}})
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": pid, "tid": stream, "ts": ts, "dur": end - ts,
                       "args": {"stream": stream, "device": rank, "correlation": correlation, "external id": correlation,
                                "stage": stage, "microbatch": mb, "chunk": jobs["chunk"][i], "step": step}})
        correlation += 1
    epoch = time_base_epoch_ns(case)
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": p},
        "deviceProperties": [{"id": rank, "name": str((case.get("device") or {}).get("name", case.get("backend", "")))}],
        "traceEvents": events,
        "otherData": {"case": case["id"], "schedule": case["schedule"]["name"], "backend": case.get("backend", ""),
                      **({} if epoch is None else {"time_base_epoch_ns": epoch})},
    }


