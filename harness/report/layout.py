"""Where each stream and job of a results-document case goes on a trace or a timeline.

Shared by the trace writers (:mod:`harness.report.trace`, :mod:`harness.report.hta`)
and the HTML page, so the three agree on ranks, tracks and labels.

Streams are named ``"rank{r}/{name}"`` by the executor (``compute``, ``comm↔{q}``)
and by the PaddlePaddle importer (``compute``, ``overlap``, ``overlap2``...).
A stream without that prefix belongs to the rank of its first job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "StreamSlot",
    "job_label",
    "rank_labels",
    "rank_pid",
    "rank_step_spans",
    "steps_overlap",
    "stream_slots",
    "time_base_epoch_ns",
    "track_overflow",
]

_RANK_PREFIX = re.compile(r"^rank(\d+)/(.+)$")


def rank_pid(rank: int) -> int:
    """The trace ``pid`` of ``rank``: ``rank + 1``, since trace viewers take pid 0 for the
    idle (swapper) process. The rank itself stays in names and HTA's ``distributedInfo``."""
    return rank + 1


def time_base_epoch_ns(case: dict[str, Any]) -> int | None:
    """The epoch time (ns since 1970, host clock) of the case's time base 0: an import's
    ``device.time_base_epoch_ns``, or a run's ``device.host_anchor_ns`` (cpu and cuda);
    ``None`` where the run had no host clock (``sim``'s virtual time)."""
    device = case.get("device") or {}
    for key in ("time_base_epoch_ns", "host_anchor_ns"):
        value = device.get(key) if isinstance(device, dict) else None
        if type(value) is int:
            return value
    return None


@dataclass(frozen=True)
class StreamSlot:
    """One stream's place: its ``rank`` (trace pid), its ``tid`` (index among the
    rank's streams, in the case's stream order) and its short ``name``."""

    rank: int
    tid: int
    name: str


def stream_slots(case: dict[str, Any]) -> list[StreamSlot]:
    """Per stream of ``case`` (same order as ``case["streams"]``), its rank, tid and name."""
    streams: list[str] = case["streams"]
    jobs = case["jobs"]
    named = [_RANK_PREFIX.match(name) for name in streams]
    first_rank: dict[int, int] = {}
    if not all(named):  # a stream without its rank in its name: the rank of its first job
        for s, r in zip(jobs["stream"], jobs["rank"]):
            first_rank.setdefault(s, r)
    per_rank: dict[int, int] = {}
    out: list[StreamSlot] = []
    for i, (name, m) in enumerate(zip(streams, named)):
        rank, short = (int(m.group(1)), m.group(2)) if m else (first_rank.get(i, 0), name)
        tid = per_rank.get(rank, 0)
        per_rank[rank] = tid + 1
        out.append(StreamSlot(rank, tid, short))
    return out


def rank_labels(case: dict[str, Any]) -> list[str]:
    """Display names of the ranks: ``case["rank_labels"]`` when present (imported
    logs name devices), else ``"rank N (backend)"``."""
    p = int(case["schedule"]["p"])
    given = case.get("rank_labels")
    if isinstance(given, list) and len(given) == p:
        return [str(x) for x in given]
    backend = case.get("backend", "")
    return [f"rank {r} ({backend})" for r in range(p)]


def job_label(stage: int, kind: str, microbatch: int | None) -> str:
    """A job's compact text form, PyTorch's notation: ``"2F0"``; ``"0OPT"`` without micro-batch."""
    return f"{stage}{kind}{'' if microbatch is None else microbatch}"


def track_overflow(starts: list[int], ends: list[int], order: list[int]) -> list[int]:
    """Greedy interval partitioning of the jobs of one track.

    Args:
        starts, ends: job times (any unit), indexed by job.
        order: the jobs of the track.

    Returns:
        Per entry of ``order``, the sub-track it goes on: 0 for the track
        itself, 1, 2, ... for extra tracks, so that no two jobs on one sub-track
        overlap in time (touching ends are allowed). A well-formed run has
        every job on 0; overlaps only come from imported host-stamped logs.
    """
    ranked = sorted(range(len(order)), key=lambda k: (starts[order[k]], ends[order[k]]))
    track_end: list[int] = []
    out = [0] * len(order)
    for k in ranked:
        j = order[k]
        for t, end in enumerate(track_end):
            if end <= starts[j]:
                track_end[t] = ends[j]
                out[k] = t
                break
        else:
            out[k] = len(track_end)
            track_end.append(ends[j])
    return out


def steps_overlap(case: dict[str, Any]) -> bool:
    """Whether a step's span (all ranks together) ends after the next step starts: in
    imported logs, where one device's step ends after another device began the next."""
    starts, ends = case["step_start_ns"], case["step_end_ns"]
    return any(end > nxt for end, nxt in zip(ends, starts[1:]))


def rank_step_spans(case: dict[str, Any]) -> dict[tuple[int, int], tuple[int, int]]:
    """Per ``(rank, step)``, the span (ns) from the rank's first job start to its last job
    end in that step, cut at the rank's next step's start so the rank's step slices nest
    (host-stamped logs can put a job's start before the previous job's end)."""
    jobs = case["jobs"]
    span: dict[tuple[int, int], list[int]] = {}
    for r, st, a, b in zip(jobs["rank"], jobs["step"], jobs["start_ns"], jobs["end_ns"]):
        got = span.get((r, st))
        if got is None:
            span[(r, st)] = [a, b]
        else:
            got[0], got[1] = min(got[0], a), max(got[1], b)
    out: dict[tuple[int, int], tuple[int, int]] = {}
    by_rank: dict[int, list[int]] = {}
    for r, st in span:
        by_rank.setdefault(r, []).append(st)
    for r, steps in by_rank.items():
        steps.sort()
        for k, st in enumerate(steps):
            a, b = span[(r, st)]
            if k + 1 < len(steps):
                b = max(a, min(b, span[(r, steps[k + 1])][0]))
            out[(r, st)] = (a, b)
    return out
