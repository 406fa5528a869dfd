"""PaddlePaddle job-profiler logs: import into the results-document layout, and export.

PaddlePaddle's static-graph pipeline profiler (PR #58313,
``profiler_helper_static.py``) prints one line per job after each step
(here wrapped)::

    I1020 09:15:07.265326 22317 standalone_executor.cc:217] Profiler Info: Job (3), type = forward,
        micro_batch_id = 2, job_start_time = 1697793307213.760986, job_end_time = 1697793307254.006104

times in milliseconds since the epoch with six decimals (so exact to the ns),
one ``workerlog.<device>`` file per device, ``machine*`` sub-folders when
several hosts ran, and optionally a line
``Schedule Profiler start at step S and end at step E``.

:func:`import_paddle_logs` turns such a folder into one case of the results
document (:mod:`harness.report.results`), so every report renders from it:

* ranks are the devices, in order (machine folders first, then device number);
  two logs of one device in a folder (``workerlog.1`` and ``workerlog.01``) are
  refused, and an entry named like a log that is not a file (a folder
  ``workerlog.1``), or a log with no forward or backward job, gives a warning;
  streams are ``rank{r}/compute``, plus ``rank{r}/overlap`` (``overlap2``, ...)
  for jobs that overlap an earlier job on the same device. Paddle stamps a
  job's start on the host, so a job can appear to start before the previous
  one ended; such jobs are kept, moved to the extra stream so that no trace
  track breaks the nesting rule, listed in ``case["overlaps"]`` as
  ``[earlier job index, later job index]`` pairs, and explained in
  ``case["warnings"]``;
* job types map to kinds: ``forward`` F, ``backward`` B, ``backward_b`` I,
  ``backward_w`` W, ``optimizer`` OPT, and newer Paddle's point-to-point jobs
  ``send_forward`` SEND_F, ``recv_forward`` RECV_F, ``send_backward`` SEND_B,
  ``recv_backward`` RECV_B (on the device's ``comm`` stream, not busy time),
  with a chunk from a suffix
  (``forward1``, ``forward(chunk1)``, ``forward_chunk1``); any other type is
  kept with its own name as kind (a ``(chunkN)``/``_chunkN`` suffix still
  gives the chunk) and counted as busy time; types Paddle's passes do not
  print (anything but those, ``lr`` and VPP's ``recv4_*``/``send4_*``) also
  give one warning per type and file, naming the first line;
* a step is one printed block: a new step begins when a (type, micro-batch)
  pair repeats on a device; steps are numbered from ``S`` of the profiler line
  (default 0). Where the blocks so cut do not all run the same jobs (a wrong
  ``micro_batch_id`` repeats a pair inside a step), the split into equal
  blocks that best does is taken, so a wrong id makes no extra step. A line
  repeating an earlier one of its log (same type, id, start and end) is one
  job printed twice and is dropped with a warning before the split
  (:func:`~harness.imports.paddle_log.drop_repeated_lines`);
* a step that a device did not record, its log ending before or inside it,
  is left out of the figures (its jobs on every device dropped), with one
  warning per device naming file, device and steps; where no step is whole
  on every device, all are kept (:func:`~harness.imports.paddle_steps.recorded_steps`);
* micro-batch ids are checked per device, step and chunk (each micro-batch
  ``0 .. m-1`` once forward and once backward): ``m`` is one more than the
  largest id most of them have, and a repeated id, an id ``>= m``, missing
  ids, and ids no log has (a gap) give a warning naming file and line; the
  jobs are kept as logged;
* stages follow the placement of the schedule named by ``schedule_name`` when
  it is a built-in one (:func:`harness.schedule.registry.schedule_names`):
  the builder is run for the log's ``p``, ``m`` and ``v`` and its
  ``stage_to_rank`` taken, so ZB-V's and DualPipeV's V placement (rank ``r``
  holds stages ``r`` and ``2p - 1 - r``) survives an export and import; any
  other name gets Paddle's looped placement, ``stage = chunk * p + rank`` (a
  built-in name whose builder cannot give the log's sizes falls back to it
  with a warning, except a V-placement one, ZB-V or DualPipeV with
  ``m < 2p``, which keeps its V placement, with a warning);
* the job number ``N`` is not used (its meaning changed between versions);
* the figures are computed from :class:`~harness.records.RunRecords` by
  :func:`harness.analysis.metrics.compute_metrics`, the code that serves harness runs
  (overlapping jobs of one device count once: the union of their intervals).

Lines that mention ``Profiler Info:`` or ``Schedule Profiler`` but do not
parse, and job lines with a negative ``micro_batch_id`` or an end before their
start, are skipped with a :class:`PaddleLogWarning` naming file and line (and the same
text lands in ``case["warnings"]``); other lines are ignored. A skipped job line still
held a job of its step: the step split counts it in its place (so one damaged line does
not shift every later step's first job into the step before), and the warning about the
job its step lacks names that line.

:func:`paddle_log_lines` and :func:`write_paddle_logs` print a case of ours as
the same lines, for tools that parse them.
"""

