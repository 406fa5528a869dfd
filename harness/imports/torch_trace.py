"""One rank's PyTorch ``torch.profiler`` trace of a ``torch.distributed.pipelining`` run: read its actions.

``torch.profiler`` writes one Kineto Chrome-trace JSON per rank
(``export_chrome_trace``). :func:`read_rank_trace` reads one such file; the run
of all ranks is assembled by :func:`harness.imports.torch.read_torch_traces`
(``rank*.json``/``rank*.json.gz``, else any ``*.json``/``*.json.gz`` holding
``distributedInfo``; other JSON files there are skipped with a note).
The format facts used here are those of Kineto's JSON writer
(pytorch/kineto ``libkineto/src/output_json.cpp``) and of PyTorch's pipelining
runtime (pytorch/pytorch ``torch/distributed/pipelining/schedules.py``):

* **rank** from ``distributedInfo.rank`` / ``world_size`` (never the file name
  or the OS pid); ``host_name`` and ``deviceProperties`` are kept;
* **times**: an event's absolute time is ``baseTimeNanoseconds + ts * 1000`` ns;
  ``ts``/``dur`` are µs written with 3 decimals and are read exactly (as
  decimal text, not through a float) to whole ns;
* **actions**: the ``PP:<action>`` ``record_function`` ranges of the runtime
  schedules (``ScheduleInterleaved1F1B``, ``ScheduleInterleavedZeroBubble``,
  ``ScheduleZBVZeroBubble``, ``ScheduleDualPipeV``, ``ScheduleLoopedBFS``), in
  the grammar of ``_Action.__repr__``: ``PP:2F0``, ``PP:3I0``, ``PP:1SEND_B7``,
  ``PP:0UNSHARD``/``RESHARD``/``REDUCE_GRAD``, ``PP:(0F3;3B1)OVERLAP_F_B``;
  ``ScheduleGPipe``'s ``Forward <i>`` / ``Backward <i>`` ranges; and for
  ``Schedule1F1B``, which marks no actions, F and B rebuilt from operator events
  (:mod:`harness.imports.torch_infer`), marked *inferred*;
* **what a range covers**: PyTorch's runtime only *posts* a receive in
  ``RECV_F``/``RECV_B``; the wait for the data happens inside the next compute
  action. Each compute range is therefore split into **wait** (range start to its
  first operator) and **compute** (first operator to range end); the job's time is
  the compute part and the wait is kept beside it (:attr:`TorchAction.wait_ns`).
  Asynchronous ``gloo:*``/``nccl:*`` spans outlive their parents; they are not
  used for nesting;
* **GPU activity**: where a rank's trace holds ``gpu_user_annotation`` ranges
  with the same action names, they give the job times (device side) and the CPU
  ranges the enqueue time, as the CUDA backend does;
* **stages to ranks**: from the action names (which rank ran which stage); a
  given schedule class name is checked against its placement (loop ``s % N``,
  V ``s if s < N else 2N-1-s``);
* **steps** from ``ProfilerStep#N``; ``steps=`` picks which.

Send/receive jobs are the posting ranges, on stream ``rank{r}/comm↔{q}``;
UNSHARD, RESHARD and REDUCE_GRAD are host actions, listed, not jobs; the
optimizer is outside the pipeline actions and not imported as a job, except in
the traces of the harness's ``torch`` backend (docs/torch.md), which marks each
stage's optimizer step as a ``PP:<stage>OPT`` range: that stage's ``OPT`` job.
"""

from __future__ import annotations

import gzip
import json
import re
import warnings
import zlib
from bisect import bisect_left
from collections import defaultdict
from pathlib import Path
from typing import Any

from harness.actions.torch_action import TorchAction
from harness.actions.torch_rank import TorchRank
from harness.errors import InputFormatError
from harness.imports.torch_fields import EventProblems, NumberText, parse_constant, wrong_field

__all__ = ["MARKING_SCHEDULES", "TorchTraceWarning", "find_trace_files", "parse_action_name", "read_rank_trace", "us_to_ns"]


#: Schedule classes whose traces carry per-action ranges, and how.
MARKING_SCHEDULES = (
    "ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble, ScheduleDualPipeV and "
    "ScheduleLoopedBFS mark every action as a 'PP:<action>' range; ScheduleGPipe marks 'Forward <i>'/'Backward <i>'; "
    "Schedule1F1B marks none (its F/B are rebuilt from operator events)"
)

