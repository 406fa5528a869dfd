"""Text forms of schedules: PyTorch pipeline CSV here, PaddlePaddle job names in
:mod:`harness.schedule.paddle_jobs` (importable from here too).

**PyTorch pipeline CSV** (``torch.distributed.pipelining.schedules``,
``_PipelineScheduleRuntime._dump_csv`` / ``_load_csv``): one row per rank, one
action per cell in PyTorch's compact notation (``2F0``, ``3SEND_F1``), an empty
cell is an idle slot. Both the compute-only form and the form with
``SEND_F``/``RECV_F``/``SEND_B``/``RECV_B`` are read and written; writing then
reading gives back the same schedule (idle slots included).

How cells are read:

* ``F``, ``I``, ``W``, ``B`` and the four send/receive kinds keep their meaning;
  ``OPT`` (this harness's optimizer step) is accepted too.
* ``B`` is PyTorch's *full* backward. Some files in the wild write ``B``
  together with ``W`` for the split form (``B`` meaning backward-for-inputs, as
  in the zero-bubble paper). Rule: when the file holds a ``W`` for the same stage
  and micro-batch, that ``B`` is read as ``I``; otherwise it stays a full ``B``.
* ``UNSHARD``, ``RESHARD`` and ``REDUCE_GRAD`` (PyTorch's FSDP and gradient-reduction
  actions, no pipeline data, no micro-batch: ``0UNSHARD``) are kept as jobs of their
  stage (:data:`~harness.schedule.model.DATA_PARALLEL_KINDS`) and written back as read.
* A composite cell ``(0F3;5B1)OVERLAP_F_B`` (PyTorch's DualPipeV writes them) is
  read as its sub-actions in the written order, kept as one overlapped job
  group (:mod:`harness.plan.groups`: they run at the same time). Its jobs take
  consecutive steps, so a row's later steps no longer match its cell numbers;
  it is written back as one composite cell.
* Stage placement is taken from where the stages appear: every stage must
  appear on exactly one rank, and the stages must be ``0..S-1``.
* ``m`` is the largest micro-batch index plus one unless given.
* Chains (:mod:`harness.schedule.chains`; DualPipe's two directions) are read from which
  micro-batches each stage runs: when the stages run disjoint consecutive ranges, runs of
  consecutive stages with one range each, in stage order and covering every micro-batch,
  those runs are the chains (a file of ``DualPipe`` reads back with its two); disjoint ranges
  in any other form are refused (:func:`harness.schedule.chains.chains_in`).
"""

from __future__ import annotations

import csv
import io
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from harness.errors import InputFormatError, ScheduleError
from harness.schedule.model import Job, JobKind, Schedule, loop_placement, parse_job, v_placement  # noqa: F401 - the placements: importable from here as before
from harness.schedule.paddle_jobs import from_paddle_jobs, paddle_type, parse_paddle_type, to_paddle_jobs  # importable from here as before
from harness.schedule.validate import check_counts, check_order
from harness.text import safe_text

__all__ = [
    "dump_csv",
    "dumps_csv",
    "from_paddle_jobs",
    "load_csv",
    "load_schedule_file",
    "loads_csv",
    "paddle_type",
    "parse_paddle_type",
    "to_paddle_jobs",
]

#: PyTorch's composite action, ``(0F3;5B1)OVERLAP_F_B`` (``_Action.sub_actions``): its sub-actions, in order.
_OVERLAP = re.compile(r"^\s*\((.*)\)\s*OVERLAP_F_B\s*$")


# --- PyTorch CSV ------------------------------------------------------------------
def dumps_csv(schedule: Schedule) -> str:
    """The schedule as PyTorch pipeline CSV text: one row per rank, ``""`` for idle slots.

    Trailing idle slots are not written (PyTorch's ``_dump_csv`` writes lists as they are).
    """
    from harness.schedule.groups import groups_of

    first_of = {g[0]: g for g in groups_of(schedule)}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for jobs in schedule.ranks:
        row: list[str] = []
        i = 0
        while i < len(jobs):
            job = jobs[i]
            group = first_of.get(job) if job is not None else None
            if group is not None and tuple(jobs[i : i + len(group)]) == group:  # written as PyTorch's composite cell
                row.append("(" + ";".join(map(str, group)) + ")OVERLAP_F_B")
                i += len(group)
                continue
            row.append("" if job is None else str(job))
            i += 1
        while row and not row[-1]:
            row.pop()
        writer.writerow(row)
    return out.getvalue()


