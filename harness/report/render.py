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
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import InputFormatError
from harness.report.atomic import atomic_write, atomic_write_json, ensure_writable_dir

__all__ = ["ReportFiles", "case_filename", "write_report"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]+")


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


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[list[int]]:
    """Hold SIGINT/SIGTERM for the duration of the block (main thread only); yields
    the list of held signals. A held SIGTERM is re-sent on exit; a held SIGINT is
    left to the caller (who raises :class:`ReportInterrupted` once its work is
    whole). The block must be short: it is the few renames that publish a report."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, lambda signum, frame: held.append(signum))
        except (ValueError, OSError):  # not allowed here: run undeferred
            pass
    try:
        yield held
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if signal.SIGTERM in held:
            os.kill(os.getpid(), signal.SIGTERM)


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
            if path.is_file() and path not in keep and path.suffix == ".json":
                path.unlink(missing_ok=True)
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()


def _first_missing(path: Path) -> Path | None:
    """The outermost folder of ``path`` (itself or an ancestor) that does not exist yet, or ``None``."""
    missing = None
    for p in (path, *path.parents):
        if p.exists():
            break
        missing = p
    return missing


def _remove_empty_tree(root: Path) -> None:
    """Remove ``root`` and the folders under it if none of them holds a file (a failed
    render leaves no empty report folder behind); anything else is left alone."""
    if not root.is_dir() or any(p.is_file() or p.is_symlink() for p in root.rglob("*")):
        return
    for p in sorted(root.rglob("*"), reverse=True):
        p.rmdir()
    root.rmdir()


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
) -> ReportFiles:
    """Write traces, HTA traces, ``results.json`` and ``index.html`` for ``doc`` into ``out_dir``.

    Args:
        out_dir: the report folder (created).
        doc: a validated results document.
        traces: write ``traces/<case>.json``.
        hta: write ``hta/<case>/rank<N>.json``.
        write_results: write ``results.json`` too.
        title: the page title.
        progress: called with a short message per rendered case (the CLI shows it).
        source: names the input in error messages.
        prune: once the new report is in place, delete trace and HTA files in
            ``traces/`` and ``hta/`` that it does not link (left by earlier runs).

    Raises:
        ConfigError: ``out_dir`` is not writable.
        InputFormatError: a case lacks fields the reports need, or has one of a
            wrong type (names the case and the field); nothing is written then,
            and a report folder created for this call is removed again.
        OSError: writing failed; files already in place are unchanged.
        ReportInterrupted: Ctrl-C arrived while the finished report was being
            moved into place; it was completed first (a ``KeyboardInterrupt``).
    """
    from harness.report.fields import check_cases
    from harness.report.hta import hta_rank_trace
    from harness.report.html import render_index
    from harness.report.trace import case_trace

    check_cases(doc, source)  # wrong-typed fields: refuse before creating anything
    out_dir = Path(out_dir)
    created = _first_missing(out_dir)
    out_dir = ensure_writable_dir(out_dir)
    stage = Path(tempfile.mkdtemp(prefix=".render-", dir=out_dir))
    done = False
    try:
        trace_hrefs: dict[str, str] = {}
        hta_hrefs: dict[str, str] = {}
        taken: set[str] = set()
        cases = doc["cases"]
        for n, case in enumerate(cases, 1):
            cid = str(case.get("id", f"#{n}"))
            try:
                stem = case_filename(cid, taken)
                if traces:
                    atomic_write_json(stage / "traces" / f"{stem}.json", case_trace(case))
                    trace_hrefs[cid] = f"traces/{stem}.json"
                if hta:
                    for rank in range(int(case["schedule"]["p"])):
                        d = hta_rank_trace(case, rank)
                        atomic_write(stage / "hta" / stem / f"rank{rank}.json", lambda fh, d=d: json.dump(d, fh, allow_nan=False))  # type: ignore[misc]
                    hta_hrefs[cid] = f"hta/{stem}/"
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                raise InputFormatError(f"{source}: case {cid!r}: cannot render its traces ({type(exc).__name__}: {exc})") from None
            if progress:
                progress(f"[{n}/{len(cases)}] {cid}: {len(case['jobs']['kind'])} jobs")
        try:
            html = render_index(doc, trace_hrefs, title=title, hta_hrefs=hta_hrefs)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise InputFormatError(f"{source}: cannot render the HTML page ({type(exc).__name__}: {exc})") from None
        (stage / "index.html").write_text(html, encoding="utf-8")
        if write_results:
            atomic_write_json(stage / "results.json", doc)
        # Everything rendered: move into place, file by file (each move is atomic),
        # with Ctrl-C held back so the folder never mixes two runs.
        written: set[Path] = set()
        with _interrupts_deferred() as held:
            for src in sorted(p for p in stage.rglob("*") if p.is_file()):
                dst = out_dir / src.relative_to(stage)
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dst)
                written.add(dst)
            if prune:
                _prune(out_dir, written)
        done = True
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if not done and created is not None:
            _remove_empty_tree(created)
    files = ReportFiles(
        index=out_dir / "index.html",
        results=out_dir / "results.json" if write_results else None,
        traces={k: out_dir / v for k, v in trace_hrefs.items()},
        hta={k: out_dir / v for k, v in hta_hrefs.items()},
    )
    if held:
        raise ReportInterrupted(files)
    return files
