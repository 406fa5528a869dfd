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

What HTA reports then differs from our bubble by definition only, in two ways:
its idle time of a rank runs from the rank's first kernel to its last one, ours
from each step's start to its end (:func:`hta_idle_offset_us` gives the
difference); and time when a send/receive runs and no compute does is HTA's
``non_compute_time``, our idle time. So per rank, our idle time is HTA's
``idle_time + non_compute_time`` plus the offset (docs/reports.md, "Traces").
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
from harness.report.jsontext import CHUNK_ROWS, document_parts, float_texts, int_texts, join_rows, microbatch_texts, pick, write_document
from harness.report.layout import rank_labels, rank_pid, rank_step_spans, steps_overlap, stream_slots, time_base_epoch_ns
from harness.report.output import hta_size_estimate, open_output

__all__ = ["COMM_KERNEL_PREFIX", "CORRELATION_BASE", "HOST_TID", "STREAM_BASE", "hta_idle_offset_us", "hta_rank_text", "hta_rank_trace",
           "write_hta_traces"]

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


class _RankWriter:
    """What the rank files of one case share: the jobs in columns, grouped by rank once
    (a stable sort), the per-kind event formats and, for imported logs, each rank's step spans."""

    def __init__(self, case: dict[str, Any], table: JobTable | None = None) -> None:
        self.case = case
        self.p = int(case["schedule"]["p"])
        self.slots = stream_slots(case)
        self.labels = rank_labels(case)
        self.table = t = JobTable.from_case(case) if table is None else table
        self.by_rank = np.argsort(t.rank, kind="stable")
        self.bounds = np.searchsorted(t.rank[self.by_rank], np.arange(self.p + 1))
        self.own = rank_step_spans(case) if steps_overlap(case) else None
        self.step_values, self.step_code = t.step_codes()
        self.stream_no = STREAM_BASE + np.asarray([s.tid for s in self.slots] or [0], dtype=np.int64)
        self.stream_text = [str(x) for x in self.stream_no.tolist()]
        inner = [json.dumps(kind)[1:-1] for kind in t.kinds]
        self.name_head = [(COMM_KERNEL_PREFIX if kind in _COMM_KINDS else "") for kind in t.kinds]
        self.name_kind = inner
        longest = int(np.diff(self.bounds).max(initial=0))  # every rank's correlation ids count from CORRELATION_BASE
        self.corr_text = int_texts(np.arange(CORRELATION_BASE, CORRELATION_BASE + longest, dtype=np.int64))

    def head(self, rank: int) -> tuple[list[dict[str, Any]], dict[int, int]]:
        """The rank's metadata and step events, and per step value the launch time (ns) of its jobs."""
        case = self.case
        pid = rank_pid(rank)  # pid 0 is the idle process to trace viewers; distributedInfo.rank stays the rank
        events: list[dict[str, Any]] = [
            {"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": self.labels[rank]}},
            {"ph": "M", "pid": pid, "tid": HOST_TID, "name": "thread_name", "args": {"name": "host"}},
        ]
        for s in self.slots:
            if s.rank == rank:
                events.append({"ph": "M", "pid": pid, "tid": STREAM_BASE + s.tid, "name": "thread_name",
                               "args": {"name": f"stream {STREAM_BASE + s.tid} ({s.name})"}})
        step_index = _step_of(case)
        starts = list(case["step_start_ns"])
        spans = list(zip(case["steps"], case["step_start_ns"], case["step_end_ns"]))
        if self.own is not None:  # imported logs: each rank's own step spans, which nest on its host thread
            own = self.own
            spans = [(step, *own[(rank, step)]) for step in case["steps"] if (rank, step) in own]
            for step, a, _ in spans:
                starts[step_index[step]] = a  # launches at this rank's step start, inside its step slice
        for step, a, b in spans:
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": pid, "tid": HOST_TID,
                           "ts": _us(a), "dur": _us(b) - _us(a), "args": {"step": step}})
        return events, {step: starts[i] for step, i in step_index.items()}

    def rows(self, rank: int, launch_of: dict[int, int]) -> Iterator[str]:
        """The rank's kernels, each after its launch, in job order (correlation ids from
        :data:`CORRELATION_BASE`), in chunks of :data:`CHUNK_ROWS` jobs joined from number columns
        (:func:`harness.report.jsontext.join_rows`)."""
        t = self.table
        idx = self.by_rank[self.bounds[rank]:self.bounds[rank + 1]]
        if not len(idx):
            return
        known = [launch_of.get(v) for v in self.step_values.tolist()]
        launch_code = np.asarray([-1 if x is None else x for x in known], dtype=np.int64)
        has_launch = np.asarray([x is not None for x in known], dtype=bool)
        launch_text = float_texts(launch_code / 1000.0)  # per step value: where every job of a chunk has its step's launch
        pid = rank_pid(rank)
        for lo in range(0, len(idx), CHUNK_ROWS):
            j = idx[lo:lo + CHUNK_ROWS]
            code = self.step_code[j]
            if has_launch[code].all():
                launches: list[str] = pick(launch_text, code)
            else:
                launches = float_texts(np.where(has_launch[code], launch_code[code], t.start_ns[j]) / 1000.0)
            ts = t.start_ns[j] / 1000.0
            dur = t.end_ns[j] / 1000.0 - ts
            corr = self.corr_text[lo:lo + len(j)]
            kind = t.kind[j]
            stream = pick(self.stream_text, t.stream[j])
            stage = int_texts(t.stage[j])
            mb_name, mb_arg = microbatch_texts(t.microbatch[j])
            text = join_rows([
                f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": {pid}, "tid": {HOST_TID}, "ts": ',
                launches, ', "dur": 0.0, "args": {"correlation": ', corr, ', "external id": ', corr,
                '}}, {"ph": "X", "cat": "kernel", "name": "', pick(self.name_head, kind), stage, pick(self.name_kind, kind), mb_name,
                f'", "pid": {pid}, "tid": ', stream, ', "ts": ', float_texts(ts), ', "dur": ', float_texts(dur),
                ', "args": {"stream": ', stream, f', "device": {rank}, "correlation": ', corr, ', "external id": ', corr,
                ', "stage": ', stage, ', "microbatch": ', mb_arg, ', "chunk": ', int_texts(t.chunk[j]), ', "step": ', int_texts(t.step[j]), "}}",
            ], ", ")
            yield text if lo == 0 else ", " + text

    def write(self, fh: IO[str], rank: int) -> None:
        """Write the rank's file (see module doc) to the text file ``fh``."""
        case = self.case
        events, launch_of = self.head(rank)
        epoch = time_base_epoch_ns(case)
        doc = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": self.p},
            "deviceProperties": [{"id": rank, "name": str((case.get("device") or {}).get("name", case.get("backend", "")))}],
            "traceEvents": [],
            "otherData": {"case": case["id"], "schedule": case["schedule"]["name"], "backend": case.get("backend", ""),
                          **({} if epoch is None else {"time_base_epoch_ns": epoch})},
        }
        head, tail = document_parts(doc, "traceEvents", None)
        write_document(fh, head, [[", ".join(json.dumps(e, allow_nan=False) for e in events)], self.rows(rank, launch_of)], tail, ", ")