def dump_csv(schedule: Schedule, path: str | Path) -> None:
    """Write ``schedule`` to ``path`` as PyTorch pipeline CSV (see :func:`dumps_csv`)."""
    Path(path).write_text(dumps_csv(schedule), encoding="utf-8")


#: The longest cell a schedule file may hold (characters): the longest action in range
#: (``12345678SEND_F12345678``) or PyTorch composite cell is far shorter.
MAX_CELL_CHARS = 1024
#: Bytes of schedule file allowed per job of the job limit: a cell of the longest
#: action in range, padded, and its separator.
BYTES_PER_JOB = 32
_CHUNK_CHARS = 1 << 16
#: A field at a cell's start: quoted (``""`` inside is one quote; the closing quote ends
#: the cell, so text after it is refused as a stray quote, where :mod:`csv` would guess) or plain.
_FIELD = re.compile(r'"((?:[^"]|"")*)"(?=[,\r\n]|$)|([^,"\r\n]*)')


def max_schedule_file_bytes() -> int:
    """The largest schedule file read, in bytes: :data:`BYTES_PER_JOB` per job of
    :data:`~harness.schedule.registry.MAX_JOBS` (640 MB for the default 20 M jobs)."""
    from harness.schedule.registry import MAX_JOBS

    return MAX_JOBS * BYTES_PER_JOB


_LINE_BREAK_BYTES = re.compile(rb"\r\n|\r|\n")


def _first_bad_byte(path: object) -> tuple[int, int, int] | None:
    """Where the file at ``path`` first holds bytes that are not UTF-8: ``(byte offset, row from 0,
    the byte)``, read in 1 MiB chunks; ``None`` when ``path`` is not a readable file's name or all
    of it decodes (a ``\\r\\n`` split across two chunks counts as two line breaks: a row off, at most)."""
    if not isinstance(path, str | bytes | os.PathLike):
        return None
    carry, offset, row = b"", 0, 0
    try:
        with open(path, "rb") as fh:
            while True:
                chunk = fh.read(1 << 20)
                data = carry + chunk
                if not data:
                    return None
                try:
                    data.decode("utf-8")
                    good, carry = len(data), b""
                except UnicodeDecodeError as exc:
                    if chunk and exc.reason == "unexpected end of data":  # a character split by the chunk's end
                        good, carry = exc.start, data[exc.start:]
                    else:
                        return offset + exc.start, row + len(_LINE_BREAK_BYTES.findall(data, 0, exc.start)), data[exc.start]
                row += len(_LINE_BREAK_BYTES.findall(data, 0, good))
                offset += good
                if not chunk:
                    return None
    except OSError:
        return None