_PP_RE = re.compile(
    r"^PP:(?:(\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|OPT|SEND_F|RECV_F|SEND_B|RECV_B)(\d*)|\((.*)\)(OVERLAP_F_B))$"
)

_SUB_RE = re.compile(r"^(\d+)(F|I|B|W)(\d+)$")

_GPIPE_RE = re.compile(r"^(Forward|Backward) (\d+)$")

_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")

_COMPUTE = frozenset({"F", "B", "I", "W"})

_COMM = frozenset({"SEND_F", "RECV_F", "SEND_B", "RECV_B"})

_HOST = frozenset({"UNSHARD", "RESHARD", "REDUCE_GRAD"})

#: Span names that are asynchronous (they end when the work is waited on, not when their parent ends).
_ASYNC_PREFIXES = ("gloo:", "nccl:", "ncclKernel", "ncclDevKernel")

#: Backward operators: the start of a backward inside an ``OVERLAP_F_B`` range.
_BACKWARD_OPS = ("autograd::engine::evaluate_function", "aten::ones_like")

class TorchTraceWarning(UserWarning):
    """Something in a trace was odd but the import went on; the message names the file."""

#: A trace time (ns, on the trace's clock) at or past this is refused: no profiler clock reads it,
#: and times relative to the import's time base must stay within 64 bits.
_MAX_TIME_NS = 1 << 62

