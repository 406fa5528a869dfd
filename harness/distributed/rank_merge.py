"""Merging per-rank records onto rank 0's time base, and the causality check on the result.

In the MPI execution mode (:mod:`harness.distributed.mpi`) each process times its own pipeline rank's
jobs on its own clock. A :class:`RankPart` is what one rank contributes: its records (times
relative to its own time base), the anchor of that time base on its clock, its host and
device, and its :class:`~harness.distributed.clock_sync.ClockAlignment` to rank 0. :func:`merge_parts`
shifts every rank's jobs onto rank 0's time base and returns one
:class:`~harness.records.RunRecords`, which analysis and reports read as any single-process
run. The same parts can be written to files by separate processes (:func:`write_part`) and
merged later (:func:`merge_part_files`), for runs launched by another scheduler.

:func:`check_causality` then checks every matched send/receive pair on the merged records:
a receive that ends before its send started is a violation, reported with its size beside the
alignment's error bound.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.distributed.clock_sync import ClockAlignment
from harness.errors import ConfigError, InputFormatError
from harness.records import JobRecord, RunRecords

__all__ = ["PART_FORMAT", "CausalityReport", "RankPart", "check_causality", "merge_part_files", "merge_parts", "read_part", "write_part"]

#: ``format`` field of a per-rank part file, and its version.
PART_FORMAT = "pipeline-harness-rank-part"
PART_VERSION = 1


@dataclass
class RankPart:
    """One rank's contribution to a merged run.

    Attributes:
        rank: the pipeline (and MPI) rank.
        host: host name of the process.
        records: the rank's own jobs; times in ns relative to its time base.
        anchor_ns: its time base 0 on its own clock (the clock its alignment is measured on), ns.
        clock: its alignment to rank 0; ``None`` for rank 0 itself.
        device: its local device's description (backend, workload, ...).
    """

    rank: int
    host: str
    records: RunRecords
    anchor_ns: int
    clock: ClockAlignment | None = None
    device: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CausalityReport:
    """Matched send/receive pairs on merged records and the ones whose receive ends before its send starts.

    Attributes:
        pairs: matched pairs checked.
        violations: per violation ``{"send", "recv", "step", "by_ns", "bound_ns", "within_bound"}``:
            how far (ns) the receive ended before its send started, and whether that is within the
            alignment's error bound of the two ranks (so explained by it).
        bound_ns: the largest error bound of the ranks involved, ns.
    """

    pairs: int
    violations: list[dict[str, Any]]
    bound_ns: int

    def to_dict(self) -> dict[str, Any]:
        """As results.json keeps it (``device.causality``)."""
        return {"pairs": self.pairs, "violations": self.violations, "bound_ns": self.bound_ns}

    def describe(self) -> str | None:
        """A one-line note for the summary, or ``None`` when every pair holds."""
        if not self.violations:
            return None
        worst = max(self.violations, key=lambda v: v["by_ns"])
        beyond = sum(1 for v in self.violations if not v["within_bound"])
        return (f"causality: {len(self.violations)} of {self.pairs} receives end before their send starts on the merged time base "
                f"(worst {worst['recv']} of step {worst['step']}, by {worst['by_ns']:,} ns; clock bound {self.bound_ns:,} ns); "
                f"{beyond} beyond the bound" + (": the clock alignment is wrong for them" if beyond else ""))


def _shift(part: RankPart, anchor0: int) -> Callable[[int], int]:
    """The map from ``part``'s relative times to rank 0's relative times, ns."""
    if part.clock is None:
        if part.rank != 0:
            raise ConfigError(f"rank {part.rank} ({part.host}): no clock alignment to rank 0; a merge without a known bound is refused")
        base = part.anchor_ns - anchor0
        return lambda t: t + base
    clock, anchor = part.clock, part.anchor_ns
    return lambda t: clock.to_rank0(anchor + t) - anchor0


def merge_parts(parts: Sequence[RankPart], order: Callable[[JobRecord], Any] | None = None,
                host_anchor_ns: int | None = None) -> RunRecords:
    """One run's records from its ranks' parts, on rank 0's time base.

    Args:
        parts: one per rank, any order; ranks ``0 .. p-1`` each once.
        order: sort key of a job within a step (default: start time, then rank): the
            MPI mode passes the plan's enqueue order, so jobs are listed as a single-process run lists them.
        host_anchor_ns: rank 0's time base 0 on the host's wall clock (``time.time_ns`` scale), for
            reports that place a run on the host's clock; ``None`` to leave it out.

    Returns:
        Records with backend ``mpi``; ``device`` has the local backend, workload, per rank its host,
        device and clock alignment (``ranks``), the largest error bound (``clock_bound_ns``) and
        ``rank_labels`` (``"rank R (host)"``). Per step: the earliest start and latest end over
        the ranks, and the largest enqueue time.

    Raises:
        ConfigError: no parts, a rank missing or given twice, ranks whose pipelines or recorded
            steps differ, or a rank > 0 without a clock alignment (its bound is unknown).
    """
    if not parts:
        raise ConfigError("nothing to merge: no rank parts")
    by_rank: dict[int, RankPart] = {}
    for part in parts:
        if part.rank in by_rank:
            raise ConfigError(f"rank {part.rank} is given twice ({by_rank[part.rank].host} and {part.host})")
        by_rank[part.rank] = part
    p = parts[0].records.num_ranks
    if sorted(by_rank) != list(range(p)):
        missing = sorted(set(range(p)) - set(by_rank))
        raise ConfigError(f"a {p}-rank run needs one part per rank 0..{p - 1}: "
                          + (f"rank(s) {missing} missing" if missing else f"got ranks {sorted(by_rank)}"))
    first = by_rank[0]
    for part in by_rank.values():
        if part.records.num_ranks != p:
            raise ConfigError(f"rank {part.rank} ({part.host}) ran a {part.records.num_ranks}-rank pipeline, rank 0 a {p}-rank one")
        if part.records.steps != first.records.steps:
            raise ConfigError(f"rank {part.rank} ({part.host}) recorded steps {part.records.steps[:5]}..., "
                              f"rank 0 {first.records.steps[:5]}...: the ranks did not run the same window")
    anchor0 = first.anchor_ns
    ranks = [by_rank[r] for r in range(p)]
    jobs: list[JobRecord] = []
    n_steps = len(first.records.steps)
    starts = [None] * n_steps  # type: list[int | None]
    ends = [None] * n_steps  # type: list[int | None]
    enqueue = [0] * n_steps
    for part in ranks:
        shift = _shift(part, anchor0)
        rec = part.records
        for k in range(n_steps):
            a, b = shift(rec.step_start_ns[k]), shift(rec.step_end_ns[k])
            starts[k] = a if starts[k] is None else min(a, starts[k])  # type: ignore[type-var]
            ends[k] = b if ends[k] is None else max(b, ends[k])  # type: ignore[type-var]
            if k < len(rec.enqueue_ns):
                enqueue[k] = max(enqueue[k], rec.enqueue_ns[k])
        for j in rec.jobs:
            jobs.append(JobRecord(j.rank, j.stream, j.stage, j.kind, j.microbatch, j.chunk, j.step,
                                  shift(j.start_ns), shift(j.end_ns), j.enqueue_ns))
    key = order or (lambda j: (j.start_ns, j.rank))
    step_index = {s: i for i, s in enumerate(first.records.steps)}
    jobs.sort(key=lambda j: (step_index.get(j.step, -1), key(j)))
    clocks = [part.clock for part in ranks if part.clock is not None]
    device: dict[str, Any] = {
        "backend": "mpi",
        "local_backend": first.device.get("backend", first.records.backend),
        "workload": first.device.get("workload", first.records.device.get("workload")),
        "clock": "each rank's host clock, shifted onto rank 0's by Cristian's method with linear drift (harness.distributed.clock_sync)",
        "clock_bound_ns": max((c.bound_ns for c in clocks), default=0),
        "ranks": [{"rank": part.rank, "host": part.host, "device": part.device,
                   "clock": part.clock.to_dict() if part.clock is not None else None} for part in ranks],
        "rank_labels": [f"rank {part.rank} ({part.host})" for part in ranks],
    }
    if host_anchor_ns is not None:
        device["host_anchor_ns"] = host_anchor_ns
    return RunRecords(
        backend="mpi",
        device=device,
        num_ranks=p,
        streams=[s for part in ranks for s in part.records.streams],
        steps=list(first.records.steps),
        step_start_ns=[int(x) for x in starts],  # type: ignore[arg-type]
        step_end_ns=[int(x) for x in ends],  # type: ignore[arg-type]
        jobs=jobs,
        enqueue_ns=enqueue,
        warmup_steps=first.records.warmup_steps,
        window=first.records.window,
    )


_PAIR = {"RECV_F": ("SEND_F", -1), "RECV_B": ("SEND_B", +1)}


def check_causality(records: RunRecords) -> CausalityReport:
    """Check every matched send/receive pair: a receive of stage ``k`` (``RECV_F``) matches the
    ``SEND_F`` of stage ``k - 1`` with its micro-batch and step (``RECV_B``: the ``SEND_B`` of
    stage ``k + 1``); it must end no earlier than its send starts.

    Returns:
        The pairs checked and the violations, each with its size against the error bound of the two
        ranks' clock alignments (``device["ranks"][r]["clock"]["bound_ns"]``; 0 for rank 0 and for
        records of one process).
    """
    bounds: dict[int, int] = {}
    for info in records.device.get("ranks", ()) if isinstance(records.device.get("ranks"), list) else ():
        clock = info.get("clock") or {}
        bounds[int(info.get("rank", -1))] = int(clock.get("bound_ns", 0))
    sends = {(j.step, j.kind, j.stage, j.microbatch): j for j in records.jobs if j.kind in ("SEND_F", "SEND_B")}
    pairs = 0
    violations = []
    worst_bound = 0
    for r in records.jobs:
        if r.kind not in _PAIR:
            continue
        kind, delta = _PAIR[r.kind]
        s = sends.get((r.step, kind, r.stage + delta, r.microbatch))
        if s is None:
            continue
        pairs += 1
        bound = bounds.get(s.rank, 0) + bounds.get(r.rank, 0)
        worst_bound = max(worst_bound, bound)
        if r.end_ns < s.start_ns:
            by = s.start_ns - r.end_ns
            violations.append({"send": s.label, "recv": r.label, "step": r.step, "by_ns": by, "bound_ns": bound, "within_bound": by <= bound})
    return CausalityReport(pairs, violations, worst_bound)


def _records_to_dict(rec: RunRecords) -> dict[str, Any]:
    return {
        "backend": rec.backend, "device": rec.device, "num_ranks": rec.num_ranks, "streams": rec.streams, "steps": rec.steps,
        "step_start_ns": rec.step_start_ns, "step_end_ns": rec.step_end_ns, "enqueue_ns": rec.enqueue_ns,
        "warmup_steps": rec.warmup_steps,
        "jobs": [[j.rank, j.stream, j.stage, j.kind, j.microbatch, j.chunk, j.step, j.start_ns, j.end_ns, j.enqueue_ns] for j in rec.jobs],
    }


def write_part(path: str | os.PathLike[str], part: RankPart) -> Path:
    """Write ``part`` as JSON (``format`` :data:`PART_FORMAT`, version 1), atomically (a temporary file renamed).

    Returns:
        The path written.
    """
    out = Path(path)
    doc = {"format": PART_FORMAT, "version": PART_VERSION, "rank": part.rank, "host": part.host, "anchor_ns": part.anchor_ns,
           "clock": part.clock.to_dict() if part.clock is not None else None, "device": part.device,
           "records": _records_to_dict(part.records)}
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(doc), encoding="utf-8")
    os.replace(tmp, out)
    return out


#: A job's fields in a part file's ``records.jobs`` rows, in order (:class:`~harness.records.JobRecord`).
_JOB_FIELDS = ("rank", "stream", "stage", "kind", "microbatch", "chunk", "step", "start_ns", "end_ns", "enqueue_ns")


#: Per field of :data:`_JOB_FIELDS`, the types its values may have.
_JOB_TYPES: dict[str, set[type]] = {"stream": {str}, "kind": {str}, "microbatch": {int, type(None)}}


def _job_records(rows: Any, where: str) -> list[JobRecord]:
    """A part file's ``records.jobs`` rows as :class:`JobRecord`, each field's type checked column by
    column (the types of a column collected in C, so a million jobs cost no Python call per field).

    Raises:
        InputFormatError: a row that is not a list of the fields, or a field of another type (names the
            file, the row and the field; a float, a string or a bool is no integer, as ``int()`` would take).
    """
    if not isinstance(rows, list):
        raise InputFormatError(f"{where}: records.jobs is {rows!r}, expected a list of rows")
    if not (set(map(type, rows)) <= {list} and set(map(len, rows)) <= {len(_JOB_FIELDS)}):
        n = next(n for n, row in enumerate(rows) if not isinstance(row, list) or len(row) != len(_JOB_FIELDS))
        raise InputFormatError(f"{where}: records.jobs[{n}] is {rows[n]!r}, expected a list of {len(_JOB_FIELDS)} fields "
                               f"({', '.join(_JOB_FIELDS)})")
    columns = list(zip(*rows)) if rows else [() for _ in _JOB_FIELDS]
    for name, column in zip(_JOB_FIELDS, columns):
        types: set[type] = _JOB_TYPES.get(name, {int})
        if not set(map(type, column)) <= types:
            n, value = next((n, x) for n, x in enumerate(column) if type(x) not in types)
            expected = "a string" if types == {str} else "an integer"
            raise InputFormatError(f"{where}: records.jobs[{n}].{name} is {value!r} ({type(value).__name__}), expected {expected}")
    return list(map(JobRecord, *columns))


def read_part(path: str | os.PathLike[str]) -> RankPart:
    """Read a part written by :func:`write_part`.

    Raises:
        InputFormatError: not JSON, not a part file, or a field missing or of the wrong type (names the file and field).
        ConfigError: a rank > 0 whose clock alignment is missing or malformed (its bound is unknown).
    """
    where = str(path)
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputFormatError(f"{where}: cannot read a rank part: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != PART_FORMAT:
        raise InputFormatError(f"{where}: not a rank part file (format {PART_FORMAT!r} expected)")
    if doc.get("version") != PART_VERSION:
        raise InputFormatError(f"{where}: rank part version {doc.get('version')!r}; this harness reads version {PART_VERSION}")
    def integer(value: Any, field: str) -> int:
        if type(value) is not int:  # not a float, a string or a bool, which int() would take
            raise InputFormatError(f"{where}: {field} is {value!r} ({type(value).__name__}), expected an integer")
        return value

    def text(value: Any, field: str) -> str:
        if not isinstance(value, str):
            raise InputFormatError(f"{where}: {field} is {value!r} ({type(value).__name__}), expected a string")
        return value

    def integers(values: Any, field: str) -> list[int]:
        if not isinstance(values, list):
            raise InputFormatError(f"{where}: {field} is {values!r} ({type(values).__name__}), expected a list of integers")
        return [integer(x, f"{field}[{k}]") for k, x in enumerate(values)]

    try:
        rank, host, anchor = integer(doc["rank"], "rank"), text(doc["host"], "host"), integer(doc["anchor_ns"], "anchor_ns")
        rec = doc["records"]
        jobs = _job_records(rec["jobs"], where)
        if not isinstance(rec["device"], dict):
            raise InputFormatError(f"{where}: records.device is {rec['device']!r}, expected an object")
        streams = rec["streams"]
        if not isinstance(streams, list):
            raise InputFormatError(f"{where}: records.streams is {streams!r}, expected a list of strings")
        records = RunRecords(backend=text(rec["backend"], "records.backend"), device=dict(rec["device"]),
                             num_ranks=integer(rec["num_ranks"], "records.num_ranks"),
                             streams=[text(x, f"records.streams[{k}]") for k, x in enumerate(streams)],
                             steps=integers(rec["steps"], "records.steps"),
                             step_start_ns=integers(rec["step_start_ns"], "records.step_start_ns"),
                             step_end_ns=integers(rec["step_end_ns"], "records.step_end_ns"),
                             jobs=jobs, enqueue_ns=integers(rec["enqueue_ns"], "records.enqueue_ns"),
                             warmup_steps=integer(rec["warmup_steps"], "records.warmup_steps"))
        for name in ("step_start_ns", "step_end_ns", "enqueue_ns"):  # one entry per recorded step
            if len(rec[name]) != len(records.steps):
                raise InputFormatError(f"{where}: records.{name} has {len(rec[name])} entries for {len(records.steps)} "
                                       "recorded step(s) (records.steps), expected one per step")
        steps = records.steps
        back = next((k for k in range(1, len(steps)) if steps[k] <= steps[k - 1]), None)
        if back is not None:
            raise InputFormatError(f"{where}: records.steps[{back}] is {steps[back]} after {steps[back - 1]}; "
                                   "steps must increase (each recorded step once)")
        known = set(steps)
        stray = next((j for j in jobs if j.step not in known), None)
        if stray is not None:
            raise InputFormatError(f"{where}: job {stray.label} of rank {stray.rank} is of step {stray.step}, "
                                   f"which is not among records.steps {steps}")
        if doc.get("device") is not None and not isinstance(doc["device"], dict):
            raise InputFormatError(f"{where}: device is {doc['device']!r} ({type(doc['device']).__name__}), expected an object")
    except InputFormatError:
        raise  # names its field already (an InputFormatError is a ValueError too)
    except KeyError as exc:
        raise InputFormatError(f"{where}: malformed rank part: no field {exc}") from None
    except (TypeError, ValueError) as exc:
        raise InputFormatError(f"{where}: malformed rank part ({type(exc).__name__}: {exc})") from None
    bad = next((j for j in jobs if j.end_ns < j.start_ns), None)
    if bad is not None:
        raise InputFormatError(f"{where}: rank {rank}'s job {bad.label} of step {bad.step} ends ({bad.end_ns:,} ns) before it "
                               f"starts ({bad.start_ns:,} ns); the part is damaged")
    problem = _part_jobs_problem(records, rank)
    if problem:
        raise InputFormatError(f"{where}: rank {rank}'s {problem}; the part is damaged or was edited")
    clock = None if doc.get("clock") is None else ClockAlignment.from_dict(doc["clock"], f"{where} (rank {rank})")
    if clock is None and rank != 0:
        raise ConfigError(f"{where}: rank {rank} has no clock alignment to rank 0; a merge without a known bound is refused")
    return RankPart(rank, host, records, anchor, clock, dict(doc.get("device") or {}))


def _part_jobs_problem(records: RunRecords, rank: int) -> str | None:
    """A job of rank ``rank``'s part that is another rank's (the merge would list it twice), listed
    twice (same step, kind, stage and micro-batch), or outside its step's span on the rank's own
    clock (:mod:`harness.records`), described; ``None`` when none is.
    The part's times and its step bounds are on one clock, so the span holds its jobs exactly: the
    merge shifts both by the same map, and the clock bound enters only between ranks
    (:func:`check_causality`)."""
    import numpy as np

    from harness.records import first_duplicate, first_outside_step

    if not records.jobs:
        return None
    c = records.columns
    foreign = np.flatnonzero(c.rank != rank)
    if len(foreign):
        j = records.jobs[int(foreign[0])]
        return f"part holds job {j.label} of step {j.step} (jobs[{int(foreign[0])}]) of rank {j.rank}; a part holds its own rank's jobs"
    twice = first_duplicate(c.rank, c.step, c.kind, c.stage, c.microbatch)
    if twice is not None:
        a, b = twice
        j = records.jobs[b]
        return f"job {j.label} of step {j.step} is listed twice (jobs[{a}] and jobs[{b}]); a step runs each job once"
    outside = first_outside_step(c.step, c.start_ns, c.end_ns, records.steps, records.step_start_ns, records.step_end_ns)
    if outside is None:
        return None
    i, k = outside
    j = records.jobs[i]
    lo, hi = records.step_start_ns[k], records.step_end_ns[k]
    when = (f"starts at {j.start_ns:,} ns, before its step starts ({lo:,} ns)" if j.start_ns < lo
            else f"ends at {j.end_ns:,} ns, after its step ends ({hi:,} ns)")
    return f"job {j.label} of step {j.step} (jobs[{i}]) {when}, on the rank's own clock"


def merge_part_files(paths: Sequence[str | os.PathLike[str]]) -> RunRecords:
    """:func:`merge_parts` of the part files at ``paths`` (one per rank), then :func:`check_causality` stored
    in ``device["causality"]``.

    Raises:
        InputFormatError: as :func:`read_part`, or two files of one rank (names both).
        ConfigError: as :func:`read_part` and :func:`merge_parts`.
    """
    parts = [read_part(p) for p in paths]
    first: dict[int, tuple[str, RankPart]] = {}
    for path, part in zip(paths, parts):
        if part.rank in first:
            other, was = first[part.rank]
            raise InputFormatError(f"{other} and {path} are both rank {part.rank}'s part (hosts {was.host} and {part.host}); "
                                   "give one part file per rank")
        first[part.rank] = (str(path), part)
    merged = merge_parts(parts)
    merged.device["causality"] = check_causality(merged).to_dict()
    return merged
