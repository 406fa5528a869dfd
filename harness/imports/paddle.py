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
  blocks that best does is taken, so a wrong id makes no extra step;
* micro-batch ids are checked per device, step and chunk (each micro-batch
  ``0 .. m-1`` once forward and once backward): ``m`` is one more than the
  largest id most of them have, and a repeated id, an id ``>= m``, missing
  ids, and ids no log has (a gap) give a warning naming file and line; the
  jobs are kept as logged;
* stages follow the placement of the schedule named by ``schedule_name`` when
  it is a built-in one (:func:`harness.schedule.builders.schedule_names`):
  the builder is run for the log's ``p``, ``m`` and ``v`` and its
  ``stage_to_rank`` taken, so ZB-V's and DualPipeV's V placement (rank ``r``
  holds stages ``r`` and ``2p - 1 - r``) survives an export and import; any
  other name gets Paddle's looped placement, ``stage = chunk * p + rank`` (a
  built-in name whose builder cannot give the log's sizes falls back to it
  with a warning, except a V-placement one, ZB-V or DualPipeV with
  ``m < 2p``, which keeps its V placement, with a warning);
* the job number ``N`` is not used (its meaning changed between versions);
* the figures are computed from :class:`~harness.records.RunRecords` by
  :func:`harness.metrics.compute_metrics`, the code that serves harness runs
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

import itertools
import os
import re
import shutil
import tempfile
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, InputFormatError
from harness.metrics import compute_metrics, metrics_to_dict
from harness.records import JobRecord, RunRecords
from harness.report.atomic import atomic_write_text, ensure_writable_dir
from harness.report.layout import job_label, track_overflow
from harness.report.results import JOB_COLUMNS
from harness.schedule.model import v_placement

__all__ = [
    "PaddleJob",
    "PaddleLogWarning",
    "builtin_schedule_name",
    "find_worker_logs",
    "import_paddle_logs",
    "is_known_job_type",
    "paddle_log_lines",
    "parse_job_type",
    "parse_worker_log",
    "write_paddle_logs",
]

_PROFILER_MARK = "Profiler Info:"
_STEP_MARK = "Schedule Profiler"
_JOB_MARK = "Profiler Info: Job"
#: A job time (ns since the epoch) at or past this is skipped: the year 2116, which no clock reads,
#: and times relative to the import's time base must stay within 64 bits.
_MAX_TIME_NS = 1 << 62
_JOB_RE = re.compile(
    r"Profiler Info: Job \((?P<job>-?\d+)\), type = (?P<type>\S(?:.*?\S)?), micro_batch_id = (?P<mb>-?\d+), "
    r"job_start_time = (?P<start>\d+(?:\.\d+)?), job_end_time = (?P<end>\d+(?:\.\d+)?)\s*$",
    re.ASCII,  # digits 0-9 only: int() would also read other scripts' digits
)
_STEP_RE = re.compile(r"Schedule Profiler start at step (?P<start>\d+) and end at step (?P<end>\d+)\s*$", re.ASCII)
_TYPE_RE = re.compile(
    r"^(?P<base>forward|backward_b|backward_w|backward|optimizer|send_forward|recv_forward|send_backward|recv_backward)"
    r"(?:(?P<n>\d+)|\(chunk(?P<p>\d+)\)|_chunk(?P<u>\d+))?$",
    re.ASCII,
)
_CHUNK_SUFFIX = re.compile(r"^(?P<base>.+?)(?:\(chunk(?P<p>\d+)\)|_chunk(?P<u>\d+))$", re.ASCII)
#: Job types Paddle's pipeline passes print that are not pipeline compute jobs but
#: are known: the learning-rate job of FThenB/1F1B, and VPP's ``recv4_<job>``
#: receives (``pipeline_vpp.py`` with ``enable_send_recv_overlap``).
_KNOWN_OTHER = re.compile(r"^(?:lr|recv4_.+|send4_.+)$")
_KIND_OF = {"forward": "F", "backward": "B", "backward_b": "I", "backward_w": "W", "optimizer": "OPT",
            # newer Paddle passes print their point-to-point jobs under these names
            "send_forward": "SEND_F", "recv_forward": "RECV_F", "send_backward": "SEND_B", "recv_backward": "RECV_B"}
_TYPE_OF = {v: k for k, v in _KIND_OF.items()}
_PIPELINE_WORK = frozenset({"F", "B", "I", "W"})
_LOG_NAME = re.compile(r"^workerlog\.(\d+)$", re.ASCII)
_NON_COMPUTE = frozenset({"SEND_F", "RECV_F", "SEND_B", "RECV_B", "UNSHARD", "RESHARD", "REDUCE_GRAD"})  # Paddle has no job for them


class PaddleLogWarning(UserWarning):
    """A line of a PaddlePaddle log looked like profiler output but did not parse,
    or a job was odd (end before start, overlap); the message names file and line."""