def _cells(stream: io.TextIOBase, name: str) -> Iterable[tuple[int, int, list[str]]]:
    """``(row, first cell, texts)``: runs of consecutive cells of one row of CSV text read
    from ``stream`` in chunks, rows and cells from 0 (the :mod:`csv` module's default
    dialect: ``,`` between cells, ``"`` quotes, any line ending; a blank line is a row of
    one empty cell). Unlike :func:`csv.reader`, which holds a whole row, memory stays
    within a chunk, so a file's first error is found however long its rows are. Text
    without quotes is split with ``str.split``; a quote's cells are read one by one.

    Raises:
        InputFormatError: a cell of more than :data:`MAX_CELL_CHARS` characters, a quote that
            does not close, or more than :func:`max_schedule_file_bytes` characters; names
            ``name``, the row and the cell.
    """
    limit = max_schedule_file_bytes()
    buf, pos, total, eof = "", 0, 0, False
    row = col = 0
    pending = False  # a cell follows (after a ","), even at the end of the text
    while True:
        if not eof and len(buf) - pos <= MAX_CELL_CHARS + 2:  # room for a whole cell and its terminator
            try:
                chunk = stream.read(_CHUNK_CHARS)
            except UnicodeDecodeError as exc:
                at = _first_bad_byte(getattr(stream, "name", None))
                if at is None:  # not a file by name (a stream of ours): the row the chunk began in
                    raise InputFormatError(f"{name}: cannot read schedule file: {exc} (in row {row + 1} or the next; UTF-8 text expected)") from None
                offset, bad_row, byte = at
                utf16 = " (it starts as UTF-16 text does: save it as CSV UTF-8)" if offset == 0 and byte in (0xFE, 0xFF) else ""
                raise InputFormatError(f"{name}: row {bad_row + 1} (rank {bad_row}): byte 0x{byte:02x} at offset {offset:,} is not "
                                       f"UTF-8 text; a schedule file is UTF-8 text (saved as CSV, not a spreadsheet){utf16}") from None
            if chunk:
                total += len(chunk)
                if total > limit:
                    raise InputFormatError(
                        f"{name}: more than {limit:,} bytes, the most a schedule file is read for "
                        f"({BYTES_PER_JOB} per job of the {limit // BYTES_PER_JOB:,}-job limit); stopped at row {row + 1}"
                    )
                buf, pos = buf[pos:] + chunk, 0
                continue
            eof = True
        if pos >= len(buf) and not pending:
            return
        if buf.find('"', pos) < 0:  # no quote ahead: whole cells up to the last separator, split in C
            if eof:
                cut = len(buf)
            else:  # (a "\r" ending the buffer may be half of "\r\n": it waits for the next chunk)
                cut = max(buf.rfind(",", pos), buf.rfind("\n", pos), buf.rfind("\r", pos, len(buf) - 1)) + 1
                if cut <= pos:
                    raise InputFormatError(
                        f"{name}: row {row + 1} (rank {row}), cell {col + 1}: more than {MAX_CELL_CHARS:,} characters "
                        f"(starts {buf[pos:pos + 20]!r}); a cell holds one action such as '2F0'"
                    )
            region, pos = buf[pos:cut], cut
            pieces = _LINE_END.split(region)
            last = pieces.pop()  # after the last line end: the row goes on (or ends with the text)
            for piece in pieces:
                texts = piece.split(",")
                _check_cell_lengths(texts, name, row, col)
                yield row, col, texts
                row, col = row + 1, 0
            if eof:  # the text's last row, unless it ended with a line end (an empty region: the cell after a ",")
                if last or not pieces:
                    texts = last.split(",")
                    _check_cell_lengths(texts, name, row, col)
                    yield row, col, texts
                return
            pending = bool(last)  # the region ends with "," inside this row
            if pending:
                texts = last.split(",")[:-1]  # the last "" is the next cell's start
                _check_cell_lengths(texts, name, row, col)
                yield row, col, texts
                col += len(texts)
            continue
        match = _FIELD.match(buf, pos)
        assert match is not None  # the plain alternative matches the empty string
        end = match.end()
        if end - pos > MAX_CELL_CHARS:
            raise InputFormatError(
                f"{name}: row {row + 1} (rank {row}), cell {col + 1}: more than {MAX_CELL_CHARS:,} characters "
                f"(starts {buf[pos:pos + 20]!r}); a cell holds one action such as '2F0'"
            )
        quoted, plain = match.groups()
        text = plain if plain is not None else quoted.replace('""', '"')
        nxt = buf[end:end + 1]
        if nxt == '"':  # an opening quote that does not close within a cell's length, or one inside a cell
            what = "a quote that does not close" if end == pos else "a stray quote"
            raise InputFormatError(
                f"{name}: row {row + 1} (rank {row}), cell {col + 1}: {what} (within {MAX_CELL_CHARS:,} characters); "
                "a cell holds one action such as '2F0'"
            )
        yield row, col, [text]
        pending = nxt == ","
        if pending:
            col += 1
            pos = end + 1
        else:
            row, col = row + 1, 0
            pos = end + (2 if buf[end:end + 2] == "\r\n" else 1 if nxt else 0)


_LINE_END = re.compile(r"\r\n|\r|\n")


def _check_cell_lengths(texts: list[str], name: str, row: int, col: int) -> None:
    """Refuse a cell of more than :data:`MAX_CELL_CHARS` among ``texts`` (cells ``col``... of ``row``)."""
    if texts and max(map(len, texts)) > MAX_CELL_CHARS:
        k = next(k for k, t in enumerate(texts) if len(t) > MAX_CELL_CHARS)
        raise InputFormatError(
            f"{name}: row {row + 1} (rank {row}), cell {col + k + 1}: more than {MAX_CELL_CHARS:,} characters "
            f"(starts {texts[k][:20]!r}); a cell holds one action such as '2F0'"
        )