from __future__ import annotations

import functools
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

from harness.analysis.metrics import compute_metrics, metrics_to_dict
from harness.errors import ConfigError, InputFormatError
from harness.imports.paddle_export import DEFAULT_EPOCH_NS, _ms, paddle_log_lines, write_paddle_logs
from harness.imports.paddle_log import (
    _CHUNK_SUFFIX,
    _JOB_MARK,
    _JOB_RE,
    _KIND_OF,
    _KNOWN_OTHER,
    _LOG_NAME,
    _MAX_TIME_NS,
    _NON_COMPUTE,
    _PIPELINE_WORK,
    _PROFILER_MARK,
    _STEP_MARK,
    _STEP_RE,
    _TYPE_OF,
    _TYPE_RE,
    EXPORT_MARK,
    PaddleJob,
    PaddleLogWarning,
    _device_gaps,
    _mixed_exports,
    _ms_to_ns,
    _natural,
    _not_logs,
    drop_repeated_lines,
    export_case_of,
    find_worker_logs,
    is_known_job_type,
    parse_job_type,
    parse_worker_log,
)
from harness.imports.paddle_steps import (
    _FAMILY,
    _MAX_ID_WARNINGS,
    MAX_SPLIT_CANDIDATES,
    _gaps,
    _hole,
    _hole_cost,
    _ids,
    _majority_m,
    _micro_batches,
    _runs,
    _split_cost,
    _split_on_repeat,
    _split_plain,
    _split_steps,
    _split_with_holes,
    recorded_steps,
)
from harness.records import JobRecord, RunRecords
from harness.report.layout import job_label, track_overflow
from harness.report.results import JOB_COLUMNS
from harness.schedule.model import Schedule, v_placement

# The importer is split by its seams: log lines and files
# (harness.imports.paddle_log), steps and micro-batch ids (harness.imports.paddle_steps), the export
# (harness.imports.paddle_export). Every name stays importable from here, as before the split.
__all__ = [
    "DEFAULT_EPOCH_NS",
    "EXPORT_MARK",
    "MAX_SPLIT_CANDIDATES",
    "PaddleJob",
    "PaddleLogWarning",
    "builtin_schedule_name",
    "export_case_of",
    "find_worker_logs",
    "import_paddle_logs",
    "is_known_job_type",
    "paddle_log_lines",
    "parse_job_type",
    "parse_worker_log",
    "write_paddle_logs",
]
_REEXPORTED = (_CHUNK_SUFFIX, _JOB_MARK, _JOB_RE, _KIND_OF, _KNOWN_OTHER, _LOG_NAME, _MAX_TIME_NS, _PROFILER_MARK, _STEP_MARK,
               _STEP_RE, _TYPE_OF, _TYPE_RE, _ms, _ms_to_ns, _natural, _FAMILY, _MAX_ID_WARNINGS, _gaps, _hole, _hole_cost,
               _ids, _majority_m, _runs, _split_cost, _split_on_repeat, _split_plain, _split_with_holes)  # (private, kept importable)


