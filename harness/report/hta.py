"""Per-rank traces in the shape Holistic Trace Analysis (HTA) reads.

HTA (``holistictraceanalysis``) wants one PyTorch-profiler-like JSON file per
rank in a folder. What it needs, and what is written here:

* ``"distributedInfo": {"rank": N, ...}`` with a space after each colon: HTA
  finds the rank with the regex ``"rank":\\s+(\\d+)``, so the file is written
  with ``json.dumps``' default separators (not the compact form);
* GPU work as complete events with ``cat`` ``"kernel"`` and ``args``
  ``stream``, ``device`` and ``correlation``; each kernel has a host-side
  ``cudaLaunchKernel`` event (``cat`` ``"cuda_runtime"``) with the same
  correlation, placed at the start of its step (the executor enqueues a whole
  step before it synchronizes), because HTA keeps only kernels whose launch
  lies inside a profiled step;
* communication jobs named ``ncclDevKernel_SendRecv <job>``: HTA classes a
  kernel as communication when its name matches ``^nccl.*Kernel`` (a bare
  ``nccl`` prefix is not enough in HTA 0.5), every other name as compute;
* one host-side ``ProfilerStep#N`` slice (``cat`` ``"user_annotation"``) per
  recorded step, from which HTA finds iterations.

Times are µs (``ts``/``dur`` floats, ns precision) on the case's time base.

What HTA reports then differs from our bubble by definition only: its idle
time of a rank runs from the rank's first kernel to its last one, ours from
each step's start to its end; :func:`hta_idle_offset_us` gives the difference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.report.atomic import atomic_write
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


def write_hta_traces(folder: Path, case: dict[str, Any]) -> list[Path]:
    """Write ``folder/rank<N>.json`` for every rank of ``case``, each atomically.

    The JSON keeps ``json.dumps``' default separators, so the file contains
    ``"distributedInfo": {"backend": "nccl", "rank": N, ...}`` as HTA's regex wants.

    Returns:
        The written paths, by rank.

    Raises:
        OSError: a file cannot be written (earlier versions are kept).
    """
    paths = []
    for rank in range(int(case["schedule"]["p"])):
        doc = hta_rank_trace(case, rank)
        path = folder / f"rank{rank}.json"
        atomic_write(path, lambda fh, d=doc: json.dump(d, fh, allow_nan=False))  # type: ignore[misc]
        paths.append(path)
    return paths


def hta_idle_offset_us(case: dict[str, Any], steps: list[int] | None = None) -> list[float]:
    """Per rank, our idle time minus HTA's, in µs, from the windows alone.

    HTA's idle time of a rank counts from the rank's first kernel to its last
    one (gaps between steps included); ours adds up, per recorded step, the
    step's time (its start to its last job's end) minus the rank's busy time.
    With equal busy time the two differ by ``sum(step times) - (last job end -
    first job start)``: the pipeline fill before the rank's first job and the
    drain after its last one count for us, the host time between steps counts
    for HTA. So ``HTA idle + offset == our idle`` (``metrics.per_step[].idle_ns``
    summed over ``steps``), up to HTA's rounding to whole µs.

    Args:
        case: a results-document case.
        steps: the steps HTA analysed (default: all recorded steps).
    """
    steps = list(case["steps"]) if steps is None else steps
    pos = {s: i for i, s in enumerate(case["steps"])}
    total = sum(case["step_end_ns"][pos[s]] - case["step_start_ns"][pos[s]] for s in steps)
    p = int(case["schedule"]["p"])
    first: list[int | None] = [None] * p
    last: list[int | None] = [None] * p
    jobs = case["jobs"]
    wanted = set(steps)
    for i in range(len(jobs["kind"])):
        if jobs["step"][i] not in wanted:
            continue
        r = jobs["rank"][i]
        a, b = jobs["start_ns"][i], jobs["end_ns"][i]
        f, e = first[r], last[r]
        first[r] = a if f is None else min(f, a)
        last[r] = b if e is None else max(e, b)
    out = []
    for r in range(p):
        f, e = first[r], last[r]
        out.append(_us(total) if f is None or e is None else _us(total - (e - f)))
    return out