def _read_cell(cell: str, name: str, r: int, c: int, jobs: list[Job | None], where: dict[int, tuple[int, int]],
               seen: set[Job], parsed: list[list[Job | None]], max_jobs: int) -> None:
    """Append the job(s) of one non-idle cell (row ``r``, cell ``c``) to ``jobs``, the row's list;
    ``where`` maps each stage to its first (row, cell), ``seen`` holds the jobs read so far.

    Raises:
        ScheduleError: not an action, a stage already on another rank, or a job listed twice.
        InputFormatError: more jobs than ``max_jobs``, the job limit.
    """
    overlap = _OVERLAP.match(cell) if "(" in cell else None
    for text in overlap.group(1).split(";") if overlap else (cell,):
        try:
            job = parse_job(text.strip() if overlap else text)
        except ScheduleError as exc:
            inside = f"in {cell.strip()!r}: " if overlap else ""
            raise ScheduleError(f"{name}: row {r + 1} (rank {r}), cell {c + 1} (step {len(jobs)}): {inside}{exc}", exc.jobs) from None
        first = where.get(job.stage)
        if first is None:
            where[job.stage] = (r, c)
        elif first[0] != r:
            raise ScheduleError(
                f"{name}: row {r + 1} (rank {r}), cell {c + 1} (step {len(jobs)}): {job} puts stage {job.stage} on rank {r}, "
                f"but row {first[0] + 1} cell {first[1] + 1} already put it on rank {first[0]}; "
                "each stage must live on exactly one rank",
                (str(job),),
            )
        if job in seen:  # stopped here, so a repeated cell costs nothing more (memory: the valid jobs)
            r0, s0 = next((r0, s0) for r0, row in enumerate(parsed) for s0, j in enumerate(row) if j == job)
            raise ScheduleError(
                f"{name}: row {r + 1} (rank {r}), cell {c + 1} (step {len(jobs)}): {job} is listed twice "
                f"(first at row {r0 + 1}, step {s0})",
                (str(job),),
            )
        seen.add(job)
        if len(seen) > max_jobs:
            raise InputFormatError(
                f"{name}: row {r + 1} (rank {r}), cell {c + 1}: more than the {max_jobs:,} jobs this harness builds "
                "(raise harness.schedule.registry.MAX_JOBS if the machine has the memory)"
            )
        jobs.append(job)


def loads_csv(text: str, name: str = "<csv>", num_microbatches: int | None = None) -> Schedule:
    """Read PyTorch pipeline CSV text into a :class:`Schedule` (rules in the module doc).

    Args:
        text: the CSV content.
        name: the schedule's name, used in messages (the file name for files).
        num_microbatches: ``m``; inferred (largest micro-batch + 1) when ``None``.

    Raises:
        ScheduleError: a cell is not an action, a stage appears on two ranks,
            a stage is missing, or jobs are missing or listed twice; the message
            names the file (``name``), the row (rank) and the cell (step).
        InputFormatError: the text has no rows, a cell is longer than
            :data:`MAX_CELL_CHARS`, a quote does not close, or the text holds more
            jobs or cells than the job limit allows (names the row and cell).
    """
    return _read_csv(io.StringIO(text), name, num_microbatches)