def us_to_ns(value: Any, where: str = "") -> int:
    """A Kineto time in µs (the JSON literal's text, or an int) as whole ns, exactly.

    ``"5260232471589.062"`` -> ``5260232471589062``. A literal with more than 3
    decimals is rounded half-even to the ns (Kineto writes exactly 3).

    Raises:
        InputFormatError: not a number (``where`` names the file and event).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value * 1000
    if isinstance(value, str):
        text = value.strip()
        neg = text.startswith("-")
        body = text[1:] if neg or text.startswith("+") else text
        whole, dot, frac = body.partition(".")
        if whole.isdigit() and (not dot or frac.isdigit()) and len(frac) <= 3:
            ns = int(whole) * 1000 + int((frac + "000")[:3])
            return -ns if neg else ns
        try:
            from decimal import Decimal, InvalidOperation

            d = Decimal(text) * 1000
            if d.is_finite():
                return int(d.to_integral_value())
        except (ArithmeticError, ValueError, InvalidOperation):
            pass
    raise InputFormatError(f"{where}: time {value!r} is not a number of µs")

def parse_action_name(name: str) -> list[tuple[int, str, int | None]] | None:
    """The actions a range name stands for: ``[(stage, kind, micro-batch)]``, or ``None``
    when ``name`` is no pipeline action.

    ``"PP:2F0"`` -> ``[(2, "F", 0)]``; ``"PP:0UNSHARD"`` -> ``[(0, "UNSHARD", None)]``; ``"PP:1OPT"``
    (a stage's optimizer step, as the ``torch`` backend marks it) -> ``[(1, "OPT", None)]``;
    ``"PP:(0F3;3B1)OVERLAP_F_B"`` -> ``[(0, "F", 3), (3, "B", 1)]`` (F first: the runtime
    runs them one after the other). GPipe's ``"Forward 2"`` -> ``[(-1, "F", 2)]`` (stage
    unknown: the rank's one stage).

    Raises:
        InputFormatError: a ``PP:`` name that does not follow the grammar (a compute or
            send/receive action without micro-batch, a host action with one, a malformed
            overlap group).
    """
    if name.startswith("PP:"):
        m = _PP_RE.match(name)
        if m is None:
            raise InputFormatError(f"pipeline action {name!r} does not follow PyTorch's _Action grammar "
                                   "(PP:<stage><F|I|B|W|SEND_F|RECV_F|SEND_B|RECV_B><mb>, PP:<stage>UNSHARD, PP:<stage>OPT, "
                                   "PP:(<a>;<b>)OVERLAP_F_B)")
        if m.group(5):
            subs = []
            for part in m.group(4).split(";"):
                s = _SUB_RE.match(part.strip())
                if s is None:
                    raise InputFormatError(f"pipeline action {name!r}: sub-action {part!r} is not <stage><F|I|B|W><mb>")
                subs.append((int(s.group(1)), s.group(2), int(s.group(3))))
            if len(subs) < 2:
                raise InputFormatError(f"pipeline action {name!r}: an OVERLAP_F_B group needs two sub-actions")
            return sorted(subs, key=lambda a: a[1] != "F")
        stage, kind, mb = int(m.group(1)), m.group(2), m.group(3)
        if kind in _HOST or kind == "OPT":
            if mb:
                raise InputFormatError(f"pipeline action {name!r}: {kind} takes no micro-batch")
            return [(stage, kind, None)]
        if not mb:
            raise InputFormatError(f"pipeline action {name!r}: {kind} needs a micro-batch (e.g. PP:{stage}{kind}0)")
        return [(stage, kind, int(mb))]
    g = _GPIPE_RE.match(name)
    if g:
        return [(-1, "F" if g.group(1) == "Forward" else "B", int(g.group(2)))]
    return None

def find_trace_files(trace_dir: Path) -> list[Path]:
    """The trace files of a run: ``rank*.json``/``rank*.json.gz`` in ``trace_dir``, else every
    ``*.json``/``*.json.gz`` there; a single file is its own run.

    Raises:
        InputFormatError: ``trace_dir`` does not exist or holds no such file.
    """
    trace_dir = Path(trace_dir)
    if trace_dir.is_file():
        return [trace_dir]
    if not trace_dir.is_dir():
        raise InputFormatError(f"{trace_dir}: no such trace folder")
    files = sorted(f for f in trace_dir.iterdir() if f.is_file() and (f.name.endswith(".json") or f.name.endswith(".json.gz")))
    ranked = [f for f in files if f.name.startswith("rank")]
    files = ranked or files
    if not files:
        runs = sorted(d.name for d in trace_dir.iterdir() if d.is_dir() and any(
            f.is_file() and (f.name.endswith(".json") or f.name.endswith(".json.gz")) for f in d.iterdir()))
        if runs:
            shown = ", ".join(runs[:12]) + (f", ... ({len(runs) - 12} more)" if len(runs) > 12 else "")
            raise InputFormatError(f"{trace_dir}: no traces here, but its subfolders {shown} hold some: pass one run's "
                                   f"folder, e.g. {trace_dir / runs[0]}")
        raise InputFormatError(f"{trace_dir}: no torch.profiler traces (*.json or *.json.gz) here")
    return files

def _load(path: Path) -> dict[str, Any]:
    """The JSON object of ``path`` (gzip when it ends ``.gz``), floats kept as their text."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not raw:
        raise InputFormatError(f"{path}: the file is empty (0 bytes): the profiler did not finish writing it?")
    if path.name.endswith(".gz"):
        if raw[:2] != b"\x1f\x8b":
            plain = raw.lstrip()[:1] in (b"{", b"[")
            raise InputFormatError(f"{path}: named .gz but not gzip data"
                                   + (f" (it looks like plain JSON: rename it to {path.name[:-3]})" if plain else ""))
        try:
            raw = gzip.decompress(raw)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise InputFormatError(f"{path}: not a whole gzip file ({exc}); was it cut short?") from None
        if not raw:
            raise InputFormatError(f"{path}: the file is empty (a gzip of 0 bytes)")
    try:
        doc = json.loads(raw, parse_float=NumberText, parse_constant=parse_constant)
    except UnicodeDecodeError as exc:
        raise InputFormatError(f"{path}: not UTF-8 JSON ({exc})") from None
    except json.JSONDecodeError as exc:
        end = " (the file does not end with '}': cut short?)" if not raw.rstrip().endswith(b"}") else ""
        raise InputFormatError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}{end}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise InputFormatError(f"{path}: not a Chrome trace (expected a JSON object with a 'traceEvents' list)")
    return doc

def _int_field(info: dict[str, Any], key: str, path: Path) -> int:
    value = info.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InputFormatError(f"{path}: distributedInfo.{key} is {value!r}, expected a whole number >= 0")
    return value

