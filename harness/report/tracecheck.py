"""A checker for the trace rules Perfetto and the classic trace viewer enforce.

:func:`check_trace` returns a list of problems (empty when the trace is
clean): complete events with ``dur`` >= 0 and numeric ``ts``; integer
``pid``/``tid``; every (pid, tid) with a ``process_name``/``thread_name``;
only reserved ``cname`` colours; no ``displayTimeUnit``; slices on one track
nest strictly (no partial overlap); flow ``s``/``f`` pairs with matching ids,
each bound inside a slice on its track.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["RESERVED_CNAMES", "check_trace", "check_trace_file"]

RESERVED_CNAMES = frozenset({
    "thread_state_uninterruptible", "thread_state_iowait", "thread_state_running", "thread_state_runnable",
    "thread_state_sleeping", "thread_state_unknown", "background_memory_dump", "light_memory_dump",
    "detailed_memory_dump", "vsync_highlight_color", "generic_work", "good", "bad", "terrible", "black", "grey",
    "white", "yellow", "olive", "rail_response", "rail_animation", "rail_idle", "rail_load", "startup",
    "heap_dump_stack_frame", "heap_dump_object_type", "heap_dump_child_node_highlight", "cq_build_running",
    "cq_build_passed", "cq_build_failed", "cq_build_abandoned", "cq_build_attempt_runnig",
    "cq_build_attempt_passed", "cq_build_attempt_failed",
})

# Float µs from integer ns: allow a rounding error well below 1 ns.
_EPS = 1e-6


def check_trace(doc: Any, max_problems: int = 50) -> list[str]:
    """Check a parsed trace document; return human-readable problems (``[]`` if clean)."""
    problems: list[str] = []

    def bad(msg: str) -> None:
        if len(problems) < max_problems:
            problems.append(msg)

    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not a trace: expected an object with a \"traceEvents\" list"]
    if "displayTimeUnit" in doc:
        bad("displayTimeUnit is set; Perfetto rescales ts with it")
    named_procs: set[Any] = set()
    named_threads: set[tuple[Any, Any]] = set()
    tracks: dict[tuple[int, int], list[tuple[float, float, str]]] = defaultdict(list)
    flows: dict[Any, dict[str, dict[str, Any]]] = defaultdict(dict)
    for i, ev in enumerate(doc["traceEvents"]):
        ph = ev.get("ph")
        pid, tid = ev.get("pid"), ev.get("tid")
        if not isinstance(pid, int) or not isinstance(tid, int) or isinstance(pid, bool):
            bad(f"event #{i} ({ev.get('name')!r}): pid/tid must be integers, got {pid!r}/{tid!r}")
            continue
        if "cname" in ev and ev["cname"] not in RESERVED_CNAMES:
            bad(f"event #{i} ({ev.get('name')!r}): cname {ev['cname']!r} is not a reserved colour")
        if ph == "M":
            if ev.get("name") == "process_name":
                named_procs.add(pid)
            elif ev.get("name") == "thread_name":
                named_threads.add((pid, tid))
        elif ph == "X":
            ts, dur = ev.get("ts"), ev.get("dur")
            if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)):
                bad(f"event #{i} ({ev.get('name')!r}): complete event needs numeric ts and dur")
                continue
            if dur < 0:
                bad(f"event #{i} ({ev.get('name')!r}): negative dur {dur}")
            tracks[(pid, tid)].append((float(ts), float(ts) + float(dur), str(ev.get("name"))))
        elif ph in ("s", "f", "t"):
            if "id" not in ev:
                bad(f"event #{i}: flow event without id")
                continue
            flows[ev["id"]][ph] = ev
        elif ph in ("B", "E"):
            bad(f"event #{i}: B/E events are not used by the harness; use complete (X) events")
    for (pid, tid), slices in tracks.items():
        if pid not in named_procs:
            bad(f"track pid={pid}: no process_name metadata")
        if (pid, tid) not in named_threads:
            bad(f"track pid={pid} tid={tid}: no thread_name metadata")
        slices.sort(key=lambda s: (s[0], -s[1]))
        stack: list[tuple[float, float, str]] = []
        for s in slices:
            while stack and stack[-1][1] <= s[0] + _EPS:
                stack.pop()
            if stack and s[1] > stack[-1][1] + _EPS:
                top = stack[-1]
                bad(f"track pid={pid} tid={tid}: slice {s[2]!r} [{s[0]:.3f}, {s[1]:.3f}] µs overlaps {top[2]!r} "
                    f"[{top[0]:.3f}, {top[1]:.3f}] µs without nesting")
            stack.append(s)
    starts = {key: [sl[0] for sl in slices] for key, slices in tracks.items()}  # sorted above
    for fid, ends in flows.items():
        if "s" not in ends or "f" not in ends:
            bad(f"flow id {fid}: needs both a start (s) and a finish (f) event")
            continue
        for ph in ("s", "f"):
            ev = ends[ph]
            key = (ev["pid"], ev["tid"])
            k = bisect.bisect_right(starts.get(key, []), ev["ts"] + _EPS) - 1
            # the last slice to start before ts, or one it nests in (a sub-slice may end before ts)
            inside = any(tracks[key][j][1] + _EPS >= ev["ts"] for j in range(k, max(-1, k - 64), -1))
            if not inside:
                bad(f"flow id {fid}: its {ph!r} event at {ev['ts']} µs is not inside a slice on pid={ev['pid']} tid={ev['tid']}")
        if ends["f"]["ts"] < ends["s"]["ts"] - _EPS:
            bad(f"flow id {fid}: finishes at {ends['f']['ts']} µs, before it starts at {ends['s']['ts']} µs (an arrow back in time)")
    return problems


def check_trace_file(path: Path, max_problems: int = 50) -> list[str]:
    """Check a trace file, plain ``.json`` or gzip-compressed ``.json.gz`` (see :func:`check_trace`).

    Raises:
        OSError: the file cannot be read (or is not gzip data, for ``.gz``).
        ValueError: it is not JSON (``json.JSONDecodeError``, with line and column).
    """
    from harness.report.output import read_json

    return check_trace(read_json(path), max_problems=max_problems)


def _traces_in(folder: Path) -> list[Path]:
    """The trace files of ``folder``: in a report folder (``results.json`` or ``traces/`` in it) those of
    ``traces/`` and ``hta/<case>/``, else its own ``*.json`` and ``*.json.gz``; sorted by path."""

    def traces(d: Path) -> list[Path]:
        return sorted([*d.glob("*.json"), *d.glob("*.json.gz")])

    if (folder / "traces").is_dir() or (folder / "results.json").is_file():
        found = traces(folder / "traces")
        for case in sorted(p for p in (folder / "hta").glob("*") if p.is_dir()):
            found += traces(case)
        return found
    return traces(folder)


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.report.tracecheck PATH...``: check trace files, or every ``*.json``/``*.json.gz`` in
    the folders given; print each file's problems, or that it is clean. A report folder (one holding
    ``results.json`` or ``traces/``) means its traces, ``traces/*`` and ``hta/<case>/rank*``, not results.json.

    Returns:
        0 when every file is clean, 1 when a file has problems, 2 when one cannot be read or nothing was found.
    """
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m harness.report.tracecheck", description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", metavar="PATH", help="a trace file (.json, .json.gz) or a folder of them")
    args = ap.parse_args(argv)
    files: list[Path] = []
    for p in map(Path, args.paths):
        if p.is_dir():
            found = _traces_in(p)
            if not found:
                print(f"error: {p}: no .json or .json.gz trace files in this folder", file=sys.stderr)
                return 2
            files += found
        else:
            files.append(p)
    worst = 0
    for f in files:
        try:
            problems = check_trace_file(f)
        except (OSError, ValueError) as exc:
            print(f"error: {f}: cannot be read as a trace: {exc}", file=sys.stderr)
            worst = 2
            continue
        if problems:
            worst = max(worst, 1)
            print(f"{f}: {len(problems)} problem(s)" + "".join(f"\n  {x}" for x in problems))
        else:
            print(f"{f}: clean")
    return worst


if __name__ == "__main__":
    raise SystemExit(main())