def hta_rank_text(case: dict[str, Any], rank: int) -> str:
    """The text of the HTA rank file ``rank`` of ``case`` (what :func:`write_hta_traces` writes).

    Raises:
        ValueError: ``rank`` is not a rank of the case.
    """
    p = int(case["schedule"]["p"])
    if not 0 <= rank < p:
        raise ValueError(f"rank {rank} is not in 0..{p - 1}")
    buf = io.StringIO()
    _RankWriter(case).write(buf, rank)
    return buf.getvalue()


def hta_rank_trace(case: dict[str, Any], rank: int) -> dict[str, Any]:
    """The HTA-readable trace of one rank of a results-document case (see module doc), parsed.

    Raises:
        ValueError: ``rank`` is not a rank of the case.
    """
    return json.loads(hta_rank_text(case, rank))


@gc_paused  # see harness.report.trace.write_trace_to
def write_hta_traces(folder: Path, case: dict[str, Any], compress: bool = False, table: JobTable | None = None) -> list[Path]:
    """Write ``folder/rank<N>.json`` (``.json.gz`` with ``compress``, which HTA reads too) for
    every rank of ``case``, each atomically; linear in the jobs whatever the number of ranks.
    ``table``: the case's jobs in columns, where the caller has them.

    The JSON keeps ``json.dumps``' default separators, so the file contains
    ``"distributedInfo": {"backend": "nccl", "rank": N, ...}`` as HTA's regex wants.

    Returns:
        The written paths, by rank.

    Raises:
        OSError: a file cannot be written (earlier versions are kept); uncompressed, the estimated bytes
            of the file are noted on it as ``needed_bytes``, negative (an estimate: ``about``), for the
            full-disk error (:func:`harness.report.atomic.disk_full_error`).
    """
    writer = _RankWriter(case, table)
    paths = []
    for rank in range(writer.p):
        path = folder / f"rank{rank}.json{'.gz' if compress else ''}"
        try:
            with open_output(path) as fh:
                writer.write(fh, rank)
        except OSError as exc:
            if not compress and getattr(exc, "needed_bytes", None) is None:
                exc.needed_bytes = -hta_size_estimate(case, rank)  # type: ignore[attr-defined]
            raise
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
    for HTA. So ``HTA idle + HTA non-compute + offset == our idle``
    (``metrics.per_step[].idle_ns`` summed over ``steps``; HTA's non-compute time is
    the send/receive time with no compute running, 0 without send/receive jobs), up
    to HTA's rounding to whole µs.

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
