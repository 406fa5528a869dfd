"""Type checks of a results-document case's fields, before any report is rendered.

:func:`harness.report.results.validate_document` checks the document's shape
(schema, required fields, equal column lengths); this module checks the
*types* the renderers rely on, so that a hand-edited or foreign file with a
wrong-typed field is refused with a message naming the case and the field
(``jobs.start_ns[5] is '12' (str), expected an integer``) instead of a
``TypeError`` from deep inside a renderer.

Optional fields (``outcome``, ``metrics.span_bubble_ratio``, ``warnings``, ``assumptions``,
``overlaps``, ``rank_labels``, ``theory``...) are checked only where present.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from operator import is_not
from typing import Any

import numpy as np

from harness.report.consistency import metric_range_problem
from harness.schedule.model import JobKind

__all__ = ["case_field_problem", "check_cases", "float_view", "left_out_entry"]


_INT_COLUMNS = ("rank", "stream", "stage", "chunk", "step", "start_ns", "end_ns")

#: The pytest outcomes a case may carry (harness.pytest.plugin sets them).
_OUTCOMES = frozenset({"passed", "failed", "error", "skipped", "xfailed"})

#: The job kinds a results file may hold.
_KINDS = frozenset(kind.value for kind in JobKind)

def _is_int(x: Any) -> bool:
    return type(x) is int

def _is_number(x: Any) -> bool:
    return type(x) in (int, float)

def _is_str(x: Any) -> bool:
    return type(x) is str

def _is_opt_int(x: Any) -> bool:
    return x is None or type(x) is int

_EXPECT: dict[Callable[[Any], bool], str] = {
    _is_int: "an integer",
    _is_number: "a number",
    _is_str: "a string",
    _is_opt_int: "an integer or null",
}

#: The item types each check accepts (for the fast path of :func:`_list_problem`).
_TYPES: dict[Callable[[Any], bool], set[type]] = {
    _is_int: {int},
    _is_number: {int, float},
    _is_str: {str},
    _is_opt_int: {int, type(None)},
}

def _show(x: Any) -> str:
    text = repr(x)
    return (text if len(text) <= 40 else text[:37] + "...") + f" ({type(x).__name__})"

def _first_true(test: Callable[..., Any], *columns: list[int], table: np.ndarray | None = None) -> int | None:
    """The first index where ``test`` (over numpy arrays of the integer ``columns``) holds,
    or ``None``: one vectorized pass over the job columns instead of a Python loop. ``table``:
    the one column already as an int64 array, where the caller has it."""
    if table is not None:
        hits = np.flatnonzero(test(table))
        return int(hits[0]) if len(hits) else None
    try:
        arrays = [np.asarray(c, dtype=np.int64) for c in columns]
    except OverflowError:  # an integer past 64 bits: compare as Python objects
        arrays = [np.asarray(c, dtype=object) for c in columns]
    hits = np.flatnonzero(test(*arrays))
    return int(hits[0]) if len(hits) else None

def _list_problem(name: str, value: Any, ok: Callable[[Any], bool]) -> str | None:
    if not isinstance(value, list):
        return f"{name} is {_show(value)}, expected a list"
    types = _TYPES.get(ok)
    if types is not None and set(map(type, value)) <= types:  # fast path: the item types, collected in C
        return None
    if all(map(ok, value)):
        return None
    k = next(i for i, x in enumerate(value) if not ok(x))
    return f"{name}[{k}] is {_show(value[k])}, expected {_EXPECT[ok]}"

def _value_problem(name: str, value: Any, ok: Callable[[Any], bool]) -> str | None:
    return None if ok(value) else f"{name} is {_show(value)}, expected {_EXPECT[ok]}"

#: The flags a results file may carry (harness.run.stability; ``clocks``: an import whose ranks'
#: clocks were fitted across hosts or given with offsets that break causality, harness.actions.clocks).
FLAG_KINDS = ("unstable", "contended", "clocks", "steps")

def _flags_problem(flags: Any) -> str | None:
    """``flags`` (optional) must be a list of ``{"kind": "unstable" | "contended" | "clocks" | "steps", "reason": str}``:
    a malformed one would be dropped, and its case gated as if it were to be trusted."""
    if flags is None:
        return None
    if not isinstance(flags, list):
        return f"flags is {_show(flags)}, expected a list of {{\"kind\": ..., \"reason\": ...}} objects"
    for k, f in enumerate(flags):
        if not isinstance(f, dict) or f.get("kind") not in FLAG_KINDS or not isinstance(f.get("reason"), str):
            return (f"flags[{k}] is {_show(f)}, expected {{\"kind\": one of {', '.join(FLAG_KINDS)}, "
                    "\"reason\": a text}")
    return None

_SURROGATE = "holds a surrogate code point (U+D800..U+DFFF, e.g. from a \\ud800 escape), which is not valid Unicode text"

def _unwritable_field(case: dict[str, Any], skip: frozenset[str]) -> str | None:
    """The first field of ``case`` outside ``skip`` that results.json cannot hold, described as a
    problem, or ``None``: a surrogate code point (:func:`harness.text.first_surrogate`), a NaN or
    infinite float (JSON has none), or a value of no JSON type (an object a custom cost model's
    ``describe`` returned). orjson encodes the case in C first; only where it refuses is the case
    walked for the path."""
    import math

    import orjson

    from harness.report.jsontext import _first_non_finite
    from harness.text import first_surrogate

    rest = {k: v for k, v in case.items() if k not in skip}
    try:
        orjson.dumps(rest)
        refused = False
    except (TypeError, ValueError):  # a surrogate, an integer past 64 bits, a non-str key, an object...
        refused = True
        unsafe = first_surrogate(case, "", skip=skip)
        if unsafe:
            return f"{unsafe} {_SURROGATE}"
    where = _first_non_finite(rest, "")  # (orjson writes NaN as null: looked for apart)
    if where:
        return f"{where.lstrip('.')} is not a finite number (NaN or infinite), which JSON cannot hold"

    def walk(value: Any, name: str) -> str | None:
        if value is None or isinstance(value, (str, bool, int)) or (isinstance(value, float) and math.isfinite(value)):
            return None
        if isinstance(value, dict):
            for k, x in value.items():
                if not isinstance(k, str):
                    return f"{name} has the key {k!r} ({type(k).__name__}), expected text keys"
                got = walk(x, f"{name}.{k}" if name else k)
                if got:
                    return got
            return None
        if isinstance(value, (list, tuple)):
            return next((got for k, x in enumerate(value) if (got := walk(x, f"{name}[{k}]"))), None)
        return f"{name} is {_show(value)}, a value JSON cannot hold"

    return walk(rest, "") if refused else None

def case_field_problem(case: dict[str, Any], tables: list[Any] | None = None) -> str | None:
    """The first wrong-typed or out-of-range field of ``case``, described as
    ``"<field path> is <value> (<type>), expected ..."``; ``None`` when all fit.

    Args:
        case: a results-document case.
        tables: where given, the case's jobs in columns (:class:`harness.report.jobtable.JobTable`),
            built once its job columns are known to fit, are appended to it (the renderers reuse them);
            a job column entry past 64 bits, which they cannot hold, is then a problem too.
    """
    unwritable = _unwritable_field(case, frozenset({"jobs", "deps"}))  # the big columns are checked by type below
    if unwritable:
        return unwritable
    checks: list[str | None] = [_value_problem("id", case.get("id"), _is_str)]
    if case.get("id") == "":
        return "id is '' (str), expected a name (reports and compare match cases by id)"
    sched = case.get("schedule")
    if not isinstance(sched, dict):
        return f"schedule is {_show(sched)}, expected an object"
    for key in ("p", "m", "v"):
        checks.append(_value_problem(f"schedule.{key}", sched.get(key), _is_int))
    checks.append(_value_problem("schedule.name", sched.get("name"), _is_str))
    checks.append(_value_problem("backend", case.get("backend"), _is_str))
    checks.append(_list_problem("streams", case.get("streams"), _is_str))
    for key in ("steps", "step_start_ns", "step_end_ns"):
        checks.append(_list_problem(key, case.get(key), _is_int))
    checks.append(_flags_problem(case.get("flags")))
    for problem in checks:
        if problem:
            return problem
    if not len(case["steps"]) == len(case["step_start_ns"]) == len(case["step_end_ns"]):
        return (f"steps, step_start_ns and step_end_ns have different lengths "
                f"({len(case['steps'])}, {len(case['step_start_ns'])}, {len(case['step_end_ns'])})")
    p, v = sched["p"], sched["v"]
    if p < 1:
        return f"schedule.p is {p}, expected at least 1"
    if v < 1:
        return f"schedule.v is {v}, expected at least 1"
    bad = next((k for k, (a, b) in enumerate(zip(case["step_start_ns"], case["step_end_ns"])) if b < a), None)
    if bad is not None:
        return f"step_end_ns[{bad}] ({case['step_end_ns'][bad]}) is before step_start_ns[{bad}] ({case['step_start_ns'][bad]})"
    jobs = case["jobs"]
    for col in _INT_COLUMNS:
        problem = _list_problem(f"jobs.{col}", jobs.get(col), _is_int)
        if problem:
            return problem
    for col, ok in (("microbatch", _is_opt_int), ("kind", _is_str)):
        problem = _list_problem(f"jobs.{col}", jobs.get(col), ok)
        if problem:
            return problem
    if "enqueue_ns" in jobs:
        problem = _list_problem("jobs.enqueue_ns", jobs["enqueue_ns"], _is_number)
        if problem:
            return problem
    table = None
    if tables is not None:  # the columns have their types: in columns once, for these checks and the renderers
        from harness.report.jobtable import JobTable

        try:
            table = JobTable.from_case(case)
        except OverflowError:  # an integer past 64 bits, which the renderers cannot hold: named
            return _wide_int_problem(jobs)
        tables.append(table)
    n_streams = len(case["streams"])
    for col, hi in (("stream", n_streams), ("rank", p), ("stage", p * v), ("chunk", v)):
        bad = _first_true(lambda a, hi=hi: (a < 0) | (a >= hi), jobs[col], table=None if table is None else getattr(table, col))
        if bad is not None:
            return f"jobs.{col}[{bad}] is {jobs[col][bad]}, expected {'0' if hi == 1 else f'0 to {hi - 1}'}"
    # A run's jobs are the harness's kinds; an import keeps the job types it does not map
    # (Paddle's `lr`, `recv4_*`, ...) under their own names, which must still name something.
    known = _KINDS if case.get("backend") != "paddle-log" else None
    if known is not None and not set(jobs["kind"]) <= known:
        k = next(i for i, x in enumerate(jobs["kind"]) if x not in known)
        return f"jobs.kind[{k}] is {_show(jobs['kind'][k])}, expected one of {', '.join(sorted(known))}"
    if known is None and "" in jobs["kind"]:
        return f"jobs.kind[{jobs['kind'].index('')}] is '' (str), expected a job type"
    given = list(filter(partial(is_not, None), jobs["microbatch"]))  # in C: the range first, the index only if it is out
    lo, hi = min(given, default=0), max(given, default=0)
    bad = next((k for k, x in enumerate(jobs["microbatch"]) if x is not None and x < 0), None) if lo < 0 else None
    if bad is not None:
        return f"jobs.microbatch[{bad}] is {jobs['microbatch'][bad]}, expected 0 or more (or null)"
    m = sched["m"]
    if known is not None and hi >= m:  # a run's micro-batches are 0..m-1; an import keeps wrong ids as logged (with a warning)
        bad = next((k for k, x in enumerate(jobs["microbatch"]) if x is not None and x >= m), None)
        if bad is not None:
            return f"jobs.microbatch[{bad}] is {jobs['microbatch'][bad]}, expected 0 to {m - 1} (schedule.m is {m})"
    recorded = set(case["steps"])
    if not set(jobs["step"]) <= recorded:
        k = next(i for i, x in enumerate(jobs["step"]) if x not in recorded)
        return f"jobs.step[{k}] is {jobs['step'][k]}, which is not among the case's steps"
    if table is not None:
        hits = np.flatnonzero(table.end_ns < table.start_ns)
        bad = int(hits[0]) if len(hits) else None
    else:
        bad = _first_true(lambda a, b: b < a, jobs["start_ns"], jobs["end_ns"])
    if bad is not None:
        return f"jobs.end_ns[{bad}] ({jobs['end_ns'][bad]}) is before jobs.start_ns[{bad}] ({jobs['start_ns'][bad]})"
    steps = case["steps"]
    bad = next((k for k in range(1, len(steps)) if steps[k] <= steps[k - 1]), None)
    if bad is not None:
        return f"steps[{bad}] is {steps[bad]} after {steps[bad - 1]}; steps must increase"
    if table is None:
        from harness.report.jobtable import JobTable

        try:
            table = JobTable.from_case(case)
        except OverflowError:
            return _wide_int_problem(jobs)
    problem = _job_problem(case, table, known is None)
    if problem:
        return problem
    metrics = case.get("metrics")
    if not isinstance(metrics, dict):
        return f"metrics is {_show(metrics)}, expected an object"
    for key in ("step_time_median_ns", "step_time_iqr_ns", "bubble_ratio"):
        if key not in metrics:
            return f"metrics.{key} is missing, expected a number"
        problem = _value_problem(f"metrics.{key}", metrics[key], _is_number)
        if problem:
            return problem
    problem = _list_problem("metrics.peak_inflight", metrics.get("peak_inflight"), _is_int)
    if problem:
        return problem
    problem = metric_range_problem(case, metrics)
    if problem:
        return problem
    theory = case.get("theory")
    if theory is not None and not isinstance(theory, dict):
        return f"theory is {_show(theory)}, expected an object"
    theory = theory or {}
    # Optional fields: checked only where present.
    optional: list[tuple[str, Any, Callable[[str, Any, Callable[[Any], bool]], str | None], Callable[[Any], bool]]] = [
        *((f"metrics.{key}", metrics.get(key), _value_problem, _is_number)
          for key in ("step_time_min_ns", "step_time_max_ns", "bubble_over_ideal", "span_bubble_ratio")),
        ("theory.bubble_ratio", theory.get("bubble_ratio"), _value_problem, _is_number),
        ("theory.peak_inflight", theory.get("peak_inflight"), _list_problem, _is_int),
        ("outcome", case.get("outcome"), _value_problem, _is_str),
        ("warnings", case.get("warnings"), _list_problem, _is_str),
        ("assumptions", case.get("assumptions"), _list_problem, _is_str),
    ]
    for name, value, check, accept in optional:
        if value is not None:
            problem = check(name, value, accept)
            if problem:
                return problem
    problem = _minor_field_problem(case)
    if problem:
        return problem
    from harness.report.consistency import derived_figure_problem

    problem = derived_figure_problem(case)  # stored figures the case's own steps fix (a hand edit)
    if problem:
        return problem
    if case.get("outcome") is not None and case["outcome"] not in _OUTCOMES:
        return f"outcome is {_show(case['outcome'])}, expected one of {', '.join(sorted(_OUTCOMES))}"
    overlaps = case.get("overlaps")
    if overlaps is not None:
        if not isinstance(overlaps, list):
            return f"overlaps is {_show(overlaps)}, expected a list"
        n = len(jobs["kind"])
        for k, pair in enumerate(overlaps):
            if not (isinstance(pair, list) and len(pair) == 2 and all(_is_int(x) and 0 <= x < n for x in pair)):
                return f"overlaps[{k}] is {_show(pair)}, expected a pair of job indices"
    deps = case.get("deps")
    if deps is not None:
        if not isinstance(deps, list):
            return f"deps is {_show(deps)}, expected a list"
        if deps and _deps_fit(deps, jobs, table):  # the common case, in C loops; the loop below names what is wrong
            return None
        labels: set[str] | None = None
        for k, dep in enumerate(deps):
            if not (isinstance(dep, list) and len(dep) == 3 and all(_is_str(x) for x in dep) and dep[2] in ("end", "start")):
                return f"deps[{k}] is {_show(dep)}, expected [source job, target job, \"end\" or \"start\"]"
            if labels is None:  # made once, on the first dependency
                labels = {f"{a}{b}{'' if c is None else c}" for a, b, c in zip(jobs["stage"], jobs["kind"], jobs["microbatch"])}
            for label in dep[:2]:
                if label not in labels:
                    return f"deps[{k}] names job {label!r}, which is not among the case's jobs"
    return None

#: Optional case fields holding an object (``null`` stands for absent), and their typed keys.
_OBJECT_FIELDS = ("device", "cost", "options", "window", "fidelity", "usage")

#: ``usage``'s keys (:meth:`harness.run.environment.CaseUsage.to_dict`) and the checks they must pass.
_USAGE_KEYS: dict[str, Callable[[Any], bool]] = {
    "loadavg_before": lambda x: x is None or _is_number(x), "loadavg_after": lambda x: x is None or _is_number(x),
    "wall_ns": _is_int, "own_cores": _is_number, "other_cores": lambda x: x is None or _is_number(x),
    "cores": lambda x: _is_int(x) and x >= 0,
}

_USAGE_EXPECT = {"loadavg_before": "a number or null", "loadavg_after": "a number or null", "wall_ns": "an integer (ns)",
                 "own_cores": "a number (cores)", "other_cores": "a number (cores) or null", "cores": "a count (an integer, 0 or more)"}

def _minor_field_problem(case: dict[str, Any]) -> str | None:
    """The first minor field of the wrong type: ``label``, ``backend_reason`` and ``comm_model``
    (text where present; a ``null`` label is refused, as the page and compare show it), the
    optional objects (:data:`_OBJECT_FIELDS`), ``usage``'s typed keys, ``warmup_steps`` (an
    integer) and ``rank_labels`` (a list of texts)."""
    for key in ("label", "backend_reason", "comm_model"):
        if key in case and not _is_str(case[key]):
            return f"{key} is {_show(case[key])}, expected a string"
    if "comm_model" in case and case["comm_model"] not in _COMM_MODELS:
        return f"comm_model is {_show(case['comm_model'])}, expected one of {', '.join(_COMM_MODELS)}"
    if "warmup_steps" in case and not (_is_int(case["warmup_steps"]) and 0 <= case["warmup_steps"] < 2**31):
        return f"warmup_steps is {_show(case['warmup_steps'])}, expected a count (an integer, 0 or more)"
    for key in _OBJECT_FIELDS:
        value = case.get(key)
        if value is not None and not isinstance(value, dict):
            return f"{key} is {_show(value)}, expected an object"
    usage = case.get("usage") or {}
    for key, ok in _USAGE_KEYS.items():
        if key in usage and not ok(usage[key]):
            return f"usage.{key} is {_show(usage[key])}, expected {_USAGE_EXPECT[key]}"
    window = case.get("window") or {}
    for key, (ok, expect) in _WINDOW_KEYS.items():
        if key in window and not ok(window[key]):
            return f"window.{key} is {_show(window[key])}, expected {expect}"
    labels = case.get("rank_labels")
    if labels is not None:
        problem = _list_problem("rank_labels", labels, _is_str)
        if problem:
            return problem
        p = (case.get("schedule") or {}).get("p")
        if _is_int(p) and len(labels) != p:
            return f"rank_labels has {len(labels)} label(s), expected one per rank (schedule.p = {p})"
    return None

#: The communication models a case may name (:mod:`harness.model.comm`).
_COMM_MODELS = ("blocking", "edge", "free", "stream")

def _nonneg(x: Any) -> bool:
    return _is_number(x) and x >= 0

#: ``window``'s typed keys (:meth:`harness.records.WindowOutcome.to_dict`): check, and what is expected.
_WINDOW_KEYS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "reason": (_is_str, "a string"),
    "description": (_is_str, "a string"),
    "warmup_steps": (lambda x: _is_int(x) and x >= 0, "a count"),
    "recorded_steps": (lambda x: _is_int(x) and x >= 0, "a count"),
    "rel_err": (lambda x: x is None or _nonneg(x), "a number, 0 or more, or null"),
    "ci_reach": (lambda x: x is None or _nonneg(x), "a number, 0 or more, or null"),
    "target": (lambda x: x is None or _nonneg(x), "a number (a share, 0.01 = 1%) or null"),
    "min_steps": (lambda x: x is None or (_is_int(x) and x >= 0), "a count or null"),
    "max_steps": (lambda x: x is None or (_is_int(x) and x >= 0), "a count or null"),
    "max_time_ns": (lambda x: x is None or (_is_int(x) and x >= 0), "ns (an integer) or null"),
    "elapsed_ns": (lambda x: _is_int(x) and x >= 0, "ns (an integer, 0 or more)"),
}

def _job_problem(case: dict[str, Any], table: Any, imported_log: bool) -> str | None:
    """A job listed twice (same rank, step, kind, stage and micro-batch) or lying outside its step's
    span (:mod:`harness.records`), described with the rank, the job and its index; ``None`` when
    neither. A merged case (``device.clock_bound_ns``, :func:`harness.distributed.rank_merge.merge_parts`) may
    place a job up to that bound outside its step; an imported Paddle log (``imported_log``) keeps
    a repeated ``micro_batch_id`` as logged (the import warned about it), so it is not refused here."""
    from harness.records import first_duplicate, first_outside_step

    def job(i: int) -> str:
        return f"rank {int(table.rank[i])}'s job {table.labels[table.label[i]]} of step {int(table.step[i])} (jobs[{i}])"

    if not imported_log and not _step_labels_distinct(table):
        twice = first_duplicate(table.rank, table.step, table.label)
        if twice is not None:
            a, b = twice
            return (f"{job(b)} is listed twice (jobs[{a}] and jobs[{b}]); a step runs each job once, so the file is damaged "
                    "or was edited (two runs' jobs merged into one case?)")
    device = case.get("device")
    bound = device.get("clock_bound_ns") if isinstance(device, dict) else None
    if bound is not None and not (_is_int(bound) and bound >= 0):  # checked where it is used: it widens the span check
        return f"device.clock_bound_ns is {_show(bound)}, expected a whole number of ns, 0 or more (the merge's clock bound)"
    slack: int = bound if bound and case.get("backend") == "mpi" else 0
    outside = first_outside_step(table.step, table.start_ns, table.end_ns, case["steps"], case["step_start_ns"],
                                 case["step_end_ns"], slack)
    if outside is None:
        return None
    i, k = outside
    lo, hi = case["step_start_ns"][k], case["step_end_ns"][k]
    a, b = int(table.start_ns[i]), int(table.end_ns[i])
    when = (f"starts at {a:,} ns, before its step starts (step_start_ns[{k}] = {lo:,} ns)" if a < lo - slack
            else f"ends at {b:,} ns, after its step ends (step_end_ns[{k}] = {hi:,} ns)")
    allowed = f", by more than the merge's clock bound of {slack:,} ns (device.clock_bound_ns)" if slack else ""
    return f"{job(i)} {when}{allowed}; a step's span holds all its jobs, so the file is damaged or was edited"

def _step_labels_distinct(table: Any) -> bool:
    """Whether no two jobs of ``table`` (:class:`~harness.report.jobtable.JobTable`) share a step and
    a label, told by counting the (step, label) pairs in a table of at most about 4 entries per job
    instead of sorting; then no two share rank, step and label either, and
    :func:`harness.records.first_duplicate` has nothing to find. ``False`` where a pair repeats
    or the steps span too wide a range to count (then that sort decides)."""
    n, labels = table.n, len(table.label_kind)
    if n < 2:
        return True
    lo, hi = int(table.step.min()), int(table.step.max())
    if (hi - lo + 1) * labels > 4 * n + 4096:
        return False
    return int(np.bincount((table.step - lo) * labels + table.label).max()) <= 1

def _wide_int_problem(jobs: dict[str, Any]) -> str:
    """The first job column entry past 64 bits (the reports keep job columns as int64)."""
    lo, hi = -(2**63), 2**63 - 1
    for col in (*_INT_COLUMNS, "microbatch"):
        k = next((i for i, x in enumerate(jobs[col]) if type(x) is int and not lo <= x <= hi), None)
        if k is not None:
            return f"jobs.{col}[{k}] is {_show(jobs[col][k])}, expected an integer of 64 bits ({lo} to {hi})"
    return "a job column holds an integer past 64 bits"  # pragma: no cover - from_case overflows only on those columns

def _deps_fit(deps: list[Any], jobs: dict[str, Any], table: Any = None) -> bool:
    """Whether every dependency is ``[job text, job text, "end" | "start"]`` naming jobs of
    ``jobs``, checked without a Python call per dependency (job texts made once per distinct job;
    with ``table``, the case's :class:`~harness.report.jobtable.JobTable`, its label ids)."""
    from itertools import chain
    from operator import itemgetter

    if set(map(type, deps)) != {list} or set(map(len, deps)) != {3} or set(map(type, chain.from_iterable(deps))) != {str}:
        return False
    if not set(map(itemgetter(2), deps)) <= {"end", "start"}:
        return False
    if table is not None:
        src, dst, _ = table.dep_ids(deps)
        return bool((src >= 0).all() and (dst >= 0).all())
    labels = {f"{a}{b}{'' if c is None else c}" for a, b, c in set(zip(jobs["stage"], jobs["kind"], jobs["microbatch"]))}
    return set(map(itemgetter(0), deps)) <= labels and set(map(itemgetter(1), deps)) <= labels
def left_out_entry(case: Any, index: int, problem: str, message: str) -> dict[str, Any]:
    """How a case left out of a report is named: ``id`` and ``label`` (its id where it is a
    non-empty string, else ``"cases[index]"``) and ``error`` (the problem, with the case's position
    in the file), as ``session.errored_cases`` holds them; ``index`` (that position) and
    ``message`` (the error that refusing the whole file would have raised)."""
    cid = case.get("id") if isinstance(case, dict) else None
    name = cid if isinstance(cid, str) and cid else f"cases[{index}]"
    return {"id": name, "label": name, "error": f"cases[{index}] in the results file: {problem}", "index": index, "message": message}


def check_cases(doc: dict[str, Any], source: str = "results", tables: list[Any] | None = None,
                left_out: list[dict[str, Any]] | None = None) -> None:
    """Check every case of ``doc`` (see :func:`case_field_problem`).

    Args:
        doc: a results document.
        source: names the input in error messages.
        tables: where given, each case's jobs in columns are appended to it, in case order
            (:class:`harness.report.jobtable.JobTable`: the renderers use them).
        left_out: where given, a case with a problem (or an id an earlier case has) is removed
            from ``doc["cases"]`` and appended here
            (:func:`left_out_entry`, with ``duplicate``: whether its id
            repeats an earlier case's) instead of raising; ``tables`` then holds the kept cases'
            tables only.

    Raises:
        InputFormatError: (without ``left_out``) names ``source``, the case (by id and position)
            and the field.
    """
    from harness.errors import InputFormatError

    first: dict[str, int] = {}
    kept: list[dict[str, Any]] = []
    cases = doc["cases"]
    for i, case in enumerate(cases):
        had = None if tables is None else len(tables)
        problem = case_field_problem(case, tables)
        message = f"{source}: case {case.get('id')!r} (cases[{i}]): {problem}"
        duplicate = False
        if not problem:
            j = first.setdefault(case["id"], i)
            if j != i:
                again = (f"appears more than once (cases[{j}] and cases[{i}]); "
                         "reports and compare match cases by id, so each id must be unique")
                problem, message = f"its id {again}", f"{source}: case id {case['id']!r} {again}"
                duplicate = True
        if not problem:
            kept.append(case)
            continue
        if left_out is None:
            raise InputFormatError(message)
        left_out.append({**left_out_entry(case, i, problem, message), "duplicate": duplicate})
        if tables is not None and had is not None:
            del tables[had:]
    if len(kept) < len(cases):
        doc["cases"] = kept

def float_view(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` without what :func:`check_cases` found to hold no float: each case's integer and text job
    columns and its dependencies (shallow copies; ``doc`` is unchanged). Searching this view for NaN
    instead of ``doc`` finds the same fields, by the same paths, without the millions of job entries.
    Only for a document :func:`check_cases` passed."""
    plain = frozenset({*_INT_COLUMNS, "microbatch", "kind"})
    cases = [{**c, "jobs": {k: v for k, v in c["jobs"].items() if k not in plain}, "deps": []} if isinstance(c, dict) else c
             for c in doc.get("cases") or []]
    return {**doc, "cases": cases}
