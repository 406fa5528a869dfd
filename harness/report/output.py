"""Report output files: written atomically, gzip-compressed on request, and their size
estimated before they are written.

:func:`open_output` gives a text file that replaces ``path`` only once it is
complete (as :func:`harness.report.atomic.atomic_write`); a path ending in
``.gz`` is gzip-compressed (level :data:`GZIP_LEVEL`: fast, most of the gain on
traces). Perfetto, chrome://tracing and Holistic Trace Analysis (HTA's
``hta/common/trace_file.py`` opens ``*.gz`` with :mod:`gzip`) read such files;
:func:`read_json` reads both forms.

:func:`size_estimate` predicts a trace's or HTA folder's size from the counts of
its events and the measured bytes per event of each kind (``benchmarks/bench_trace_export.py``);
:func:`size_warning` turns an estimate past :data:`SIZE_WARN_BYTES` into the
message that says how to shrink it.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

__all__ = [
    "GZIP_LEVEL",
    "SIZE_WARN_BYTES",
    "TRACE_OPTIONS",
    "ReportSizeWarning",
    "TraceOptions",
    "TraceStepsWarning",
    "add_trace_arguments",
    "hta_size_estimate",
    "open_output",
    "parse_trace_options",
    "read_json",
    "size_warning",
    "trace_options_of",
    "trace_size_estimate",
    "trace_steps_note",
]

#: gzip level of compressed outputs: level 1 is several times faster than the default 6
#: and compresses these repetitive files nearly as well.
GZIP_LEVEL = 1
#: An output estimated past this size (bytes) is warned about before it is written.
SIZE_WARN_BYTES = 100 * 1000 * 1000

# Bytes per event in the uncompressed text, measured on built-in schedules at p=8..32,
# m=64..2048 with and without comm (170-175, 188-196 and 400-421 bytes): the estimate is within ~5 %.
_TRACE_JOB_BYTES = 175
_TRACE_FLOW_BYTES = 195  # one dependency: its "s" and "f" events
_TRACE_COUNTER_BYTES = 80
_HTA_JOB_BYTES = 415  # a kernel and its launch


@dataclass(frozen=True)
class TraceOptions:
    """How a report writes its traces (pytest ``--trace-gzip``, ``--trace-steps=N``,
    ``--trace-no-flows``, ``--size-warn-mb``; the same options of ``pipeline-harness report``).

    Attributes:
        gzip: write ``traces/<case>.json.gz`` and ``hta/<case>/rank<N>.json.gz``.
        steps: trace only the first ``steps`` recorded steps of each case (``None``: all);
            HTA files and ``results.json`` always keep every job.
        flows: write flow events (dependency arrows).
        warn_bytes: warn about an output estimated past this many bytes (0: never).

    Raises:
        ValueError: ``steps`` under 1 or ``warn_bytes`` negative.
    """

    gzip: bool = False
    steps: int | None = None
    flows: bool = True
    warn_bytes: int = SIZE_WARN_BYTES

    def __post_init__(self) -> None:
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"traced steps must be 1 or more, not {self.steps}")
        if self.warn_bytes < 0:
            raise ValueError(f"the size warning threshold must be 0 (never warn) or more bytes, not {self.warn_bytes}")

    def shrink_hints(self) -> list[str]:
        """The options that would make traces smaller, given the ones already in use."""
        hints = []
        if not self.gzip:
            hints.append("--trace-gzip (gzip-compressed .json.gz, ~10x smaller; Perfetto and HTA open them)")
        if self.steps is None or self.steps > 1:
            hints.append("--trace-steps=1 (trace the first recorded step only)")
        if self.flows:
            hints.append("--trace-no-flows (no dependency arrows)")
        if hints:  # the same from Python: write_report(..., trace_options=TraceOptions(...))
            fields = [f for f, on in (("gzip=True", not self.gzip), ("steps=1", self.steps is None or self.steps > 1),
                                      ("flows=False", self.flows)) if on]
            hints.append(f"from Python, write_report(..., trace_options=TraceOptions({', '.join(fields)}))")
        return hints


#: The options, as pytest and ``pipeline-harness report`` spell them: (name, metavar or None for a flag, help).
TRACE_OPTIONS = (
    ("--trace-gzip", None, "write traces and HTA rank files gzip-compressed (.json.gz; Perfetto, chrome://tracing and HTA open them)"),
    ("--trace-steps", "N", "trace only the first N recorded steps of each case (HTA files and results.json keep every step)"),
    ("--trace-no-flows", None, "leave the dependency arrows (flow events) out of the traces"),
    ("--size-warn-mb", "MB", f"warn about a report file estimated past MB megabytes (default {SIZE_WARN_BYTES // 10**6}; 0: never)"),
)


def add_trace_arguments(parser: Any) -> None:
    """Add :data:`TRACE_OPTIONS` to an ``argparse`` parser (the commands that write reports)."""
    for name, metavar, text in TRACE_OPTIONS:
        if metavar is None:
            parser.add_argument(name, action="store_true", help=text)
        else:
            parser.add_argument(name, metavar=metavar, help=text)


def trace_options_of(args: Any) -> TraceOptions:
    """:func:`parse_trace_options` of the values :func:`add_trace_arguments` parsed into ``args``."""
    return parse_trace_options(args.trace_gzip, args.trace_steps, args.trace_no_flows, args.size_warn_mb)


def parse_trace_options(gzip: bool, steps: str | None, no_flows: bool, warn_mb: str | None) -> TraceOptions:
    """:class:`TraceOptions` from the option values as given (strings, ``None`` where absent).

    Raises:
        ConfigError: ``--trace-steps`` is not a whole number of 1 or more, or ``--size-warn-mb``
            not a number of 0 or more (names the option and the value).
    """
    from harness.errors import ConfigError

    n: int | None = None
    if steps is not None:
        try:
            n = int(steps)
        except ValueError:
            n = 0
        if n < 1:
            raise ConfigError(f"--trace-steps={steps!r}: give a whole number of steps, 1 or more (e.g. --trace-steps=1)")
    warn = SIZE_WARN_BYTES
    if warn_mb is not None:
        try:
            mb = float(warn_mb)
        except ValueError:
            mb = -1.0
        if not mb >= 0 or mb == float("inf"):
            raise ConfigError(f"--size-warn-mb={warn_mb!r}: give a size in MB, 0 or more (0: never warn)")
        warn = int(mb * 1e6)
    return TraceOptions(gzip=gzip, steps=n, flows=not no_flows, warn_bytes=warn)


class ReportSizeWarning(UserWarning):
    """An output of a report is estimated past the size threshold (see :func:`size_warning`)."""


class TraceStepsWarning(ReportSizeWarning):
    """``--trace-steps`` (``TraceOptions.steps``) asks for more steps than a case recorded (see :func:`trace_steps_note`)."""


def trace_steps_note(asked: int | None, recorded: dict[str, int]) -> str | None:
    """The note for cases that recorded fewer steps than ``--trace-steps`` asks to trace, or ``None``.

    Such a case's trace holds every step it recorded: the option, like the other size options, is a
    limit, and one run's cases record different numbers of steps (the adaptive window), so it is said,
    not refused.

    Args:
        asked: the traced steps asked for (``None``: all, never a note).
        recorded: per case id, the number of steps it recorded (the cases the report traces).
    """
    if asked is None:
        return None
    short = [(cid, n) for cid, n in recorded.items() if n < asked]
    if not short:
        return None
    if len(short) == 1:
        cid, n = short[0]
        held = "its one step" if n == 1 else f"all {n} of them"
        return f"--trace-steps={asked} asks for more steps than case {cid!r} recorded ({n}); its trace holds {held}"
    shown = ", ".join(f"{cid!r} ({n})" for cid, n in short[:5]) + (f", ... ({len(short) - 5} more)" if len(short) > 5 else "")
    return (f"--trace-steps={asked} asks for more steps than {len(short)} cases recorded (steps per case: {shown}); "
            "their traces hold every step they recorded")


@contextmanager
def open_output(path: Path) -> Iterator[IO[str]]:
    """A UTF-8 text file that atomically replaces ``path`` when the block ends without error;
    gzip-compressed when ``path`` ends in ``.gz``.

    Raises:
        OSError: the folder is not writable or the disk is full; the previous file, if any,
            is left untouched and the temporary file is removed.
    """
    from harness.report.atomic import atomic_binary

    path = Path(path)
    with atomic_binary(path) as raw:
        zipped = gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL, mtime=0) if path.suffix == ".gz" else None
        text = io.TextIOWrapper(zipped if zipped is not None else raw, encoding="utf-8", newline="\n", write_through=False)
        try:
            yield text
            text.flush()
        finally:
            text.detach()
        if zipped is not None:
            zipped.close()


def read_json(path: Path) -> Any:
    """Parse a JSON file, gzip-compressed where its name ends in ``.gz``.

    Raises:
        OSError: unreadable file (or not gzip data, for ``.gz``). json.JSONDecodeError: not JSON.
    """
    path = Path(path)
    if path.suffix == ".gz":
        with gzip.open(path, "rb") as fh:
            return json.loads(fh.read())
    return json.loads(path.read_bytes())


def trace_size_estimate(case: dict[str, Any], flows: bool = True, steps: int | None = None) -> int:
    """Estimated bytes of the uncompressed Chrome trace of ``case``.

    Args:
        case: a results-document case.
        flows: whether flow events are written.
        steps: the number of recorded steps traced (``None``: all).
    """
    n_jobs = len(case["jobs"]["kind"])
    n_steps = max(1, len(case["steps"]))
    kept = n_steps if steps is None else min(n_steps, steps)
    jobs = n_jobs * kept // n_steps
    flow_count = len(case.get("deps") or []) * kept if flows else 0
    memory = case.get("memory")
    counters = sum(len(line.get("t_ns", [])) for line in (memory.get("timeline") or [])) if isinstance(memory, dict) else 0
    return jobs * _TRACE_JOB_BYTES + flow_count * _TRACE_FLOW_BYTES + counters * kept // n_steps * _TRACE_COUNTER_BYTES


def hta_size_estimate(case: dict[str, Any], rank: int | None = None) -> int:
    """Estimated bytes of the uncompressed HTA rank files of ``case`` together (every job), or of
    ``rank``'s file alone (its jobs)."""
    if rank is None:
        return len(case["jobs"]["kind"]) * _HTA_JOB_BYTES
    return sum(1 for r in case["jobs"]["rank"] if r == rank) * _HTA_JOB_BYTES


def _mb(n: int) -> str:
    """Bytes in readable units: ``"352 MB"``, ``"1.8 GB"``, ``"12 kB"``."""
    if n >= 10**9:
        return f"{n / 1e9:,.1f} GB"
    if n >= 10**6:
        return f"{n / 1e6:,.0f} MB"
    return f"{n / 1e3:,.0f} kB"


def size_warning(what: str, estimate: int, compressed: bool, shrink: list[str], threshold: int = SIZE_WARN_BYTES) -> str | None:
    """The warning for an output estimated at ``estimate`` bytes, or ``None`` under ``threshold``.

    Args:
        what: names the output (``"the trace of case 'x'"``).
        estimate: its uncompressed size estimate, bytes.
        compressed: whether it is written gzip-compressed (the message says it is smaller on disk).
        shrink: the ways to make it smaller, as the user gives them (options).
        threshold: bytes; 0 or less warns about nothing.
    """
    if threshold <= 0 or estimate <= threshold:
        return None
    ways = "; ".join(shrink)
    note = " before compression" if compressed else ""
    return f"{what} will be about {_mb(estimate)}{note} (over {_mb(threshold)})" + (f"; to shrink it: {ways}" if ways else "")