@dataclass(frozen=True)
class PaddleJob:
    """One parsed ``Profiler Info`` line.

    Attributes:
        type: the job type as printed (``forward``, ``forward(chunk0)``...).
        microbatch: ``micro_batch_id``.
        start_ns, end_ns: ns since the epoch (exact: the log has 6 decimals of ms).
        line: 1-based line number in its file.
    """

    type: str
    microbatch: int
    start_ns: int
    end_ns: int
    line: int


def _ms_to_ns(text: str) -> int:
    whole, _, frac = text.partition(".")
    return int(whole) * 1_000_000 + int((frac + "000000")[:6])


def parse_job_type(job_type: str) -> tuple[str, int]:
    """Map a Paddle job type to ``(kind, chunk)``: ``"forward(chunk1)"`` -> ``("F", 1)``.

    A type outside the compute jobs keeps its own name as kind, with a
    ``(chunkN)`` or ``_chunkN`` suffix read as the chunk (``"lr"`` ->
    ``("lr", 0)``, ``"frobnicate(chunk1)"`` -> ``("frobnicate", 1)``).
    """
    m = _TYPE_RE.match(job_type)
    if not m:
        c = _CHUNK_SUFFIX.match(job_type)
        if c:
            return c.group("base"), int(c.group("p") or c.group("u"))
        return job_type, 0
    chunk = m.group("n") or m.group("p") or m.group("u") or "0"
    return _KIND_OF[m.group("base")], int(chunk)


def is_known_job_type(job_type: str) -> bool:
    """Whether Paddle's pipeline passes print ``job_type``: the compute jobs
    (``forward``, ``backward``, ``backward_b``, ``backward_w``, ``optimizer``, with a
    chunk suffix), ``lr``, and VPP's ``recv4_``/``send4_`` jobs."""
    return bool(_TYPE_RE.match(job_type)) or bool(_KNOWN_OTHER.match(parse_job_type(job_type)[0]))


def parse_worker_log(path: Path, holes: list[int] | None = None) -> tuple[list[PaddleJob], tuple[int, int] | None, list[str]]:
    """Read one ``workerlog.<device>`` file.

    Args:
        path: the log.
        holes: where given, the 1-based numbers of the job lines that were skipped (a
            ``Profiler Info: Job`` line that does not parse, a negative ``micro_batch_id``, an
            end before the start) are appended to it: each is a job missing from the returned
            list, which the step split places (:func:`_split_steps`).

    Returns:
        ``(jobs in file order, (start step, end step) or None, warnings)``;
        each warning names the file and line.

    Raises:
        InputFormatError: the file cannot be read.
    """
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise InputFormatError(f"{path}: cannot read log: {exc.strerror or exc}") from None
    jobs: list[PaddleJob] = []
    marker: tuple[int, int] | None = None
    problems: list[str] = []
    unknown: dict[str, list[int]] = {}  # unknown job type -> [first line, count]
    for lineno, line in enumerate(text.splitlines(), 1):
        if _PROFILER_MARK in line:
            m = _JOB_RE.search(line)
            if m is None:
                problems.append(f"{path}:{lineno}: a 'Profiler Info' line that does not parse, skipped: {line.strip()[:160]!r}")
                if holes is not None and _JOB_MARK in line:
                    holes.append(lineno)
                continue
            if holes is not None and (int(m.group("mb")) < 0 or _ms_to_ns(m.group("start")) <= 0
                                      or _ms_to_ns(m.group("end")) < _ms_to_ns(m.group("start"))
                                      or _ms_to_ns(m.group("end")) >= _MAX_TIME_NS):
                holes.append(lineno)  # skipped below, with its warning
            if int(m.group("mb")) < 0:  # Paddle's Job::SetMicroBatchId refuses negative ids: the line is corrupt
                problems.append(
                    f"{path}:{lineno}: job {m.group('type')} has micro_batch_id {m.group('mb')} (negative; "
                    "micro-batches count from 0), skipped"
                )
                continue
            start, end = _ms_to_ns(m.group("start")), _ms_to_ns(m.group("end"))
            if end >= _MAX_TIME_NS:  # (end >= start below): a time no clock reads, which would not fit 64 bits later
                problems.append(
                    f"{path}:{lineno}: job {m.group('type')} micro-batch {m.group('mb')} has "
                    f"{'start' if start >= _MAX_TIME_NS else 'end'} {m.group('start' if start >= _MAX_TIME_NS else 'end')} ms, "
                    "past 2**62 ns since the epoch (the year 2116): not a time the profiler writes, skipped"
                )
                continue
            if start <= 0 or end < start:
                problems.append(
                    f"{path}:{lineno}: job {m.group('type')} micro-batch {m.group('mb')} has "
                    f"start {m.group('start')} ms and end {m.group('end')} ms (end before start, or no timer), skipped"
                )
                continue
            jobs.append(PaddleJob(m.group("type"), int(m.group("mb")), start, end, lineno))
            if not is_known_job_type(m.group("type")):
                seen = unknown.setdefault(m.group("type"), [lineno, 0])
                seen[1] += 1
        elif _STEP_MARK in line:
            m = _STEP_RE.search(line)
            if m is None:
                problems.append(f"{path}:{lineno}: a 'Schedule Profiler' line that does not parse, ignored: {line.strip()[:160]!r}")
            elif marker is None:
                marker = (int(m.group("start")), int(m.group("end")))
    for job_type, (lineno, count) in unknown.items():
        kind, chunk = parse_job_type(job_type)
        problems.append(
            f"{path}:{lineno}: unknown job type {job_type!r} (not forward, backward, backward_b, backward_w, optimizer "
            f"or lr); kept as kind {kind!r}" + (f" on chunk {chunk}" if chunk else "")
            + ", counted as busy time" + (f" ({count} lines in this file)" if count > 1 else "")
        )
    return jobs, marker, problems