def _read_csv(stream: io.TextIOBase, name: str, num_microbatches: int | None) -> Schedule:
    """:func:`loads_csv` on a stream: cell by cell, refusing a duplicate or the job limit's
    overrun at the cell that causes it, so memory follows the valid jobs, not the file."""
    from harness.schedule.registry import MAX_JOBS

    parsed: list[list[Job | None]] = []
    where: dict[int, tuple[int, int]] = {}  # stage -> first (row, cell) seen
    seen: set[Job] = set()  # jobs as written
    n_cells = 0
    max_cells = 2 * MAX_JOBS
    jobs: list[Job | None] = []
    blank: list[bool] = []  # per row: only whitespace (a blank line), as opposed to idle or ignored cells
    overlapped: list[tuple[int, int, int]] = []  # (row, first position, jobs) of each OVERLAP_F_B cell
    for r, c0, texts in _cells(stream, name):
        if r == len(parsed):
            jobs = []
            parsed.append(jobs)
            blank.append(True)
        n_cells += len(texts)
        if n_cells > max_cells:
            raise InputFormatError(
                f"{name}: row {r + 1} (rank {r}), cell {c0 + len(texts) - (n_cells - max_cells) + 1}: more than {max_cells:,} "
                f"cells (idle ones included), twice the {MAX_JOBS:,} jobs this harness builds"
            )
        for c, cell in enumerate(texts, c0):
            if not cell or cell.isspace():
                jobs.append(None)
                continue
            blank[r] = False
            overlap = _OVERLAP.match(cell) if "(" in cell else None
            if overlap:
                overlapped.append((r, len(jobs), overlap.group(1).count(";") + 1))
            _read_cell(cell, name, r, c, jobs, where, seen, parsed, MAX_JOBS)
    seen.clear()
    while parsed and blank[len(parsed) - 1]:
        parsed.pop()  # trailing blank lines
    rows = parsed
    if not rows:
        raise InputFormatError(f"{name}: empty schedule file (expected one row per rank)")
    if not where:
        raise InputFormatError(f"{name}: no actions in the file")
    n_stages = max(where) + 1
    n_absent = n_stages - len(where)
    if n_absent:
        absent = []  # the first few, found without walking a huge range
        for k in range(n_stages):
            if k not in where:
                absent.append(str(k))
                if len(absent) == 12:
                    break
        more = f" (and {n_absent - len(absent)} more)" if n_absent > len(absent) else ""
        raise ScheduleError(
            f"{name}: stage(s) {', '.join(absent)}{more} appear on no row, but stage {n_stages - 1} does; stages must be numbered 0..S-1"
        )
    placement = tuple(where[k][0] for k in range(n_stages))
    empty = sorted(set(range(len(rows))) - set(placement))
    if empty:
        r = empty[0]
        raise ScheduleError(
            f"{name}: row {r + 1} (rank {r}) has no jobs; every row is a rank that holds at least one stage "
            "(a blank line inside the file?)"
        )
    rewritten = _read_b_as_i(parsed)
    m = num_microbatches
    if m is None:
        m = 1 + max((j.microbatch for row in parsed for j in row if j is not None and j.microbatch is not None), default=0)
        _check_size(name, parsed, m, n_stages)
    params: dict[str, object] = {"source": name}
    if overlapped:  # after the B-as-I rule, so the groups name the jobs as read
        params["overlap"] = tuple(tuple(parsed[r][i : i + n]) for r, i, n in overlapped)
    from harness.schedule.chains import CHAINS_PARAM, chains_in

    chains = chains_in(name, n_stages, m, parsed)  # DualPipe's two directions (harness.schedule.chains)
    if chains:
        params[CHAINS_PARAM] = chains
    sched = Schedule(name, m, placement, tuple(tuple(r) for r in parsed), params)
    try:  # the messages name the schedule, i.e. the file
        check_counts(sched)
        check_order(sched)
    except ScheduleError as exc:
        if not rewritten:
            raise
        was = {b.replace("B", "I", 1): b for b in rewritten}
        shown = [was[j] for j in exc.jobs if j in was] or rewritten[:1]  # the jobs in the order the message names them
        raise ScheduleError(
            f"{exc}\n(this file writes backward-for-inputs as B: a B whose stage and micro-batch also have a W "
            f"is read as I, so the file's {shown[0]} is {shown[0].replace('B', 'I', 1)} above)",
            exc.jobs,
        ) from None
    return sched


def _check_size(name: str, parsed: list[list[Job | None]], m: int, n_stages: int) -> None:
    """Refuse an inferred ``m`` whose schedule would have more than
    :data:`~harness.schedule.registry.MAX_JOBS` jobs: a micro-batch id far too large for
    the file, named with its row and step (rather than counting billions of missing jobs)."""
    from harness.schedule.registry import MAX_JOBS

    if 2 * n_stages * m <= MAX_JOBS:
        return
    r, step, job = max(((r, k, j) for r, row in enumerate(parsed) for k, j in enumerate(row) if j is not None and j.microbatch is not None),
                       key=lambda t: t[2].microbatch or 0)
    raise ScheduleError(
        f"{name}: row {r + 1} (rank {r}), step {step}: {job} names micro-batch {job.microbatch}, so the file would need "
        f"{m:,} micro-batches ({2 * n_stages * m:,} jobs, more than the {MAX_JOBS:,} this harness builds); is the id a typo?",
        (str(job),),
    )