def import_paddle_logs(log_dir: Path, name: str | None = None, schedule_name: str = "PaddlePaddle log") -> dict[str, Any]:
    """Import a PaddlePaddle log folder (see module doc) as one results-document case.

    Args:
        log_dir: a folder of ``workerlog.<device>`` files (or ``machine*/``
            folders of them), or one log file.
        name: the case id (default ``"paddle:<folder name>"``).
        schedule_name: the schedule name shown in reports; a built-in schedule's
            name (``"ZB-V"``) also gives the stage placement (see module doc).

    Returns:
        A case dict (wrap it with :func:`harness.report.results.results_document`);
        times are integer ns relative to the earliest job start (its epoch time
        is ``case["device"]["time_base_epoch_ns"]``).

    Raises:
        InputFormatError: no worker logs, or no profiler line in any of them
            (names the folder).

    Warns:
        PaddleLogWarning: per unparsable profiler line, odd job, overlap, or a
            built-in ``schedule_name`` that cannot be placed on the logs' sizes.
    """
    log_dir = Path(log_dir)
    logs = find_worker_logs(log_dir)
    problems: list[str] = _not_logs(log_dir, logs) + _device_gaps(log_dir, logs) + _mixed_exports(log_dir, logs)
    per_rank: list[list[list[PaddleJob]]] = []
    hole_lines: list[list[list[int]]] = []  # per rank and step, the job lines skipped there (damaged)
    first_step: int | None = None
    labels: list[str] = []
    for machine, device, path in logs:
        skipped: list[int] = []
        jobs, marker, probs = parse_worker_log(path, skipped)
        problems.extend(probs)
        jobs = drop_repeated_lines(jobs, path, problems)
        if marker is not None and first_step is None:
            first_step = marker[0]
        if not jobs:
            problems.append(f"{path}: no 'Profiler Info: Job' lines; this device shows no jobs")
        elif not any(parse_job_type(j.type)[0] in _PIPELINE_WORK for j in jobs):
            types = ", ".join(sorted({j.type for j in jobs})[:5])
            problems.append(
                f"{path}: no forward or backward jobs, only {types} ({len(jobs)} line(s)); "
                f"imported as {f'{machine} GPU {device}'.strip()} with no pipeline work"
            )
        hole_lines.append([])
        per_rank.append(_split_steps(jobs, path, problems, skipped, hole_lines[-1]))
        labels.append(f"{machine} GPU {device}".strip())
    if not any(per_rank):
        for msg in problems:
            warnings.warn(msg, PaddleLogWarning, stacklevel=2)
        raise InputFormatError(
            f"{log_dir}: no 'Profiler Info: Job (N), type = T, micro_batch_id = M, job_start_time = MS, job_end_time = MS' "
            f"lines in {len(logs)} worker log(s); was the run started with the job schedule profiler on?"
        )
    p = len(per_rank)
    first_step = first_step or 0
    # Steps a device did not record (its log ends before or inside them) are left out of the figures.
    untrusted: list[str] = []  # why the figures are not the run's: the case is flagged 'steps'
    for (_, _, path), label, steps_of in zip(logs, labels, per_rank):
        if not steps_of:  # an empty log beside logs with jobs: that device counts as idle in every step
            untrusted.append(f"{path}: {label}'s log holds no job, so {label} counts as idle in every step: the step "
                             "times and the bubble are not the run's")
    kept = recorded_steps(per_rank, hole_lines, [path for _, _, path in logs], labels, first_step, problems, untrusted)
    per_rank = [steps[:kept] for steps in per_rank]
    hole_lines = [lines[:kept] for lines in hole_lines]
    id_problems: list[str] = []  # listed after the overlaps: what a reader checks first is the timing
    m = _micro_batches(per_rank, [path for _, _, path in logs], labels, first_step, id_problems, hole_lines)
    n_steps = max(len(s) for s in per_rank)
    flat: list[tuple[int, int, str, int, int, int, int, str]] = []  # rank, step, kind, mb, chunk, start, end, where
    for rank, steps_of_rank in enumerate(per_rank):
        for k, jobs in enumerate(steps_of_rank):
            for j in jobs:
                kind, chunk = parse_job_type(j.type)
                flat.append((rank, first_step + k, kind, j.microbatch, chunk, j.start_ns, j.end_ns, f"{logs[rank][2]}:{j.line}"))
    base = min(f[5] for f in flat)
    v = max(f[4] for f in flat) + 1
    # The builder places stages for the micro-batches the logs ran: where the ids leave a gap
    # (offset ids, 10**6 to 10**6 + 3), their count, not a builder run for m = 10**6 + 4.
    ran = len({f[3] for f in flat if f[2] in _FAMILY and f[2] != "W"})
    stage_to_rank = _placement(schedule_name, p, min(m, max(ran, 1)), v, problems)
    stages_of: list[list[int]] = [[] for _ in range(p)]  # chunk c of rank r is stage stages_of[r][c]
    for stage, r in enumerate(stage_to_rank):
        stages_of[r].append(stage)
    starts = [f[5] - base for f in flat]
    ends = [f[6] - base for f in flat]
    # Place overlapping jobs of one device on extra streams; send/receive jobs on the device's comm stream.
    by_rank: dict[int, list[int]] = defaultdict(list)
    by_comm: dict[int, list[int]] = defaultdict(list)
    for i, f in enumerate(flat):
        (by_comm if f[2] in _NON_COMPUTE else by_rank)[f[0]].append(i)
    track = [0] * len(flat)
    for order in (*by_rank.values(), *by_comm.values()):
        for i, t in zip(order, track_overflow(starts, ends, order)):
            track[i] = t
    streams: list[str] = []
    stream_index: dict[tuple[int, int], int] = {}  # (rank, track) -> stream; comm tracks are -1, -2, ...
    for rank in range(p):
        for t in sorted({track[i] for i in by_rank.get(rank, [])} | {0}):
            stream_index[(rank, t)] = len(streams)
            streams.append(f"rank{rank}/" + ("compute" if t == 0 else "overlap" if t == 1 else f"overlap{t}"))
        for t in sorted({track[i] for i in by_comm.get(rank, [])}):
            stream_index[(rank, -1 - t)] = len(streams)
            streams.append(f"rank{rank}/" + ("comm" if t == 0 else f"comm overlap{'' if t == 1 else t}"))
    for order in by_comm.values():
        for i in order:
            track[i] = -1 - track[i]
    overlaps: list[list[int]] = []
    designed = _designed_overlaps(schedule_name, p, min(m, max(ran, 1)), v)  # sized as the placement is (above)
    _built.cache_clear()  # the schedule both built: not kept past the import

    def key(f: tuple[Any, ...]) -> tuple[int, str, int]:
        return stages_of[f[0]][f[4]], f[2], f[3]

    for order in (*by_rank.values(), *by_comm.values()):
        ranked = sorted(order, key=lambda i: (starts[i], ends[i]))
        for pos, i in enumerate(ranked):
            if track[i] in (0, -1):
                continue
            earlier = next((k for k in reversed(ranked[:pos]) if starts[k] <= starts[i] < ends[k]), None)
            if earlier is None:
                continue
            fe, fi = flat[earlier], flat[i]
            if frozenset((key(fe), key(fi))) in designed:  # the schedule's own overlapped F&B pair: no host-stamp anomaly
                continue
            overlaps.append([earlier, i])
            problems.append(
                f"{fi[7]}: {labels[fi[0]]}: job {job_label(stages_of[fi[0]][fi[4]], fi[2], fi[3])} starts "
                f"{(ends[earlier] - starts[i]) / 1e6:.3f} ms before {job_label(stages_of[fe[0]][fe[4]], fe[2], fe[3])} "
                f"({fe[7]}) ends: overlapping jobs on one device (host start stamps); kept on stream "
                f"{streams[stream_index[(fi[0], track[i])]].split('/')[1]!r}"
            )
    cols: dict[str, list[Any]] = {c: [] for c in JOB_COLUMNS}
    for i, f in enumerate(flat):
        rank, step, kind, mb, chunk = f[0], f[1], f[2], f[3], f[4]
        cols["rank"].append(rank)
        cols["stream"].append(stream_index[(rank, track[i])])
        cols["stage"].append(stages_of[rank][chunk])
        cols["kind"].append(kind)
        cols["microbatch"].append(None if kind == "OPT" else mb)
        cols["chunk"].append(chunk)
        cols["step"].append(step)
        cols["start_ns"].append(starts[i])
        cols["end_ns"].append(ends[i])
    steps = [first_step + k for k in range(n_steps)]
    step_start = [min(s for s, st in zip(starts, cols["step"]) if st == k) for k in steps]
    step_end = [max(e for e, st in zip(ends, cols["step"]) if st == k) for k in steps]
    records = RunRecords(
        "paddle-log", {}, p, streams, steps, step_start, step_end,
        [JobRecord(cols["rank"][i], streams[cols["stream"][i]], cols["stage"][i], cols["kind"][i], cols["microbatch"][i],
                   cols["chunk"][i], cols["step"][i], cols["start_ns"][i], cols["end_ns"][i]) for i in range(len(flat))],
    )
    metrics = metrics_to_dict(compute_metrics(records))  # one implementation of the figures for runs and imports
    spans = device_spans(cols["rank"], cols["step"], starts, ends)
    clock_note = clock_disagreement(spans, steps, labels)
    if clock_note:
        problems.append(f"{log_dir}: {clock_note}")
    apart = None if clock_note else misaligned_step(spans, steps, labels)
    if apart is not None:
        untrusted.append(f"{logs[apart[0]][2]}: {apart[1]}")
        problems.append(untrusted[-1])
    first = steps[0]
    ranks_text = [
        [job_label(cols["stage"][i], cols["kind"][i], cols["microbatch"][i])
         for i in sorted((i for i in by_rank.get(r, []) if cols["step"][i] == first), key=lambda i: starts[i])]
        for r in range(p)
    ]
    problems.extend(id_problems)
    for msg in problems:
        warnings.warn(msg, PaddleLogWarning, stacklevel=2)
    case_id = name or f"paddle:{log_dir.name}"
    return {
        "id": case_id,
        "label": case_id,
        "schedule": {
            "name": schedule_name, "p": p, "m": m, "v": v,
            "stage_to_rank": stage_to_rank,
            "ranks": ranks_text,
            "params": {"source": "paddle"},
        },
        "backend": "paddle-log",
        "backend_reason": f"imported from PaddlePaddle worker logs in {log_dir}",
        "device": {"backend": "paddle-log", "clock": "host, ms since the epoch (job start stamped on the host)",
                   "time_base_epoch_ns": base, "log_dir": str(log_dir), "logs": [str(f) for _, _, f in logs]},
        "cost": {"model": "measured (imported)"},
        "streams": streams,
        "warmup_steps": 0,
        "steps": steps,
        "step_start_ns": step_start,
        "step_end_ns": step_end,
        "enqueue_ns": [],
        "deps": [],
        "jobs": cols,
        "metrics": metrics,
        "theory": {},
        "rank_labels": labels,
        "overlaps": overlaps,
        "warnings": problems,
        **({"flags": [*([{"kind": "clocks", "reason": clock_note}] if clock_note else []),
                      *([{"kind": "steps", "reason": "; ".join(untrusted)}] if untrusted else [])]}
           if clock_note or untrusted else {}),
    }


