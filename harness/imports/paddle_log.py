"""PaddlePaddle worker logs, line by line: the profiler's job lines, the log files of a run, and the
marks export-paddle leaves; see :mod:`harness.imports.paddle` for the import as a whole.

:func:`parse_worker_log` reads one ``workerlog.<device>`` file into :class:`PaddleJob` s (skipping
lines it cannot use, each with a warning naming file and line); :func:`find_worker_logs` finds a
run's logs in rank order; :func:`parse_job_type` maps a job type to a kind and chunk.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import InputFormatError

__all__ = [
    "EXPORT_MARK",
    "PaddleJob",
    "PaddleLogWarning",
    "drop_repeated_lines",
    "export_case_of",
    "find_worker_logs",
    "is_known_job_type",
    "parse_job_type",
    "parse_worker_log",
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
#: A ``micro_batch_id`` at or past this is a damaged line (Paddle's ids are ints; a run has far fewer micro-batches).
_MAX_MB = 2**31

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
            if holes is not None and (not 0 <= int(m.group("mb")) < _MAX_MB or _ms_to_ns(m.group("start")) <= 0
                                      or _ms_to_ns(m.group("end")) < _ms_to_ns(m.group("start"))
                                      or _ms_to_ns(m.group("end")) >= _MAX_TIME_NS):
                holes.append(lineno)  # skipped below, with its warning
            if int(m.group("mb")) < 0:  # Paddle's Job::SetMicroBatchId refuses negative ids: the line is corrupt
                problems.append(
                    f"{path}:{lineno}: job {m.group('type')} has micro_batch_id {m.group('mb')} (negative; "
                    "micro-batches count from 0), skipped"
                )
                continue
            if int(m.group("mb")) >= _MAX_MB:  # no run has that many micro-batches; past 64 bits the records cannot hold it
                problems.append(
                    f"{path}:{lineno}: job {m.group('type')} has micro_batch_id {m.group('mb')} (2**31 or more: not an id "
                    "a run gives), skipped"
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


def drop_repeated_lines(jobs: list[PaddleJob], path: Path, problems: list[str]) -> list[PaddleJob]:
    """``jobs`` without the lines that repeat an earlier line of the same log: the same type,
    ``micro_batch_id``, start and end (ns), wherever in the file the copy lies.

    Paddle's job profiler (PR #58313; ``StandaloneExecutor::Run`` in
    ``paddle/fluid/framework/new_executor/standalone_executor.cc``, under
    ``FLAGS_auto_parallel_profiler``) prints, after each step, one line per job of the step's
    job list (``for job_idx < jobs.size()``), with that job's interpreter run time, so every
    job of a step is printed once with its own start and end: two lines that agree on all four
    are one job printed twice (a log written twice through two handlers, a line pasted back
    in), never two jobs. Kept, the
    copy would be a second job of its step: it would start an extra step (a repeated
    (type, micro-batch) pair ends a step) and shift every later step's first job into the
    step before, or, appended at the end, make a one-job last step. So the first line is
    kept, each copy dropped with a note in ``problems`` naming ``path``, its line and the
    line it repeats. A line of the same type and micro-batch with other times is a job of
    its own (a wrong ``micro_batch_id``): it is kept, for the step split and the id check.

    Args:
        jobs: one log's jobs in file order (:func:`parse_worker_log`).
        path: the log, for the notes.
        problems: receives one note per dropped line.

    Returns:
        the jobs kept, in file order.
    """
    first: dict[tuple[str, int, int, int], int] = {}
    kept: list[PaddleJob] = []
    for j in jobs:
        key = (j.type, j.microbatch, j.start_ns, j.end_ns)
        if key in first:
            problems.append(
                f"{path}:{j.line}: repeats line {first[key]} (job {j.type}, micro_batch_id {j.microbatch}, the same start "
                "and end): Paddle prints each job once per step, so this is a copy of that line; dropped"
            )
            continue
        first[key] = j.line
        kept.append(j)
    return kept


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


#: Last line of every worker log :func:`write_paddle_logs` writes (the importer skips it; last, so the
#: profiler lines keep their line numbers): how a later export knows the logs in its folder are its own.
EXPORT_MARK = "# written by pipeline-harness export-paddle"


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