def _read_b_as_i(rows: list[list[Job | None]]) -> list[str]:
    """Apply the ``B``-with-``W`` rule in place: a ``B`` whose ``W`` is listed becomes ``I``.
    Returns the text of the rewritten jobs as the file has them (``"0B3"``)."""
    has_w = {(j.stage, j.microbatch) for row in rows for j in row if j is not None and j.kind is JobKind.W}
    done: list[str] = []
    if not has_w:
        return done
    for row in rows:
        for c, j in enumerate(row):
            if j is not None and j.kind is JobKind.B and (j.stage, j.microbatch) in has_w:
                row[c] = Job(j.stage, JobKind.I, j.microbatch)
                done.append(str(j))
    return done


def _file_kind(mode: int) -> str:
    """What a non-regular file is, in words, from its ``st_mode``."""
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def load_csv(path: str | Path, num_microbatches: int | None = None) -> Schedule:
    """Read a PyTorch pipeline CSV file (see :func:`loads_csv`).

    Only a regular file is read (a link is followed first): a FIFO would block and a
    device (``/dev/zero``) never end. It is read in chunks, at most
    :func:`max_schedule_file_bytes` bytes (:data:`BYTES_PER_JOB` per job of the job
    limit), so memory follows the valid jobs read, not the file's size.

    Raises:
        InputFormatError: the file cannot be read, is not a regular file (names
            what it is, and the link's target), is larger than the cap (states it),
            is not UTF-8, is empty, or see :func:`loads_csv`.
        ScheduleError: see :func:`loads_csv`; messages start with the file path.
    """
    p = Path(path)
    limit = max_schedule_file_bytes()
    try:
        info = p.stat()  # follows links: the target is what would be read
        if not stat.S_ISREG(info.st_mode):
            target = f" (a link to {os.path.realpath(p)})" if p.is_symlink() else ""
            raise InputFormatError(
                f"{p}: is {_file_kind(info.st_mode)}{target}, not a schedule file; only regular files are read (a PyTorch pipeline .csv)"
            )
        if info.st_size > limit:
            raise InputFormatError(
                f"{p}: {info.st_size:,} bytes, more than the {limit:,} a schedule file may have "
                f"({BYTES_PER_JOB} bytes per job of the {limit // BYTES_PER_JOB:,}-job limit)"
            )
        with open(p, encoding="utf-8-sig", newline="") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # replaced between the check and the open
                raise InputFormatError(f"{p}: is not a regular file; only regular files are read")
            return _read_csv(fh, str(p), num_microbatches)
    except OSError as exc:
        raise InputFormatError(f"{p}: cannot read schedule file: {exc}") from None


def load_schedule_file(path: str | Path, num_microbatches: int | None = None) -> Schedule:
    """Load a schedule file; the format follows the suffix.

    ``.csv``: PyTorch pipeline CSV (:func:`load_csv`). The schedule's name is the
    file name. ``m`` is inferred from the file when ``num_microbatches`` is ``None``.

    Raises:
        InputFormatError: unknown suffix, unreadable or empty file, not a
            regular file, or over the size cap (see :func:`load_csv`).
        ScheduleError: a malformed cell, a stage on two ranks, missing or
            duplicate jobs (message names file, row and cell).
    """
    p = Path(path)
    if p.is_dir():
        raise InputFormatError(f"{p}: is a directory, not a schedule file (a PyTorch pipeline .csv)")
    if p.suffix.lower() != ".csv":
        raise InputFormatError(f"{p}: unknown schedule file type {p.suffix!r}; expected a PyTorch pipeline .csv")
    sched = load_csv(p, num_microbatches)
    name = safe_text(p.name, f"schedule file name (of {p.parent})")  # a name that is not UTF-8 decodes to surrogates
    # Keep what the reader found (OVERLAP_F_B groups, ...): dropping it made a dumped DualPipeV read back slower.
    return Schedule(name, sched.num_microbatches, sched.stage_to_rank, sched.ranks, {**sched.params, "source": str(p)})