def device_spans(rank: list[int], step: list[int], starts: list[int], ends: list[int]) -> dict[int, dict[int, tuple[int, int]]]:
    """Per step, per device, its first job's start and last job's end (ns): ``{step: {device: (first, last)}}``,
    devices in ascending order.

    Args:
        rank, step, starts, ends: per job, its device, step and times (ns, one time base).
    """
    out: dict[int, dict[int, tuple[int, int]]] = {}
    for r, k, a, b in zip(rank, step, starts, ends):
        of_step = out.setdefault(k, {})
        lo, hi = of_step.get(r, (a, b))
        of_step[r] = (min(lo, a), max(hi, b))
    return {k: dict(sorted(v.items())) for k, v in out.items()}


def misaligned_step(spans: dict[int, dict[int, tuple[int, int]]], steps: list[int], labels: list[str]) -> tuple[int, str] | None:
    """The first device whose jobs of a step lie wholly outside the other devices' span of that
    step, with why: ``(device, text)``; ``None`` when every device's step overlaps the others'.

    Each log's job blocks are lined up with the other logs' by their order (the first block is the
    first step), and every device of a pipeline works during each step, so a device's step always
    overlaps the others' in time. One that does not lacks a step the others have (a log that starts
    a step late) or holds one more, or its clock reads a step or more off: the later steps are
    then paired wrongly, and their step times and bubble are not the run's.

    Args:
        spans: per step and device, its span (:func:`device_spans`).
        steps: the recorded steps.
        labels: per device, its name.
    """
    for k in steps:
        of_step = spans.get(k, {})
        for r, (first, last) in of_step.items():
            others = [span for q, span in of_step.items() if q != r]
            if not others:
                continue
            lo, hi = min(a for a, _ in others), max(b for _, b in others)
            if last <= lo or first >= hi:
                when = "after" if first >= hi else "before"
                return r, (f"{labels[r]}'s jobs of step {k} ({first / 1e6:,.3f} to {last / 1e6:,.3f} ms) lie "
                           f"wholly {when} the other devices' step {k} ({lo / 1e6:,.3f} to {hi / 1e6:,.3f} ms): its log's steps are "
                           "lined up with the others' by their order, and it lacks a step they have or holds one more (a log "
                           "that starts late or was cut at its start; or its clock reads a step or more off), so the step times "
                           "and the bubble from there on are not the run's")
    return None


