"""Render a whole report folder from a results document, all or nothing.

Layout of ``out_dir``::

    index.html              the review page
    results.json            the results document (unless write_results=False)
    traces/<case>.json      Chrome-trace JSON per case (Perfetto, chrome://tracing)
    hta/<case>/rank<N>.json per-rank traces for Holistic Trace Analysis

Every file is first rendered into a hidden staging folder inside ``out_dir``;
only when all of them rendered are they moved into place (``os.replace``,
atomic per file), so a malformed case or a full disk never leaves a half
report, and an earlier report stays as it was.

A staging folder is named ``.render-<host>-<pid>-<random>`` after the render
that owns it. One left behind by a render that was killed (SIGKILL, a crash,
a power cut) is removed by the next :func:`write_report` into the same folder:
one of this host whose process is gone, or that this process no longer
renders into; one of another host, or named before the owner was recorded
(``.render-<random>``), once nothing in it changed for a day. A live render's
staging folder is never touched. SIGTERM while rendering (where its handler is
the default) removes the staging folder, then terminates; while publishing,
like Ctrl-C, it is held until the report is whole (a signal the process
ignores stays ignored).

Renders into one folder may run at the same time (two ``report`` commands,
two pytest sessions with the same ``--report-dir``): each renders into its own
staging folder, and publishing is serialized by a lock on the file
``.publish.lock`` in the report folder (:mod:`filelock`), so one render's
files never mix with another's. A render that finds the lock taken says so
through ``progress`` and waits.

Publishing moves the files in dependency order: ``traces/``, ``hta/``, then
``results.json``, then ``index.html`` (the page links the traces), and only
then removes the trace and HTA files the new page does not link. A render
killed outright part-way leaves every file whole, the previous page in place
until ``index.html`` moved, and unlinked old traces until the next render.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness._gcpause import gc_paused
from harness.errors import ConfigError, InputFormatError
from harness.report.atomic import atomic_write_bytes, disk_full_error, ensure_writable_dir, first_missing, remove_empty_tree
from harness.report.jsontext import dumps_document
from harness.report.output import ReportSizeWarning, TraceOptions, hta_size_estimate, size_warning, trace_size_estimate
from harness.report.staging import (  # noqa: F401 - _STAGE_NAME, _host_tag: the staging folders' names, read by tests
    _STAGE_NAME,
    STALE_UNOWNED_AFTER_S,
    _host_tag,
    _live_stages,
    _new_stage,
    _remove_stale_stages,
    _stages_lock,
)

__all__ = ["ReportFiles", "case_filename", "check_report_folder", "write_report"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]+")
#: The lock file that serializes publishing into a report folder.
PUBLISH_LOCK_NAME = ".publish.lock"
#: Top-level names of a report in the order they are published: what a file links
#: is in place before the file (the page links the traces), the page last.
_PUBLISH_ORDER = ("traces", "hta", "results.json", "index.html")
_publish_locks: dict[str, Any] = {}  # lock file path -> this process's FileLock for it
_publish_locks_guard = threading.Lock()


def case_filename(case_id: str, taken: set[str] | None = None) -> str:
    """A file-system-safe stem for a case id (``::`` -> ``__``, other unsafe runs -> ``_``),
    made unique against ``taken`` with ``-2``, ``-3``... (``taken`` is updated)."""
    stem = _UNSAFE.sub("_", case_id.replace("::", "__")).strip("_.")[:180] or "case"
    taken = taken if taken is not None else set()
    name, n = stem, 2
    while name in taken:
        name = f"{stem}-{n}"
        n += 1
    taken.add(name)
    return name


@dataclass
class ReportFiles:
    """What :func:`write_report` wrote (paths inside ``out_dir``)."""

    index: Path
    results: Path | None
    traces: dict[str, Path] = field(default_factory=dict)
    hta: dict[str, Path] = field(default_factory=dict)
    #: the run's id in the folder's publish marker (:mod:`harness.report.concurrent`)
    token: str = ""
    #: where this render replaced a report another run published after this run started: a sentence saying so
    replaced: str | None = None

    def still_ours(self) -> str | None:
        """A sentence when the folder no longer holds this report (another run published over it) or
        another run announced there is still running; ``None`` otherwise
        (:func:`harness.report.concurrent.still_ours`)."""
        from harness.report.concurrent import still_ours

        return still_ours(self.index.parent, self.token) if self.token else None


class _Terminated(BaseException):
    """SIGTERM arrived while a report was rendered; unwinds so the staging folder is removed."""


@contextlib.contextmanager
def _terminate_after_cleanup() -> Iterator[None]:
    """Make SIGTERM raise :class:`_Terminated` in the block, so ``finally`` clauses
    (the staging folder's removal) run; then terminate as SIGTERM would have.
    Only in the main thread, and only where SIGTERM's handler is the default
    (a handler someone installed keeps deciding what SIGTERM does)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise _Terminated

    try:
        signal.signal(signal.SIGTERM, terminate)
    except (ValueError, OSError):  # not allowed here: SIGTERM stays fatal, the next render cleans up
        yield
        return
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)  # terminates here, with SIGTERM's status
        raise SystemExit(128 + signal.SIGTERM) from None  # pragma: no cover - SIGTERM blocked in this thread
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[list[int]]:
    """Hold SIGINT/SIGTERM for the duration of the block (main thread only); yields
    the list of held signals, which the caller acts on once its work is whole and
    its staging folder removed (SIGINT: :class:`ReportInterrupted`; SIGTERM:
    re-sent). The block must be short: it is the few renames that publish a report.
    A signal the process ignores (``SIG_IGN``, e.g. SIGINT of a command started
    with ``&`` in a non-interactive shell) is left ignored, not held."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(sig) is signal.SIG_IGN:  # ignored by whoever started us: it must not stop the render
            continue
        try:
            previous[sig] = signal.signal(sig, lambda signum, frame: held.append(signum))
        except (ValueError, OSError):  # not allowed here: run undeferred
            pass
    try:
        yield held
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class ReportInterrupted(KeyboardInterrupt):
    """Ctrl-C arrived while a finished report was being moved into place; the
    move was completed first, so the folder holds the new report whole.

    Attributes:
        files: what was written.
    """

    def __init__(self, files: ReportFiles) -> None:
        super().__init__("interrupted after the report was written")
        self.files = files


def _prune(out_dir: Path, keep: set[Path]) -> None:
    """Remove files under ``traces/`` and ``hta/`` that are not in ``keep``, and empty folders."""
    for sub in ("traces", "hta"):
        root = out_dir / sub
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*"), reverse=True):
            if path.is_file() and path not in keep and path.name.endswith((".json", ".json.gz")):
                path.unlink(missing_ok=True)
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()


def _publish_order(stage: Path) -> list[Path]:
    """The files of ``stage`` in the order they are published (see :data:`_PUBLISH_ORDER`);
    a name outside it goes before ``results.json``."""
    def rank(path: Path) -> tuple[int, str]:
        top = path.relative_to(stage).parts[0]
        return (_PUBLISH_ORDER.index(top) if top in _PUBLISH_ORDER else _PUBLISH_ORDER.index("results.json") - 1, str(path))

    return sorted((p for p in stage.rglob("*") if p.is_file()), key=rank)


@contextlib.contextmanager
def _publish_lock(out_dir: Path, progress: Callable[[str], None] | None) -> Iterator[None]:
    """Hold the lock that serializes publishing into ``out_dir`` (the file
    :data:`PUBLISH_LOCK_NAME` in it) for the block; says so through ``progress``
    when another render holds it, then waits. Reentrant in one thread (a render
    started from within another's publishing); other threads and processes wait.
    The lock goes with its process: a render killed while holding it holds it no more."""
    from filelock import FileLock, Timeout

    path = str(out_dir.resolve() / PUBLISH_LOCK_NAME)
    with _publish_locks_guard:
        lock = _publish_locks.get(path)
        if lock is None:
            lock = _publish_locks[path] = FileLock(path)  # thread-local holds: threads exclude each other
    try:
        lock.acquire(timeout=0)
    except Timeout:
        if progress:
            progress(f"waiting: another render is publishing into {out_dir} (lock {path})")
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


_OUR_RESULTS = re.compile(rb'^\s*\{\s*"schema"\s*:\s*"pipeline-harness/results"')


def check_report_folder(out_dir: Path) -> None:
    """Refuse a folder that holds another tool's ``results.json``, ``index.html``,
    ``traces/`` or ``hta/``: rendering replaces the first two and prunes the others.
    A folder is a report folder when it has none of them, a pipeline-harness
    ``results.json`` or the publishing lock (an earlier render got that far).

    Raises:
        ConfigError: names the folder and what in it is not a report's.
    """
    if not out_dir.is_dir() or (out_dir / PUBLISH_LOCK_NAME).exists():
        return
    results = out_dir / "results.json"
    if results.is_file():
        with open(results, "rb") as f:
            if _OUR_RESULTS.match(f.read(512)):
                return
        what = "its results.json is not a pipeline-harness results file"
    else:
        present = [name for name in ("index.html", "traces", "hta") if (out_dir / name).exists()]
        if not present:
            return
        what = f"it holds {', '.join(present)} but no pipeline-harness results.json"
    raise ConfigError(
        f"{out_dir} is not a pipeline-harness report folder ({what}); writing a report there would replace or "
        "prune those files: choose another folder (--out / --report-dir)"
    )


def _say_size(say: Callable[[str], None] | None, what: str, estimate: int, opts: TraceOptions, shrink: list[str]) -> None:
    """Say (or warn) that an output will be large, before it is written (see :func:`write_report`)."""
    _say_or_warn(say, size_warning(what, estimate, opts.gzip, shrink, opts.warn_bytes), ReportSizeWarning)


def _say_trace_steps(say: Callable[[str], None] | None, opts: TraceOptions, recorded: dict[str, int]) -> None:
    """Say (or warn) once which cases recorded fewer steps than ``--trace-steps`` asks to trace
    (:func:`harness.report.output.trace_steps_note`)."""
    from harness.report.output import TraceStepsWarning, trace_steps_note

    _say_or_warn(say, trace_steps_note(opts.steps, recorded), TraceStepsWarning)


def _say_or_warn(say: Callable[[str], None] | None, message: str | None, category: type[Warning]) -> None:
    """``message`` as a ``warning:`` line through ``say``, or as a Python warning of ``category`` from
    :func:`write_report`'s caller when there is no ``say``; nothing when ``message`` is ``None``."""
    if message is None:
        return
    if say is not None:
        say(f"warning: {message}")
    else:
        warnings.warn(category(message), stacklevel=4)


def _check_destinations(stage: Path, out_dir: Path) -> None:
    """Check every staged file can be moved to its place in ``out_dir``: no folder on its way there
    is a file, and it would not replace a folder.

    Raises:
        ConfigError: names the path in the way and what to do; nothing has been moved yet.
    """
    folders: set[Path] = set()
    for src in _publish_order(stage):
        dst = out_dir / src.relative_to(stage)
        if dst.is_dir() and not dst.is_symlink():
            raise ConfigError(f"cannot publish the report into {out_dir}: {dst} is a folder where the report writes a file; "
                              "remove or rename it (nothing of this run was written)")
        for parent in dst.relative_to(out_dir).parents:
            folder = out_dir / parent
            if folder in folders or folder == out_dir:
                continue
            if folder.exists() and not folder.is_dir():
                raise ConfigError(f"cannot publish the report into {out_dir}: {folder} is a file where the report keeps a "
                                  "folder; remove or rename it (nothing of this run was written)")
            folders.add(folder)


def _full(exc: OSError, out_dir: Path, stage: Path | None, writing: Path | None, needed: int | None) -> Exception | None:
    """A full disk (or the file-size limit) while rendering into ``stage``: the one error that names the report
    folder, the file as it would be named there, and the bytes it needed where known
    (:func:`~harness.report.atomic.disk_full_error`); ``None`` for any other error. ``writing`` and ``needed``:
    the file being written (relative to the report folder) and its size, where the writer did not note them."""
    shown: Path | None = None
    if exc.filename:
        shown = Path(exc.filename)
        if stage is not None and shown.is_relative_to(stage):
            shown = out_dir / shown.relative_to(stage)
    elif writing is not None:
        shown = out_dir / writing
    known = getattr(exc, "needed_bytes", None)
    if known is None and writing is not None and shown == out_dir / writing:
        known = needed
    return disk_full_error(exc, out_dir, shown, known,
                           kept=f"nothing of this run was published, and the report already in {out_dir} is unchanged")


# The render builds millions of short-lived, acyclic objects (lists, strings) while the results
# document's millions of containers are alive: the cyclic collector would traverse them over and over
# (about 5 s of 26 at 1 M jobs).
@gc_paused
def write_report(
    out_dir: Path,
    doc: dict[str, Any],
    *,
    traces: bool = True,
    hta: bool = True,
    write_results: bool = True,
    title: str = "Pipeline schedules",
    progress: Callable[[str], None] | None = None,
    source: str = "results",
    prune: bool = True,
    notice: Callable[[str], None] | None = None,
    trace_options: TraceOptions | None = None,
    left_out: list[dict[str, Any]] | None = None,
    write_results_if_left_out: bool = True,
    run_token: str | None = None,
    run_started: float | None = None,
) -> ReportFiles:
    """Write traces, HTA traces, ``results.json`` and ``index.html`` for ``doc`` into ``out_dir``.

    Args:
        out_dir: the report folder (created).
        doc: a validated results document.
        traces: write ``traces/<case>.json``.
        hta: write ``hta/<case>/rank<N>.json``.
        write_results: write ``results.json`` too.
        title: the page title.
        progress: called with a short message per rendered case (the CLI shows it),
            and with ``notice``'s messages when ``notice`` is not given.
        notice: called with the rare messages a user should see even without
            progress: waiting for another render's lock, removing a killed
            render's staging folder (pytest shows these).
        source: names the input in error messages.
        prune: once the new report is in place, delete trace and HTA files in
            ``traces/`` and ``hta/`` that it does not link (left by earlier runs).
        trace_options: gzip, traced steps, flow events and the size-warning threshold
            (:class:`harness.report.output.TraceOptions`; default: plain JSON, every step,
            flows, warn past 100 MB). An output estimated past the threshold is said
            through ``notice`` (else ``progress``, else a :class:`~harness.report.output.ReportSizeWarning`)
            before it is written, with its estimate and the options that shrink it.

        left_out: where given, a damaged case is left out of the report and appended here
            (:func:`harness.report.results.left_out_entry`, plus ``message``: the error it would
            have raised) instead of failing the whole report; cases already in the list (left
            out when the file was read) count too. The page and ``results.json`` name them in
            ``session.errored_cases``.
        write_results_if_left_out: with cases left out, write ``results.json`` still (it then
            lacks them); ``False`` keeps a results file already in ``out_dir`` as it is (re-rendering
            a damaged file in its own folder must not replace it with fewer cases).
        run_token, run_started: the run this render publishes for (its id and ``time.time()`` at its
            start; default: a new id, and now): the folder's publish marker names it, and publishing
            over a report another run published after ``run_started`` is said in
            :attr:`ReportFiles.replaced` (:mod:`harness.report.concurrent`).

    Raises:
        ConfigError: ``out_dir`` is not writable, or holds another tool's
            ``results.json``, ``index.html``, ``traces/`` or ``hta/``.
        InputFormatError: a case lacks fields the reports need, or has one of a
            wrong type (names the case and the field); nothing is written then,
            and a report folder created for this call is removed again. With
            ``left_out``, only when every case is damaged. Also a ``session``
            field of a wrong type (:func:`harness.report.session_fields.session_problem`),
            whatever ``left_out``.
        DiskFullError: no room to write a file (a full device or quota, or the file-size limit):
            names the report folder, the file and the bytes it needed where known; nothing is
            published and the files already in place are unchanged.
        OSError: writing failed otherwise; files already in place are unchanged.
        ReportInterrupted: Ctrl-C arrived while the finished report was being
            moved into place; it was completed first (a ``KeyboardInterrupt``).

    Staging folders of earlier renders into ``out_dir`` that were killed are
    removed first (see module doc). SIGTERM terminates the process as usual,
    but only after the staging folder is removed and, while publishing, after
    the report is whole. Another render publishing into ``out_dir`` at the same
    time is waited for (``progress`` says so): the folder then holds the report
    of the render that published last, whole.
    """
    from harness.report.concurrent import new_token, record_publish
    from harness.report.fields import check_cases, float_view
    from harness.report.heap import trim_heap
    from harness.report.hta import write_hta_traces
    from harness.report.html import render_index
    from harness.report.jobtable import JobTable
    from harness.report.session_fields import session_problem
    from harness.report.trace import first_steps, write_trace

    opts = trace_options or TraceOptions()
    run_token = run_token or new_token()
    run_started = time.time() if run_started is None else run_started
    replaced: str | None = None

    trim_heap()  # a run's freed memory, fragmented, slows every allocation of the render (harness.report.heap)
    tables: list[JobTable | None] = []
    # wrong-typed fields: refuse (or leave the case out) before creating anything; each case's job columns, once
    problem = session_problem(doc.get("session"))
    if problem:  # the page reads the session: a damaged one is the whole report's, not one case's
        raise InputFormatError(f"{source}: {problem}; nothing written")
    check_cases(doc, source, tables, left_out)
    if left_out:
        if not doc["cases"]:
            from harness.report.results import every_case_damaged

            raise every_case_damaged(left_out)
        session = dict(doc.get("session") or {})
        left_out.sort(key=lambda e: e["index"])  # file order, whichever check found each
        shown = [{k: e[k] for k in ("id", "label", "error")} for e in left_out]
        session["errored_cases"] = [*(session.get("errored_cases") or []), *shown]
        doc = {**doc, "session": session}
        write_results = write_results and write_results_if_left_out
    out_dir = Path(out_dir)
    check_report_folder(out_dir)  # another tool's files: refuse before replacing or pruning them
    created = first_missing(out_dir)
    out_dir = ensure_writable_dir(out_dir)
    notice = notice or progress
    _remove_stale_stages(out_dir, notice)
    with _terminate_after_cleanup():  # SIGTERM while rendering: remove the staging folder, then terminate
        try:
            stage = _new_stage(out_dir)
        except OSError as exc:
            full = _full(exc, out_dir, None, None, None)
            if full is None:
                raise
            raise full from None
        done = False
        writing: list[Any] = [None, None]  # the file being written (as it will be named in out_dir) and its size, where known
        try:
            trace_hrefs: dict[str, str] = {}
            hta_hrefs: dict[str, str] = {}
            taken: set[str] = set()
            cases = doc["cases"]
            recorded: dict[str, int] = {}  # per traced case, its recorded steps (for --trace-steps past them)
            for n, case in enumerate(cases, 1):
                cid = str(case.get("id", f"#{n}"))
                try:
                    stem = case_filename(cid, taken)
                    table = tables[n - 1] = tables[n - 1] or JobTable.from_case(case)  # None: an integer past 64 bits (raises)
                    if traces:
                        recorded[cid] = len(case["steps"])
                        traced = first_steps(case, opts.steps)
                        estimate = trace_size_estimate(traced, flows=opts.flows)
                        _say_size(notice, f"the trace of case {cid!r}", estimate, opts, opts.shrink_hints())
                        name = f"{stem}.json{'.gz' if opts.gzip else ''}"
                        writing[:] = [Path("traces") / name, None if opts.gzip else -estimate]  # negative: an estimate
                        write_trace(stage / "traces" / name, traced, flows=opts.flows, table=table if traced is case else None)
                        trace_hrefs[cid] = f"traces/{name}"
                    if hta:
                        hta_hints = ([] if opts.gzip else ["--trace-gzip (HTA reads .json.gz)"]) + [
                            "--no-hta (pipeline-harness report; write_report(..., hta=False) from Python)"]
                        _say_size(notice, f"the HTA rank files of case {cid!r}", hta_size_estimate(case), opts, hta_hints)
                        writing[:] = [Path("hta") / stem, None]
                        write_hta_traces(stage / "hta" / stem, case, compress=opts.gzip, table=table)
                        hta_hrefs[cid] = f"hta/{stem}/"
                except (KeyError, TypeError, ValueError, IndexError) as exc:
                    raise InputFormatError(f"{source}: case {cid!r}: cannot render its traces ({type(exc).__name__}: {exc})") from None
                if progress:
                    progress(f"[{n}/{len(cases)}] {cid}: {len(case['jobs']['kind'])} jobs")
            _say_trace_steps(notice, opts, recorded)
            try:
                cuts = {cid: (opts.steps, n) for cid, n in recorded.items() if opts.steps is not None and n > opts.steps}
                html = render_index(doc, trace_hrefs, title=title, hta_hrefs=hta_hrefs, tables=tables, trace_cuts=cuts)
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                raise InputFormatError(f"{source}: cannot render the HTML page ({type(exc).__name__}: {exc})") from None
            page = html.encode("utf-8")
            writing[:] = [Path("index.html"), len(page)]
            atomic_write_bytes(stage / "index.html", page)
            if write_results:
                data = dumps_document(doc, scan=float_view(doc))  # the checked job columns hold no float
                _say_size(notice, "results.json", len(data), opts, ["record fewer steps or smaller cases"])
                writing[:] = [Path("results.json"), len(data)]
                atomic_write_bytes(stage / "results.json", data)
            # Everything rendered: move into place, file by file (each move is atomic),
            # one render at a time (the lock; waiting for it can be interrupted), with
            # Ctrl-C and SIGTERM held back so the folder never mixes two runs. Traces
            # first and the page last, so the page never links a trace not there yet;
            # old traces are pruned only once the page in place no longer links them.
            _check_destinations(stage, out_dir)  # before anything moves: a folder in the way stops the run whole
            written: set[Path] = set()
            with _publish_lock(out_dir, notice), _interrupts_deferred() as held:
                for src in _publish_order(stage):
                    dst = out_dir / src.relative_to(stage)
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(src, dst)
                    written.add(dst)
                if prune:
                    _prune(out_dir, written)
                replaced = record_publish(out_dir, run_token, run_started)
            done = True
        except OSError as exc:  # a full disk or the file-size limit: one clear error (the staging folder goes below)
            full = _full(exc, out_dir, stage, *writing)
            if full is None:
                raise
            raise full from None
        finally:
            shutil.rmtree(stage, ignore_errors=True)
            with _stages_lock:
                _live_stages.discard(stage)
            if not done and created is not None:
                remove_empty_tree(created)
    files = ReportFiles(
        index=out_dir / "index.html",
        results=out_dir / "results.json" if write_results else None,
        traces={k: out_dir / v for k, v in trace_hrefs.items()},
        hta={k: out_dir / v for k, v in hta_hrefs.items()},
        token=run_token,
        replaced=replaced,
    )
    if signal.SIGTERM in held:  # held while publishing: the report is whole and the staging folder gone
        os.kill(os.getpid(), signal.SIGTERM)
    if signal.SIGINT in held:
        raise ReportInterrupted(files)
    return files