def read_rank_trace(path: Path) -> TorchRank:
    """Read one rank's trace file: identity, steps and pipeline actions.

    Raises:
        InputFormatError: unreadable or truncated file, no ``distributedInfo`` (not a
            distributed run's trace: the rank is unknown), a malformed ``PP:`` name, an
            event without a usable time, ``PP:`` ranges of one thread that overlap.
    """
    path = Path(path)
    doc = _load(path)
    info = doc.get("distributedInfo")
    if not isinstance(info, dict):
        raise InputFormatError(
            f"{path}: no 'distributedInfo': not the trace of a torch.distributed run (the profiler writes it when "
            "the process group is initialized at export), so its rank is unknown: profile after "
            "torch.distributed.init_process_group() and export before destroy_process_group(), or add "
            "\"distributedInfo\": {\"rank\": R, \"world_size\": N} to the file's top-level object by hand"
        )
    rank, world = _int_field(info, "rank", path), _int_field(info, "world_size", path)
    if rank >= world:
        raise InputFormatError(f"{path}: distributedInfo.rank {rank} is not below world_size {world}")
    base = doc.get("baseTimeNanoseconds", 0)
    if not isinstance(base, int) or isinstance(base, bool):
        raise InputFormatError(f"{path}: baseTimeNanoseconds is {base!r}, expected whole ns")
    out = TorchRank(path, rank, world, str(doc.get("host_name", "")), list(doc.get("deviceProperties") or []), base)
    events = doc["traceEvents"]
    out.events = len(events)
    cpu: list[tuple[int, int, str, Any]] = []  # (start, end, name, tid) of main-thread complete events
    gpu: list[tuple[int, int, str]] = []
    gloo_recv: list[tuple[int, int]] = []
    problems = EventProblems(path)  # events left out for a wrong-typed field: one warning, never a silent drop
    for k, e in enumerate(events):
        if not isinstance(e, dict):
            problems.add(k, e)
            continue
        if e.get("ph") != "X":
            if "ph" in e and not isinstance(e["ph"], str):
                problems.add(k, e, ("ph", f"{e['ph']!r}, expected a string"))
            continue
        bad = wrong_field(e)
        if bad is not None:
            problems.add(k, e, bad)
            continue
        name = e["name"]
        where = f"{path}: traceEvents[{k}] ({name!r})"
        start = base + us_to_ns(e["ts"], where)
        if "dur" not in e:  # a complete event has one (Trace Event Format); without it the job would last 0 ns
            raise InputFormatError(f"{where}: a complete ('X') event without \"dur\"; the trace is damaged")
        dur = us_to_ns(e["dur"], where)
        if dur < 0:
            raise InputFormatError(f"{where}: dur {e['dur']!r} µs is negative; the trace is damaged")
        end = start + dur
        if max(abs(start), abs(end)) >= _MAX_TIME_NS:  # would end as a time past 64 bits, naming a job but not the file
            raise InputFormatError(f"{where}: {'starts' if abs(start) >= _MAX_TIME_NS else 'ends'} at "
                                   f"{start if abs(start) >= _MAX_TIME_NS else end:,} ns (baseTimeNanoseconds + ts + dur), past "
                                   "2**62 ns (about 146 years): not a time the profiler writes; the event is damaged")
        cat = e.get("cat")
        if cat == "gpu_user_annotation":
            gpu.append((start, end, name))
        elif cat in ("cpu_op", "user_annotation") and not isinstance(e.get("pid"), str):
            if name.startswith(_ASYNC_PREFIXES):
                if name == "gloo:recv":
                    gloo_recv.append((start, end))
                continue  # asynchronous: outlives its parent, never nests
            cpu.append((start, end, name, e.get("tid")))
    said = problems.message()
    if said:
        warnings.warn(said, TorchTraceWarning, stacklevel=3)
    cpu.sort(key=lambda x: (x[0], -x[1]))
    for start, end, name, _ in cpu:
        s = _STEP_RE.match(name)
        if s:
            out.steps[int(s.group(1))] = (start, end)
    if not out.steps:
        warnings.warn(f"{path}: no ProfilerStep#N ranges (was the profiler stepped with prof.step()?); "
                      "the whole recording is read as step 0", TorchTraceWarning, stacklevel=3)
        out.steps[0] = (cpu[0][0], max(e for _, e, _, _ in cpu)) if cpu else (base, base)
    starts = [c[0] for c in cpu]
    step_spans = sorted((a, b, n) for n, (a, b) in out.steps.items())

    span_starts = [a for a, _, _ in step_spans]

    def step_of(t: int) -> int | None:
        k = bisect_left(span_starts, t + 1) - 1  # the last step starting at or before t
        if k >= 0:
            a, b, n = step_spans[k]
            if a <= t < b or a == t == b:
                return n
        return None

    def ops_inside(a: int, b: int, tid: Any) -> list[tuple[int, int, str, Any]]:
        """The operators of thread ``tid`` inside ``[a, b]`` (not the action ranges themselves)."""
        i = bisect_left(starts, a)
        found = []
        while i < len(cpu) and cpu[i][0] < b:
            op = cpu[i][2]
            if cpu[i][3] == tid and cpu[i][1] <= b and not op.startswith("PP:") and not _GPIPE_RE.match(op):
                found.append(cpu[i])
            i += 1
        return found

    pp = [c for c in cpu if c[2].startswith("PP:")]
    gp = [c for c in cpu if _GPIPE_RE.match(c[2])]
    ranges = pp or gp
    out.marking = "PP" if pp else "GPipe" if gp else "none"
    gpu_by_name: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for a, b, n in sorted(gpu):
        gpu_by_name[n].append((a, b))
    out.gpu = bool(ranges) and any(c[2] in gpu_by_name for c in ranges)
    used: dict[str, int] = defaultdict(int)
    prev_end, prev_name, prev_tid = None, "", None
    gloo_recv.sort()
    recv_starts = [g[0] for g in gloo_recv]
    outside: list[str] = []
    for group, (a, b, name, tid) in enumerate(ranges):
        if prev_end is not None and tid == prev_tid and a < prev_end:
            raise InputFormatError(
                f"{path}: rank {rank}: pipeline actions {prev_name!r} and {name!r} overlap on one thread "
                f"({(prev_end - a) / 1000:.3f} µs); PyTorch's runtime runs a rank's actions one after the other"
            )
        prev_end, prev_name, prev_tid = b, name, tid
        try:
            parsed = parse_action_name(name)
        except InputFormatError as exc:  # the grammar's message names the action: add the file and the event
            k = next(i for i, e in enumerate(events) if isinstance(e, dict) and e.get("ph") == "X" and e.get("name") == name)
            raise InputFormatError(f"{path}: traceEvents[{k}]: rank {rank}: {exc}") from None
        assert parsed is not None
        step = step_of(a)
        if step is None:  # outside the recorded steps (not in torch's own traces: an edited time, say)
            outside.append(name)
            continue
        enqueue = 0
        if out.gpu:
            occ = gpu_by_name.get(name, [])
            k = used[name]
            used[name] += 1
            if k < len(occ):
                enqueue = b - a
                a, b = occ[k]
        ops = [] if out.gpu else ops_inside(a, b, tid)
        real = [o for o in ops if not o[2].startswith("c10d::")]
        if len(parsed) > 1:  # OVERLAP_F_B: F, then the backward from its first backward operator on
            split = next((o[0] for o in real if o[2].startswith(_BACKWARD_OPS)), None)
            fwd_ops = [o for o in real if split is None or o[0] < split]
            f_first = fwd_ops[0][0] if fwd_ops else a
            f_end = max((o[1] for o in fwd_ops), default=f_first)
            if split is None:
                split = f_end
            parts = [(a, f_first, f_end), (f_end, split, b)]
            for (stage, kind, mb), (pa, pc, pb) in zip(parsed, parts):
                out.actions.append(TorchAction(rank, step, name, stage, kind, mb, pa, pb, pc, enqueue, group=group))
            continue
        stage, kind, mb = parsed[0]
        if stage < 0:
            stage = rank  # GPipe: one stage per rank, stage = rank
        compute = a
        if (kind in _COMPUTE or kind == "OPT") and not out.gpu:
            compute = real[0][0] if real else b  # an empty range (stage 0's I) is all waiting
        act = TorchAction(rank, step, name, stage, kind, mb, a, b, compute, enqueue)
        out.actions.append(act)
        if kind in ("RECV_F", "RECV_B") and mb is not None:
            i = bisect_left(recv_starts, a)
            if i < len(gloo_recv) and gloo_recv[i][0] < b:
                out.recv_end[(stage, kind, mb, step)] = gloo_recv[i][1]
    if outside:
        warnings.warn(f"{path}: rank {rank}: {len(outside)} pipeline action(s) start outside every ProfilerStep#N range "
                      f"({', '.join(map(repr, outside[:5]))}{', ...' if len(outside) > 5 else ''}); they are left out, "
                      "and a step that lacks them is left out of the figures", TorchTraceWarning, stacklevel=3)
    if not ranges:
        from harness.imports.torch_infer import infer_1f1b

        inferred = infer_1f1b(path, rank, world, cpu, out.steps)
        if inferred:
            out.actions = inferred
            out.marking = "inferred"
    return out