def clock_disagreement(spans: dict[int, dict[int, tuple[int, int]]], steps: list[int], labels: list[str]) -> str | None:
    """Why the devices' clocks cannot agree, or ``None``: the first step whose span (first job start
    to last job end, ns) exceeds the sum of its devices' own spans.

    A training step begins and ends on the devices holding the first stage (its first forward,
    its last backward: the optimizer step aside), so on clocks that agree it lasts no longer than
    those devices' spans, let alone all devices' spans added up (it is near their mean for a
    pipeline with a small bubble). A device whose clock reads
    seconds or hours apart (logs of several hosts whose clocks were not synchronized) stretches the
    step far past that, and its step time and bubble ratio say nothing; the text names the device
    whose jobs start farthest from the others' (its first job's start against the median of the
    devices' first starts). Skews smaller than a step can pass: they are not told apart from
    transfer time here.

    Args:
        spans: per step and device, its span (:func:`device_spans`).
        steps: the recorded steps.
        labels: per device, its name (``"machine1 GPU 0"``).
    """
    for k in steps:
        of_step = spans.get(k, {})
        if len(of_step) < 2:
            continue
        span = max(b for _, b in of_step.values()) - min(a for a, _ in of_step.values())
        own = sum(b - a for a, b in of_step.values())
        if span <= own:
            continue
        starts_at = sorted(a for a, _ in of_step.values())
        middle = starts_at[(len(starts_at) - 1) // 2]
        odd = max(of_step, key=lambda r: abs(of_step[r][0] - middle))  # the first such device, in order
        apart = of_step[odd][0] - middle
        return (f"step {k} lasts {span / 1e6:,.3f} ms, more than its {len(of_step)} devices' own spans added up "
                f"({own / 1e6:,.3f} ms): their clocks disagree ({labels[odd]}'s jobs start {abs(apart) / 1e6:,.3f} ms "
                f"{'after' if apart > 0 else 'before'} the others'; or its log lacks a step theirs have), so the step times and "
                "the bubble ratio are not meaningful; logs of several hosts need clocks synchronized (NTP/PTP) while the run is profiled")
    return None


@functools.lru_cache(maxsize=1)
def _built(name: str, p: int, m: int, chunks: int) -> Schedule:
    """The built-in schedule ``name`` for these sizes, built once for both the placement and the overlapped
    pairs of an import (:func:`harness.schedule.registry.build_schedule`; its errors pass through)."""
    from harness.schedule.registry import build_schedule

    return build_schedule(name, p, m, chunks)


def _designed_overlaps(schedule_name: str, p: int, m: int, v: int) -> set[frozenset[tuple[int, str, int]]]:
    """The pairs of jobs, as ``(stage, kind, micro-batch)``, that the built-in schedule ``schedule_name`` runs
    overlapped for these sizes (DualPipeV's F&B groups, :mod:`harness.plan.groups`): an import expects them to
    overlap. Empty for a schedule without such groups, a name of the user's, or sizes its builder refuses."""
    from harness.errors import HarnessError
    from harness.schedule.groups import groups_of
    from harness.schedule.registry import builder_info

    try:
        info = builder_info(schedule_name)
        built = _built(info.name, p, m, v if info.takes_chunks else 1)
    except HarnessError:
        return set()
    out: set[frozenset[tuple[int, str, int]]] = set()
    for group in groups_of(built):
        keys = [(job.stage, job.kind.value, job.microbatch if job.microbatch is not None else 0) for job in group]
        out.update(frozenset((a, b)) for k, a in enumerate(keys) for b in keys[k + 1:])
    return out


def _placement(schedule_name: str, p: int, m: int, v: int, problems: list[str]) -> list[int]:
    """The stage-to-rank map for an import: the built-in schedule ``schedule_name``'s
    for ``p``, ``m`` and ``v`` (its builder run for them), else the looped one; a
    built-in name whose builder cannot give these sizes adds a note to ``problems``."""
    from harness.errors import ConfigError, HarnessError
    from harness.schedule.registry import builder_info

    loop = [r for _ in range(v) for r in range(p)]
    try:
        info = builder_info(schedule_name)
    except ConfigError:  # a name for the report, not a built-in schedule
        close = _close_schedule_name(schedule_name)
        # A misspelt name places the chunks looped: say so where the close built-in one places them otherwise.
        if v > 1 and close and _placement(close, p, m, v, []) != loop:
            problems.append(
                f"schedule {schedule_name!r} is not a built-in schedule (did you mean {close!r}?), so its stages are "
                "placed looped (stage = chunk * p + rank); give the built-in name to place them as it does"
            )
        return loop
    why = ""
    try:
        built = _built(info.name, p, m, v if info.takes_chunks else 1)
    except HarnessError as exc:
        why = str(exc).splitlines()[0]
        if v == 2 and _places_v(info.name, p):  # ZB-V, DualPipeV: the V placement does not depend on m
            problems.append(
                f"schedule {info.name!r} cannot be built for the logs' p={p}, m={m} ({why}); stages placed as its "
                f"builder places them for any m (V placement: rank r holds stages r and {2 * p - 1} - r)"
            )
            return list(v_placement(p))
    else:
        if built.num_ranks == p and built.chunks_per_rank == v:
            return list(built.stage_to_rank)
        why = f"it has {built.chunks_per_rank} chunk(s) per rank, the logs {v}"
    problems.append(
        f"schedule {info.name!r} cannot be placed on the logs' p={p}, m={m}, v={v} ({why}); "
        "stages placed looped instead (stage = chunk * p + rank)"
    )
    return loop


def builtin_schedule_name(name: str, option: str = "--schedule") -> str:
    """The canonical name of the built-in schedule ``name`` names (``"zbv"`` -> ``"ZB-V"``), for
    ``import-paddle --schedule``, whose only use is the stage placement a built-in schedule gives.

    Args:
        name: the name as given (an alias, any case; :func:`harness.schedule.registry.builder_info`).
        option: the option that gave it, for the message.

    Raises:
        ConfigError: no built-in schedule has that name; names the closest one, where one is close,
            and says how to list them or import without one. Or the schedule runs several chains
            (DualPipe's two directions, :mod:`harness.schedule.chains`), which a PaddlePaddle log does
            not describe.
    """
    from harness.schedule.registry import builder_info

    try:
        found = builder_info(name).name
    except ConfigError:
        close = _close_schedule_name(name)
        raise ConfigError(
            f"{option} {name!r} is not a built-in schedule" + (f" (did you mean {close!r}?)" if close else "")
            + "; python -m harness schedules lists them. Leave it out to place the stages looped, as Paddle does "
            "(stage = chunk * p + rank), and name the case with --name"
        ) from None
    if _runs_chains(found):
        raise ConfigError(
            f"{option} {name!r}: {found} runs two directions (each stage half the micro-batches, "
            "harness.schedule.chains), which PaddlePaddle has no schedule for and its logs do not describe: the importer would "
            "read every chunk as missing half its micro-batches. A DualPipe run's figures are in the results.json the harness "
            "wrote for it")
    return found


def _runs_chains(name: str) -> bool:
    """Whether the built-in schedule ``name`` runs several chains, asked of its builder at small sizes it accepts."""
    from harness.errors import HarnessError
    from harness.schedule.chains import CHAINS_PARAM
    from harness.schedule.registry import build_schedule

    for p, m in ((2, 4), (2, 8), (4, 8)):
        try:
            return bool(build_schedule(name, p, m).params.get(CHAINS_PARAM))
        except HarnessError:
            continue
    return False


def _close_schedule_name(name: str) -> str | None:
    """The built-in schedule name (or alias) closest to ``name``, if one is close."""
    import difflib

    from harness.schedule.registry import builder_info, schedule_names

    known = {n: n for n in schedule_names()}
    for n in schedule_names():
        known.update({alias: n for alias in builder_info(n).aliases})
    close = difflib.get_close_matches(name, list(known), n=1)
    if not close:
        lowered = {k.lower(): k for k in known}
        close = [lowered[c] for c in difflib.get_close_matches(name.lower(), list(lowered), n=1)]
    return known[close[0]] if close else None


def _places_v(name: str, p: int) -> bool:
    """Whether the built-in schedule ``name`` uses the V placement on ``p`` ranks
    (:func:`~harness.schedule.model.v_placement`), asked of its builder with
    micro-batch counts it accepts (DualPipeV needs ``m >= 2p``)."""
    from harness.errors import HarnessError
    from harness.schedule.registry import build_schedule

    for m in (2 * p, 4 * p):
        try:
            return tuple(build_schedule(name, p, m, 1).stage_to_rank) == v_placement(p)
        except HarnessError:
            continue
    return False