def _natural(name: str) -> tuple[Any, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def find_worker_logs(log_dir: Path) -> list[tuple[str, int, Path]]:
    """The worker logs of a run: ``[(machine, device, path)]`` in rank order.

    ``log_dir`` may be one log file, a folder of ``workerlog.<device>`` files,
    or a folder of ``machine*`` folders holding them (then ``machine`` is the
    folder name, else ``""``).

    Raises:
        InputFormatError: the path does not exist, holds no worker log, or holds
            two logs of one device (``workerlog.1`` and ``workerlog.01``).
    """
    log_dir = Path(log_dir)
    if log_dir.is_file():
        m = _LOG_NAME.match(log_dir.name)
        return [("", int(m.group(1)) if m else 0, log_dir)]
    if not log_dir.is_dir():
        raise InputFormatError(f"{log_dir}: no such log folder")

    def logs_in(folder: Path) -> list[tuple[int, Path]]:
        found: dict[int, Path] = {}
        for f in sorted(folder.iterdir()):
            m = _LOG_NAME.match(f.name)
            if m and f.is_file():
                device = int(m.group(1))
                if device in found:  # workerlog.1 and workerlog.01: which one is GPU 1?
                    raise InputFormatError(
                        f"{folder}: {found[device].name} and {f.name} both name device {device}; "
                        "one log per device: remove or rename the other"
                    )
                found[device] = f
        return sorted(found.items())

    machines = sorted((d for d in log_dir.iterdir() if d.is_dir() and d.name.startswith("machine")), key=lambda d: _natural(d.name))
    out = [(d.name, dev, f) for d in machines for dev, f in logs_in(d)]
    if not out:
        out = [("", dev, f) for dev, f in logs_in(log_dir)]
    if not out:
        raise InputFormatError(
            f"{log_dir}: no PaddlePaddle worker logs found (expected workerlog.<device> files here or in machine*/ sub-folders)"
        )
    return out


def _not_logs(log_dir: Path, logs: list[tuple[str, int, Path]]) -> list[str]:
    """One warning per entry named like a worker log (``workerlog.1``) that is not a
    file, in the folders the logs came from: it was skipped."""
    if Path(log_dir).is_file():
        return []
    folders = {path.parent for _, _, path in logs} | {Path(log_dir)}
    out = []
    for folder in sorted(folders):
        for f in sorted(folder.iterdir()):
            if _LOG_NAME.match(f.name) and not f.is_file():
                what = "a folder" if f.is_dir() else "not a regular file"
                out.append(f"{f}: named like a worker log but {what}; skipped")
    return out


def _device_gaps(log_dir: Path, logs: list[tuple[str, int, Path]]) -> list[str]:
    """One warning per folder whose ``workerlog.<device>`` numbers leave a gap
    (``workerlog.1`` missing beside 0, 2 and 3): the ranks are the logs found, in
    order, so a missing log shifts every later device down a rank."""
    out: list[str] = []
    folders: dict[Path, list[int]] = defaultdict(list)
    for _, device, path in logs:
        folders[path.parent].append(device)
    if Path(log_dir).is_file():
        return out
    for folder, devices in folders.items():
        missing = sorted(set(range(max(devices) + 1)) - set(devices))
        if missing:
            out.append(
                f"{folder}: no {', '.join(f'workerlog.{d}' for d in missing)} "
                f"(devices {', '.join(map(str, sorted(devices)))} found); "
                f"imported as {len(devices)} ranks in device order, so later devices move down a rank"
            )
    return out


def _split_on_repeat(jobs: list[PaddleJob]) -> list[list[PaddleJob]]:
    """Split a device's jobs into blocks: a new one starts where a (type, micro-batch) pair repeats."""
    steps: list[list[PaddleJob]] = []
    seen: set[tuple[str, int]] = set()
    for j in jobs:
        key = (j.type, j.microbatch)
        if not steps or key in seen:
            steps.append([])
            seen = set()
        steps[-1].append(j)
        seen.add(key)
    return steps


def _split_cost(blocks: list[list[PaddleJob]]) -> int:
    """How far ``blocks`` are from steps that each run the same jobs once: per block, the
    (type, micro-batch) pairs it has twice, has but most blocks lack, and (but for the last
    block, which a truncated log may cut short) lacks but most blocks have."""
    keys = [Counter((j.type, j.microbatch) for j in b) for b in blocks]
    presence = Counter(k for c in keys for k in c)
    common = {k for k, n in presence.items() if 2 * n >= len(blocks)}
    cost = 0
    for i, c in enumerate(keys):
        cost += sum(n - 1 for n in c.values()) + sum(1 for k in c if k not in common)
        if i < len(keys) - 1:
            cost += sum(1 for k in common if k not in c)
    return cost


#: The most step lengths :func:`_split_steps` tries when the plain split fails (each try is
#: linear in the log's lines), so a log with wrong ids costs a few passes, not one per length.
MAX_SPLIT_CANDIDATES = 12


def _hole(line: int) -> PaddleJob:
    """A stand-in for the job of a skipped line (``type`` empty): its pair never repeats."""
    return PaddleJob("", -line, 0, 0, line)


def _hole_cost(blocks: list[list[PaddleJob]]) -> int:
    """:func:`_split_cost` for blocks holding stand-ins of skipped job lines (:func:`_hole`): each
    stand-in fills one job its block lacks; one with nothing to fill costs 1, and so does each job a
    block lacks, the last block's too (else a split that cuts a short last block off would be free).
    A job is one every step runs where most blocks have it, or where the stand-ins could stand for it
    in every block that lacks it (two of three steps with the same line damaged)."""
    keys = [Counter((j.type, j.microbatch) for j in b if j.type) for b in blocks]
    presence = Counter(k for c in keys for k in c)
    stand_ins = sum(1 for b in blocks for j in b if not j.type)
    common = {k for k, n in presence.items() if 2 * n >= len(blocks) or n + stand_ins >= len(blocks)}
    cost = 0
    for b, c in zip(blocks, keys):
        holes = sum(1 for j in b if not j.type)
        lacking = sum(1 for k in common if k not in c)
        cost += sum(n - 1 for n in c.values()) + sum(1 for k in c if k not in common) + abs(holes - lacking)
    return cost


def _split_with_holes(jobs: list[PaddleJob], holes: list[int]) -> list[list[PaddleJob]]:
    """Split a device's jobs into steps where job lines were skipped (``holes``, their line numbers):
    each skipped line still held one job of its step, so a stand-in takes its place in the file's order
    and the split (on a repeat, or into equal blocks, as :func:`_split_steps`) counts it as that job.
    Without the stand-in one missing job shifts every later step's first job into the step before.
    The blocks returned keep the stand-ins (``type`` empty)."""
    seq = sorted([*jobs, *map(_hole, holes)], key=lambda j: j.line)
    naive = _split_on_repeat(seq)
    best, best_cost = naive, _hole_cost(naive)
    if best_cost == 0:
        return naive
    distinct = len({(j.type, j.microbatch) for j in jobs})
    lengths = [len(b) for b in naive]
    ranked = [n for n, _ in Counter(lengths).most_common(4)]
    ranked += [n for n, _ in Counter(a + b for a, b in itertools.pairwise(lengths)).most_common(4)]
    ranked += [distinct, distinct + 1, distinct - 1]
    for length in sorted(set(n for n in ranked if 1 <= n <= len(seq)))[:MAX_SPLIT_CANDIDATES]:
        blocks = [seq[i:i + length] for i in range(0, len(seq), length)]
        if not all(any(j.type for j in b) for b in blocks):  # a step of stand-ins only: no step was logged there
            continue
        cost = _hole_cost(blocks)
        if cost < best_cost:
            best, best_cost = blocks, cost
    return best


def _split_steps(jobs: list[PaddleJob], path: Path | None = None, problems: list[str] | None = None,
                 holes: list[int] | None = None, holes_out: list[list[int]] | None = None) -> list[list[PaddleJob]]:
    """Split a device's jobs into steps (printed blocks).

    ``holes``: the line numbers of job lines :func:`parse_worker_log` skipped (damaged), each a job
    missing from ``jobs`` that the split places by its line (:func:`_split_with_holes`); where given,
    ``holes_out`` receives, per step returned, the skipped lines that fell in it.

    Every step of a Paddle run executes the same job list, so a block normally
    ends where a (type, micro-batch) pair repeats. A wrong ``micro_batch_id``
    (a ``1`` printed or edited as ``0``) repeats a pair inside a step; where the
    blocks so found do not all run the same jobs, the split into equal blocks
    that runs the same jobs in every block best is taken instead, so a wrong id
    is one odd job in its step, not an extra step. The lengths tried are anchored
    on the repeating pattern: the commonest lengths of the plain split's blocks,
    the sums of neighbouring blocks (a wrong id cuts one step in two), and the
    count of distinct pairs and its neighbours, within the old window of that count
    +- max(4, count // 8): at most :data:`MAX_SPLIT_CANDIDATES` lengths, each tried
    in one linear pass, so the split stays linear in the lines whatever the input.
    When two lengths fit equally well, the length of blocks the plain split found
    more than once wins; failing that the split is ambiguous: the shorter length is
    taken and a note naming ``path`` and the line where the chosen second step
    starts goes to ``problems``.
    """
    if holes and jobs:
        blocks = _split_with_holes(jobs, holes)
        if holes_out is not None:
            holes_out.extend([j.line for j in b if not j.type] for b in blocks)
        return [[j for j in b if j.type] for b in blocks]
    steps = _split_plain(jobs, path, problems)
    if holes_out is not None:
        holes_out.extend([] for _ in steps)
    return steps


def _split_plain(jobs: list[PaddleJob], path: Path | None, problems: list[str] | None) -> list[list[PaddleJob]]:
    """:func:`_split_steps` of a log without skipped job lines."""
    naive = _split_on_repeat(jobs)
    first = {(j.type, j.microbatch) for j in naive[0]} if naive else set()
    if all({(j.type, j.microbatch) for j in b} == first for b in naive[:-1]) and \
            all((j.type, j.microbatch) in first for j in (naive[-1] if naive else [])):
        return naive  # the common case: every block runs the same jobs (the last maybe cut short)
    distinct = len({(j.type, j.microbatch) for j in jobs})
    slack = max(4, distinct // 8)
    low, high = max(1, distinct - slack), min(len(jobs), distinct + slack)
    lengths = [len(b) for b in naive]
    ranked: list[int] = [n for n, _ in Counter(lengths).most_common(4)]
    ranked += [n for n, _ in Counter(a + b for a, b in itertools.pairwise(lengths)).most_common(4)]
    ranked += [distinct, distinct + 1, distinct - 1]
    candidates: list[int] = []
    for n in ranked:
        if low <= n <= high and n not in candidates:
            candidates.append(n)
    candidates = sorted(candidates[:MAX_SPLIT_CANDIDATES])
    best, best_cost = naive, _split_cost(naive)
    tied: list[int] = []
    for length in candidates:
        blocks = [jobs[i:i + length] for i in range(0, len(jobs), length)]
        cost = _split_cost(blocks)
        if cost < best_cost:
            best, best_cost, tied = blocks, cost, [length]
        elif cost == best_cost and best is not naive:
            tied.append(length)
    common, repeats = Counter(lengths).most_common(1)[0]
    if len(tied) > 1 and repeats > 1 and common in tied:  # the repeating pattern's own length breaks the tie
        best = [jobs[i:i + common] for i in range(0, len(jobs), common)]
        tied = [common]
    if len(tied) > 1 and problems is not None and len(best) > 1:
        where = f"{path}:{best[1][0].line}" if path is not None else f"line {best[1][0].line}"
        problems.append(
            f"{where}: ambiguous step split (a repeated micro_batch_id?): steps of {' or '.join(map(str, tied))} jobs fit "
            f"this log equally well; took {len(best[0])} jobs per step, the second step starting here"
        )
    return best


#: Job kinds per family of jobs that run each micro-batch once per chunk on a device in
#: every step: its forward, and its backward, full (B) or for inputs only (I; split
#: schedules such as DualPipeV mix the two). W follows I only where the backward split,
#: so its ids are checked for repeats and range, not for completeness.
_FAMILY = {"F": "F", "B": "B", "I": "B", "W": "W"}
#: At most this many micro-batch id warnings per import; the rest are counted.
_MAX_ID_WARNINGS = 20


def _micro_batches(per_rank: list[list[list[PaddleJob]]], paths: list[Path], labels: list[str], first_step: int,
                   problems: list[str], holes: list[list[list[int]]] | None = None) -> int:
    """The number of micro-batches ``m`` of the logs, checking the ids on the way.

    On a device, every step runs each micro-batch ``0 .. m-1`` once per chunk
    forward (``forward``) and once backward (``backward`` or ``backward_b``).
    ``m`` is one more than the largest id that more than half of these (device,
    step, chunk, forward or backward) groups have, ties going to the smaller
    ``m`` (:func:`_majority_m`), so one impossible id (``micro_batch_id = 99``)
    does not make ``m = 100``. Per group, an id seen
    twice, an id ``>= m`` and the ids below ``m`` it lacks are reported in
    ``problems`` naming file and line (``backward_w`` groups: repeats and
    range only); an id no group has (a gap below the largest) is reported once.
    The jobs are kept as logged: their times are real, only an id is wrong.
    Where ``holes`` (per device and step, the job lines skipped as damaged) has lines in a
    step whose group lacks ids, the warning names the first of them: the missing job was there.
    """
    groups: dict[tuple[int, int, str, int], list[PaddleJob]] = {}
    for rank, steps in enumerate(per_rank):
        for k, jobs in enumerate(steps):
            for j in jobs:
                kind, chunk = parse_job_type(j.type)
                if kind in _FAMILY:
                    groups.setdefault((rank, k, _FAMILY[kind], chunk), []).append(j)
    complete = [jobs for (_, _, family, _), jobs in groups.items() if family != "W"]
    if not complete:
        return max((j.microbatch for steps in per_rank for jobs in steps for j in jobs), default=-1) + 1
    presence = Counter(mb for jobs in complete for mb in {j.microbatch for j in jobs})
    m = _majority_m(presence, len(complete))
    # The ids below m that some group has, ascending; the others below m (a gap) no log has.
    # Sets and runs only, never range(m): ids offset by 10**6 cost no more than small ones.
    known = sorted(mb for mb in presence if mb < m)
    absent_runs = _gaps(known, m)
    found: list[str] = []
    if absent_runs:
        top = min((j for jobs in groups.values() for j in jobs if j.microbatch == m - 1), key=lambda j: j.line)
        where = next(paths[r] for (r, *_), jobs in groups.items() if top in jobs)
        found.append(f"{where}:{top.line}: no job in any log has micro_batch_id {_runs(absent_runs)}, though the largest id, "
                     f"{m - 1}, makes m = {m}: the ids leave a gap (lines missing, or ids wrong)")
    for (rank, k, family, _), jobs in groups.items():
        lines: dict[int, list[int]] = {}
        for j in jobs:
            lines.setdefault(j.microbatch, []).append(j.line)
        twice = {mb: ls for mb, ls in lines.items() if len(ls) > 1}
        beyond = {mb: ls for mb, ls in lines.items() if mb >= m}
        missing = [mb for mb in known if mb not in lines] if family != "W" else []
        if not (twice or beyond or missing):
            continue
        what = [f"micro-batch {mb} {'twice' if len(ls) == 2 else f'{len(ls)} times'} (lines {', '.join(map(str, ls))})"
                for mb, ls in sorted(twice.items())]
        what += [f"micro_batch_id {mb} (line {', '.join(map(str, ls))}), beyond m = {m} of the other steps and devices"
                 for mb, ls in sorted(beyond.items())]
        if missing:
            what.append(f"no micro-batch {_ids(missing)}")
        line = min(ls[0] for ls in (*twice.values(), *beyond.values())) if twice or beyond else jobs[0].line
        hint = ("a micro_batch_id on these lines is wrong; the jobs are kept as logged" if twice or beyond
                else "lines are missing (a log cut short?) or an id is wrong")
        skipped = holes[rank][k] if holes and rank < len(holes) and k < len(holes[rank]) else []
        if missing and not (twice or beyond) and skipped:  # the job was on a damaged line, skipped: name that line
            line = skipped[0]
            hint = (f"line{'s' if len(skipped) > 1 else ''} {', '.join(map(str, skipped))} of this step "
                    f"{'were' if len(skipped) > 1 else 'was'} skipped as damaged: the missing job was there")
        types = " or ".join(dict.fromkeys(j.type for j in jobs))
        found.append(f"{paths[rank]}:{line}: {labels[rank]}, step {first_step + k}: {types} has "
                     f"{'; '.join(what)}: {hint}")
    problems.extend(found[:_MAX_ID_WARNINGS])
    if len(found) > _MAX_ID_WARNINGS:
        problems.append(f"... and {len(found) - _MAX_ID_WARNINGS} more (device, step, job type) groups with micro-batch id problems")
    return m


def _majority_m(presence: Counter[int], groups: int) -> int:
    """``m`` from how many of ``groups`` (device, step, chunk, forward or backward)
    groups have each micro-batch id (``presence``): one more than the largest id
    more than half of them have; an id exactly half of them have (a tie: a
    one-device, one-step log has two groups) raises it only through ids all at
    least half of them have (a log cut short), so ties go to the smaller m and
    one stray ``micro_batch_id = 99`` does not make ``m = 100``."""
    half = {mb for mb, n in presence.items() if 2 * n >= groups}
    top = max((mb for mb in half if 2 * presence[mb] > groups), default=None)
    if top is None:  # no id has a majority: the smallest ids at least half have, else every id
        if not half:
            return max(presence) + 1
        top = min(half)
    while top + 1 in half:
        top += 1
    return top + 1


def _gaps(known: list[int], m: int) -> list[tuple[int, int]]:
    """The runs ``(first, last)`` of ids ``0 .. m-1`` missing from ``known`` (ascending)."""
    runs, nxt = [], 0
    for mb in known:
        if mb > nxt:
            runs.append((nxt, mb - 1))
        nxt = mb + 1
    if nxt < m:
        runs.append((nxt, m - 1))
    return runs


def _runs(runs: list[tuple[int, int]]) -> str:
    """``[(1, 3), (7, 7)]`` as ``1-3, 7``."""
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _ids(ids: list[int]) -> str:
    """``[1, 2, 3, 7]`` as ``1-3, 7``."""
    runs: list[list[int]] = []
    for i in sorted(ids):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


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
    for order in (*by_rank.values(), *by_comm.values()):
        ranked = sorted(order, key=lambda i: (starts[i], ends[i]))
        for pos, i in enumerate(ranked):
            if track[i] in (0, -1):
                continue
            earlier = next((k for k in reversed(ranked[:pos]) if starts[k] <= starts[i] < ends[k]), None)
            if earlier is None:
                continue
            overlaps.append([earlier, i])
            fe, fi = flat[earlier], flat[i]
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
    }


def _placement(schedule_name: str, p: int, m: int, v: int, problems: list[str]) -> list[int]:
    """The stage-to-rank map for an import: the built-in schedule ``schedule_name``'s
    for ``p``, ``m`` and ``v`` (its builder run for them), else the looped one; a
    built-in name whose builder cannot give these sizes adds a note to ``problems``."""
    from harness.errors import ConfigError, HarnessError
    from harness.schedule.builders import build_schedule, builder_info

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
        built = build_schedule(info.name, p, m, v if info.takes_chunks else 1)
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
        name: the name as given (an alias, any case; :func:`harness.schedule.builders.builder_info`).
        option: the option that gave it, for the message.

    Raises:
        ConfigError: no built-in schedule has that name; names the closest one, where one is close,
            and says how to list them or import without one.
    """
    from harness.schedule.builders import builder_info

    try:
        return builder_info(name).name
    except ConfigError:
        close = _close_schedule_name(name)
        raise ConfigError(
            f"{option} {name!r} is not a built-in schedule" + (f" (did you mean {close!r}?)" if close else "")
            + "; python -m harness schedules lists them. Leave it out to place the stages looped, as Paddle does "
            "(stage = chunk * p + rank), and name the case with --name"
        ) from None


def _close_schedule_name(name: str) -> str | None:
    """The built-in schedule name (or alias) closest to ``name``, if one is close."""
    import difflib

    from harness.schedule.builders import builder_info, schedule_names

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
    from harness.schedule.builders import build_schedule

    for m in (2 * p, 4 * p):
        try:
            return tuple(build_schedule(name, p, m, 1).stage_to_rank) == v_placement(p)
        except HarnessError:
            continue
    return False


#: Default epoch time of our time base 0 when a case has none (2023-11-14 22:13:20 UTC).
DEFAULT_EPOCH_NS = 1_700_000_000 * 10**9


def _ms(ns: int) -> str:
    return f"{ns // 1_000_000}.{ns % 1_000_000:06d}"


def paddle_log_lines(case: dict[str, Any], rank: int, epoch_ns: int | None = None) -> list[str]:
    """Our jobs of ``rank`` printed as PaddlePaddle's profiler lines, in start order per step.

    Kinds map back to types (F ``forward``, B ``backward``, I ``backward_b``,
    W ``backward_w``, OPT ``optimizer``; a chunk suffix ``forward1`` when
    ``v > 1``); send/receive and data-parallel (``UNSHARD``, ``RESHARD``,
    ``REDUCE_GRAD``) jobs are left out (Paddle does not time them as jobs). ``Job (N)`` carries the micro-batch id, as Paddle prints it.

    Args:
        case: a results-document case.
        rank: the rank (device) to print.
        epoch_ns: epoch time of the case's time base 0 (default: the case's
            ``device.time_base_epoch_ns`` or :data:`DEFAULT_EPOCH_NS`).
    """
    base = epoch_ns if epoch_ns is not None else int((case.get("device") or {}).get("time_base_epoch_ns", DEFAULT_EPOCH_NS))
    v = int(case["schedule"].get("v", 1))
    jobs = case["jobs"]
    idx = [i for i in range(len(jobs["kind"])) if jobs["rank"][i] == rank and jobs["kind"][i] not in _NON_COMPUTE]
    idx.sort(key=lambda i: (jobs["step"][i], jobs["start_ns"][i]))
    lines = []
    if case["steps"]:
        lines.append(f"Schedule Profiler start at step {case['steps'][0]} and end at step {case['steps'][-1] + 1}")
    for i in idx:
        kind = jobs["kind"][i]
        job_type = _TYPE_OF.get(kind, kind) + (str(jobs["chunk"][i]) if v > 1 and kind in _TYPE_OF else "")
        mb = jobs["microbatch"][i] if jobs["microbatch"][i] is not None else 0
        start, end = base + jobs["start_ns"][i], base + jobs["end_ns"][i]
        stamp = datetime.fromtimestamp(end / 1e9, tz=timezone.utc)
        lines.append(
            f"I{stamp:%m%d %H:%M:%S.%f} {1000 + rank} standalone_executor.cc:217] Profiler Info: Job ({mb}), type = {job_type}, "
            f"micro_batch_id = {mb}, job_start_time = {_ms(start)}, job_end_time = {_ms(end)}"
        )
    return lines


#: Last line of every worker log :func:`write_paddle_logs` writes (the importer skips it; last, so the
#: profiler lines keep their line numbers): how a later export knows the logs in its folder are its own.
EXPORT_MARK = "# written by pipeline-harness export-paddle"


def write_paddle_logs(folder: Path, case: dict[str, Any], epoch_ns: int | None = None) -> list[Path]:
    """Write ``folder/workerlog.<rank>`` for every rank of ``case`` (see :func:`paddle_log_lines`),
    each ending with :data:`EXPORT_MARK`. All logs are written to a staging folder first and
    then moved into place, so a failed export (a full disk) changes nothing; logs an earlier
    export left for ranks this case does not have are removed, so an import of the folder
    reads this case alone.

    Raises:
        ConfigError: ``folder`` is a file or cannot be created, or it holds worker logs
            that no export wrote, here or in ``machine*/`` sub-folders (real
            PaddlePaddle logs are never overwritten, nor left for an import to prefer).
        OSError: a file cannot be written; nothing in ``folder`` has changed then.
    """
    folder = Path(folder)
    ensure_writable_dir(folder, "log folder")
    existing = [path for path in folder.iterdir() if _LOG_NAME.match(path.name) and path.is_file()]
    blocked = [path.name for path in folder.iterdir() if _LOG_NAME.match(path.name) and not path.is_file()]
    if blocked:  # a folder (or other non-file) where a log goes: refuse before moving anything in
        raise ConfigError(f"{folder}: {', '.join(sorted(blocked, key=_natural))} is not a file; export-paddle writes its worker logs there")
    nested = [f"{d.name}/{f.name}" for d in folder.iterdir() if d.is_dir() and d.name.startswith("machine")
              for f in d.iterdir() if _LOG_NAME.match(f.name)]
    foreign = sorted((path.name for path in existing if export_case_of(path) is None), key=_natural) + sorted(nested, key=_natural)
    if foreign:
        raise ConfigError(
            f"{folder} holds worker logs that export-paddle did not write ({', '.join(foreign[:8])}"
            f"{f', ... ({len(foreign) - 8} more)' if len(foreign) > 8 else ''}); export into an empty folder "
            "(or one of earlier exports) so they are not overwritten or mixed into an import"
        )
    mark = f"{EXPORT_MARK} from case {case['id']!r}"
    stage = Path(tempfile.mkdtemp(prefix=".export-", dir=folder))
    try:
        staged = []
        for rank in range(int(case["schedule"]["p"])):
            text = "\n".join([*paddle_log_lines(case, rank, epoch_ns), mark]) + "\n"
            staged.append(atomic_write_text(stage / f"workerlog.{rank}", text))
        out = []
        for path in staged:  # every log written: move them in
            os.replace(path, folder / path.name)
            out.append(folder / path.name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    for path in existing:
        if path not in out:
            path.unlink()  # an earlier export's rank this case does not have
    return out


def _mixed_exports(log_dir: Path, logs: list[tuple[str, int, Path]]) -> list[str]:
    """A note when the logs come from different export-paddle runs (their marks name different
    cases) or some are exported and some not: their jobs are two runs read as one."""
    cases = {path: export_case_of(path) for _, _, path in logs}
    named = {c for c in cases.values() if c is not None}
    if len(named) < 2 and (not named or None not in cases.values()):
        return []
    shown = ", ".join(f"{path.name}: {case or 'not exported'}" for path, case in list(cases.items())[:8])
    return [f"{log_dir}: these worker logs come from different runs ({shown}); the import reads them as one run"]


def export_case_of(path: Path) -> str | None:
    """The case id an exported worker log names in its :data:`EXPORT_MARK` line, or ``None``
    for a log that export-paddle did not write."""
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - 1024))
        last = f.read().decode("utf-8", errors="replace").rstrip("\n").rsplit("\n", 1)[-1]
    if not last.startswith(EXPORT_MARK):
        return None
    return last[len(EXPORT_MARK):].removeprefix(" from case ").strip()
