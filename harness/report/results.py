"""The results document: every case's schedule, records and metrics, versioned.

``results.json`` is one JSON object::

    {"schema": "pipeline-harness/results", "schema_version": 1,
     "created": ISO-8601, "harness_version": ..., "session": {...},
     "cases": [CASE, ...]}

and each CASE holds the schedule (per-rank job texts), the backend and its
metadata, the cost model, the cross-stream dependencies (as job texts), the
recorded jobs in columns (all times integers in ns on the run's time base),
per-step figures and the summary metrics beside their theoretical values.
Reports (trace, HTML, comparisons) are rendered from this document only.

Optional case fields, written by importers (:mod:`harness.imports.paddle`)
and ignored where absent: ``rank_labels`` (display name per rank, e.g.
``"machine1 GPU 0"``), ``warnings`` (human-readable notes naming file and
line), ``overlaps`` (``[earlier job, later job]`` index pairs of jobs that
overlap on one device). Readers must not require them. Likewise the job
column ``enqueue_ns`` (host time spent enqueueing each job, ns), written for
harness runs; the case field ``outcome`` (the pytest outcome of the test that
ran the case: ``passed``, ``failed``, ``error``, ``skipped``); the metric
``span_bubble_ratio`` (see :mod:`harness.analysis.metrics`); and, for harness runs:

* ``metrics.stats``: ``step_time_ns``, ``bubble_ratio`` and per rank
  ``busy_ns``/``idle_ns`` summaries (:class:`harness.stats.SampleStats`:
  median, mean, stdev, min, max, q1, q3, iqr, mad, the 95 % CI of the median
  ``ci_low``/``ci_high`` with its real coverage ``ci_level``, ``rel_err``,
  ``outliers`` as indices into the recorded steps);
* ``options``: the case's schedule-builder options with a scalar value
  (``{"overlap": false}``), where any is set;
* ``window``: why recording stopped (:class:`harness.records.WindowOutcome`);
* ``flags``: ``[{"kind": "unstable" | "contended" | "clocks" | "steps", "reason": ...}]`` (empty
  when the figures are to be trusted, :mod:`harness.run.stability`);
* ``usage``: load average before/after, this process's and other processes'
  CPU use in cores during the case (:mod:`harness.run.environment`);
* ``fidelity``: measured median step against the cost model's exact one, with
  the CI (:func:`harness.run.stability.fidelity`);
* ``memory``: per rank static bytes, peak bytes, peak activation bytes, when,
  the limit and whether it fits, and the timeline ``{"t_ns": [...], "bytes":
  [...]}`` per rank (:class:`harness.analysis.memory.MemoryProfile`), where the cost
  model models memory;
* ``decomposition``: the median step split into ideal, imbalance,
  recomputation, communication and schedule bubble, ns (:mod:`harness.analysis.bubble`);
* ``recompute``: ``[[stage, kind, ns], ...]``, the recomputation part of
  each backward's duration;
* ``critical_path``: the median step's chain of jobs that fixes its length, with
  the gaps before each, ns (:class:`harness.analysis.critical_path.CriticalPath`);
* ``waiting``: per rank, that step's idle time split by what it waited for
  (:class:`harness.analysis.critical_path.RankWaiting`);
* ``assumptions``: a list of short sentences, each naming a modelling assumption that moves the
  case's figures (overlap model, TP/SP degree, attention FLOPs counted or not, recomputation cost,
  comm model and placement, per-chunk durations; :mod:`harness.analysis.assumptions`). Absent in
  files written before it existed and in imports of other tools' records: not recorded, which says
  nothing about what the figures assumed.

The session holds ``environment`` (:func:`harness.run.environment.machine_facts`), and
``errored_cases``: cases that ran but could not be reported (``id``, ``label``,
``error``); they are not among ``cases``; and ``not_run_cases``: cases that never produced a run
(``id``, ``label``, ``site``, ``kind``, ``error``; :mod:`harness.report.not_run`).

Format history:
    1 - first version.
"""

from __future__ import annotations

import json
import math
import platform
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.analysis.metrics import metrics_to_dict
from harness.analysis.result import CaseResult
from harness.errors import HarnessError, InputFormatError
from harness.plan.build import build_plan
from harness.report.fields import left_out_entry

__all__ = [
    "SCHEMA", "SCHEMA_VERSION", "case_to_dict", "every_case_damaged", "left_out_entry", "load_results", "reportable_case",
    "results_document", "unreportable",
]

SCHEMA = "pipeline-harness/results"
SCHEMA_VERSION = 1
JOB_COLUMNS = ("rank", "stream", "stage", "kind", "microbatch", "chunk", "step", "start_ns", "end_ns")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("pipeline-harness")
    except Exception:
        return "unknown"


def _dependency_rows(plan: Any) -> list[list[str]]:
    """``[from, to, "end" | "start"]`` per dependency of ``plan``: per job in plan order, its end
    dependencies, then its start dependencies (from the CSR columns, no loop per job)."""
    import numpy as np

    a = plan.arrays
    n = plan.num_jobs
    if not n:
        return []
    from harness.records import KINDS
    from harness.report.jobtable import label_texts

    labels = np.array(label_texts(a.stage.tolist(), a.kind.tolist(), a.microbatch.tolist(), list(KINDS)), dtype=object)
    dst_end = np.repeat(np.arange(n, dtype=np.int64), np.diff(a.deps_ptr))
    dst_start = np.repeat(np.arange(n, dtype=np.int64), np.diff(a.start_ptr))
    src = np.concatenate((a.deps_idx, a.start_idx)).astype(np.int64)
    dst = np.concatenate((dst_end, dst_start))
    kind = np.concatenate((np.zeros(len(dst_end), np.int8), np.ones(len(dst_start), np.int8)))
    order = np.lexsort((kind, dst))  # per job, its end dependencies first (stable: in their given order)
    names = np.array(["end", "start"], dtype=object)
    return list(map(list, zip(labels[src[order]].tolist(), labels[dst[order]].tolist(), names[kind[order]].tolist())))


def case_to_dict(result: CaseResult) -> dict[str, Any]:
    """Serialize one case result (see module doc for the layout)."""
    rec = result.records
    schedule = result.schedule
    jc = rec.columns
    # the columns' stream table starts with the records' streams; a job on any other stream has no track
    if len(jc.streams) != len(rec.streams):
        extra = next(i for i, name in enumerate(jc.streams) if i >= len(rec.streams) or name != rec.streams[i])
        raise KeyError(jc.streams[extra])
    cols: dict[str, list[Any]] = {
        "rank": jc.rank.tolist(), "stream": jc.stream.tolist(), "stage": jc.stage.tolist(), "kind": jc.kind_tokens().tolist(),
        "microbatch": jc.microbatch_list(), "chunk": jc.chunk.tolist(), "step": jc.step.tolist(),
        "start_ns": jc.start_ns.tolist(), "end_ns": jc.end_ns.tolist(), "enqueue_ns": jc.enqueue_ns.tolist(),
    }
    plan = result.plan if result.plan is not None else build_plan(schedule)
    deps = _dependency_rows(plan)
    m = result.metrics
    return {
        "id": result.case_id,
        "label": result.label,
        "schedule": {
            "name": schedule.name,
            "p": schedule.num_ranks,
            "m": schedule.num_microbatches,
            "v": schedule.chunks_per_rank,
            "stage_to_rank": list(schedule.stage_to_rank),
            "ranks": schedule.to_text(),
            "params": {k: v for k, v in schedule.params.items() if isinstance(v, (int, float, str, bool))},
        },
        "backend": rec.backend,
        "backend_reason": result.backend_reason,
        "comm_model": result.comm_model,
        "device": rec.device,
        "cost": result.cost,
        **({"options": dict(result.options)} if result.options else {}),
        "streams": rec.streams,
        "warmup_steps": rec.warmup_steps,
        "steps": rec.steps,
        "step_start_ns": rec.step_start_ns,
        "step_end_ns": rec.step_end_ns,
        "enqueue_ns": rec.enqueue_ns,
        "deps": deps,
        "jobs": cols,
        "metrics": metrics_to_dict(m),
        "theory": result.theory,
        **({"window": rec.window.to_dict()} if rec.window is not None else {}),
        "flags": [f.to_dict() for f in result.flags],
        **({"usage": result.usage.to_dict()} if result.usage is not None else {}),
        **({"fidelity": result.fidelity} if result.fidelity is not None else {}),
        **({"memory": result.memory.to_dict()} if result.memory is not None else {}),
        **({"decomposition": result.decomposition.to_dict()} if result.decomposition is not None else {}),
        **({"recompute": _recompute_table(result)} if _recompute_table(result) else {}),
        **({"critical_path": result.critical_path.to_dict()} if result.critical_path is not None else {}),
        **({"waiting": [w.to_dict() for w in result.waiting]} if result.waiting else {}),
        **({"outcome": result.outcome} if result.outcome else {}),
        # mpi runs name each rank with its host (harness.distributed.rank_merge), for the trace's process names
        **({"rank_labels": [str(x) for x in rec.device["rank_labels"]]} if isinstance(rec.device.get("rank_labels"), list) else {}),
        **({"warnings": list(result.warnings)} if result.warnings else {}),
        **({"assumptions": list(result.assumptions)} if result.assumptions is not None else {}),
    }


def _recompute_table(result: CaseResult) -> list[list[Any]]:
    """``[[stage, kind, ns], ...]``: per stage and backward kind, the part of its duration that
    recomputes the forward (for the traces' ``recompute`` sub-slices); empty without recomputation."""
    plan = result.plan
    cost = getattr(result, "cost_model", None)
    if plan is None or cost is None or not callable(getattr(cost, "recompute_time_ns", None)):
        return []
    from harness.schedule.model import Job, JobKind

    n = plan.schedule.num_stages
    out = []
    for stage in range(n):
        for kind in (JobKind.B, JobKind.I):
            ns = int(cost.recompute_time_ns(Job(stage, kind, 0), n))
            if ns > 0:
                out.append([stage, kind.value, ns])
    return out


def results_document(cases: list[dict[str, Any]], session: dict[str, Any] | None = None) -> dict[str, Any]:
    """Wrap serialized cases into a versioned results document."""
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "harness_version": _version(),
        "session": {"python": sys.version.split()[0], "platform": platform.platform(), **(session or {})},
        "cases": cases,
    }


_CASE_KEYS = ("id", "schedule", "backend", "streams", "steps", "step_start_ns", "step_end_ns", "jobs", "metrics")


def validate_document(doc: Any, source: str = "results", left_out: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Check a parsed results document's schema and shape.

    Args:
        doc: the parsed document.
        source: names the input in error messages.
        left_out: where given, a case with a problem is removed from ``doc["cases"]`` and
            appended here (:func:`left_out_entry`) instead of raising.

    Raises:
        InputFormatError: not a results document, an unknown schema version,
            or (without ``left_out``) a case missing fields or with columns of unequal
            length (names ``source`` and the case).
    """
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise InputFormatError(f"{source}: not a pipeline-harness results file (no \"schema\": \"{SCHEMA}\")")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise InputFormatError(
            f"{source}: results schema version {version!r} is not supported by this harness "
            f"(it reads version {SCHEMA_VERSION}); re-run the cases or use a matching harness version"
        )
    cases = doc.get("cases")
    if not isinstance(cases, list):
        raise InputFormatError(f"{source}: \"cases\" must be a list")
    kept: list[Any] = []
    for i, case in enumerate(cases):
        problem = _shape_problem(case) or _metrics_problem(case)
        if problem is None:
            kept.append(case)
            continue
        where = f"case {case.get('id')!r} (cases[{i}])" if isinstance(case, dict) else f"cases[{i}]"
        message = f"{source}: {where}: {problem}"
        if left_out is None:
            raise InputFormatError(message)
        left_out.append(left_out_entry(case, i, problem, message))
    if len(kept) < len(cases):
        doc["cases"] = kept
    return doc




def every_case_damaged(left_out: list[dict[str, Any]]) -> InputFormatError:
    """The error for a document whose every case was left out (``left_out``: the entries of
    :func:`left_out_entry`, not empty): the first case's, in file order, and how many more."""
    first = min(left_out, key=lambda e: e["index"])
    more = f" (and {len(left_out) - 1} more damaged case(s))" if len(left_out) > 1 else ""
    return InputFormatError(first["message"] + more)


def _shape_problem(case: Any) -> str | None:
    """What makes ``case`` no case of a results document: not an object, a missing field,
    job columns missing or of unequal length; ``None`` if none."""
    if not isinstance(case, dict):
        return "not an object"
    missing = [k for k in _CASE_KEYS if k not in case]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    jobs = case["jobs"]
    if not isinstance(jobs, dict) or any(c not in jobs for c in JOB_COLUMNS):
        return f"\"jobs\" must have the columns {', '.join(JOB_COLUMNS)}"
    wrong = next((c for c in JOB_COLUMNS if not isinstance(jobs[c], list)), None)
    if wrong is not None:
        return f"jobs.{wrong} is {type(jobs[wrong]).__name__}, expected a list"
    lengths = {len(jobs[c]) for c in JOB_COLUMNS}
    if len(lengths) != 1:
        return f"job columns have different lengths {sorted(lengths)}"
    return None


#: Fields each ``metrics.per_step`` entry must hold (the renderers read them).
_PER_STEP_KEYS = ("step", "step_time_ns", "busy_ns", "idle_ns", "bubble_ratio")


def _show_number(x: int | float) -> str:
    if type(x) is int:
        return f"an integer of {len(str(abs(x)))} digits"
    return repr(x)


def _not_finite(name: str, value: Any) -> str | None:
    """A problem text when ``value`` (anywhere inside lists/objects) is a
    non-finite float or an integer too large for a float; ``None`` otherwise.
    Other types are left to :func:`harness.report.fields.check_cases`."""
    if type(value) is float:
        if not math.isfinite(value):
            return f"{name} must be a finite number, not {value!r}"
    elif type(value) is int and value.bit_length() > 1000:
        try:
            float(value)
        except OverflowError:  # too large for a float; most JSON readers cannot take it
            return f"{name} must be a finite number, not {_show_number(value)} (too large)"
    elif isinstance(value, list):
        for k, x in enumerate(value):
            problem = _not_finite(f"{name}[{k}]", x)
            if problem:
                return problem
    elif isinstance(value, dict):
        for key, x in value.items():
            problem = _not_finite(f"{name}.{key}", x)
            if problem:
                return problem
    return None


def _metrics_problem(case: dict[str, Any]) -> str | None:
    """The first non-finite number in ``metrics``/``theory``, or the first
    ``metrics.per_step`` entry missing a field or holding a wrong-typed one."""
    metrics = case.get("metrics")
    if not isinstance(metrics, dict):
        return None  # check_cases names it
    for name in ("metrics", "theory"):
        value = case.get(name)
        if isinstance(value, dict):
            problem = _not_finite(name, value)
            if problem:
                return problem
    per_step = metrics.get("per_step")
    if per_step is None:
        return None
    if not isinstance(per_step, list):
        return f"metrics.per_step is {type(per_step).__name__}, expected a list"
    for k, entry in enumerate(per_step):
        where = f"metrics.per_step[{k}]"
        if not isinstance(entry, dict):
            return f"{where} is {type(entry).__name__}, expected an object"
        missing = [key for key in _PER_STEP_KEYS if key not in entry]
        if missing:
            return f"{where} is missing field(s) {', '.join(missing)}"
        if type(entry["step"]) is not int:
            return f"{where}.step is {entry['step']!r}, expected an integer"
        for key in ("step_time_ns", "bubble_ratio"):
            if type(entry[key]) not in (int, float):
                return f"{where}.{key} is {entry[key]!r}, expected a number"
        for key in ("busy_ns", "idle_ns"):
            value = entry[key]
            if not isinstance(value, list) or not all(type(x) in (int, float) for x in value):
                return f"{where}.{key} is {value!r:.40}, expected a list of numbers"
    return None


def unreportable(case: dict[str, Any]) -> str | None:
    """Why the serialized ``case`` cannot go into a report (the first non-finite metric,
    wrong-typed field or contradicting time, as :func:`validate_document` and
    :func:`harness.report.fields.check_cases` would refuse the whole document for), or ``None``."""
    from harness.report.fields import case_field_problem

    try:
        validate_document(results_document([case]), "results")
    except InputFormatError as exc:
        message, cid = str(exc), case.get("id")
        for prefix in (f"results: case #0 ({cid!r}): ", f"results: case {cid!r} (#0): "):  # the case is named apart
            message = message.removeprefix(prefix)
        return message
    return case_field_problem(case)


def reportable_case(result: CaseResult) -> tuple[dict[str, Any] | None, str | None]:
    """``result`` as a results-document case, or why it cannot go into a report.

    Returns:
        ``(case, None)``, or ``(None, problem)`` when serializing its records failed (e.g. a job that
        ends before it starts, from a backend or cost model at fault) or the case would fail the
        document's checks (:func:`unreportable`). Never raises for a case at fault, so one bad case
        never costs the others their report.
    """
    try:
        case = case_to_dict(result)
        problem = unreportable(case)
    except (HarnessError, KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
        return None, f"could not serialize its records ({type(exc).__name__}: {exc})"
    return (None, problem) if problem else (case, None)


def load_results(path: Path, left_out: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Read and validate a results file.

    Args:
        path: the file.
        left_out: where given, damaged cases are left out of the document and listed
            here instead of raising (see :func:`validate_document`).

    Raises:
        InputFormatError: unreadable file, invalid JSON (with line and column),
            a string holding a lone surrogate escape (``"\\ud800"``; names where),
            or see :func:`validate_document`.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputFormatError(f"{path}: cannot read results file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputFormatError(
            f"{path}: cannot read results file: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
            "results files are UTF-8 JSON"
        ) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFormatError(f"{path}: line {exc.lineno}, column {exc.colno}: invalid JSON ({exc.msg}); is the file truncated?") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise InputFormatError(f"{path}: invalid JSON ({exc})") from None
    if _SURROGATE_ESCAPE.search(text):  # a "\ud800" escape: valid JSON, but no valid text once decoded
        from harness.text import first_surrogate

        bad = first_surrogate(doc, "")
        if bad:
            raise InputFormatError(
                f"{path}: {bad} holds a lone surrogate (a \\uD800..\\uDFFF escape that is not half of a pair), which is not "
                "valid Unicode text and cannot be written to a report; fix that string in the file"
            )
    return validate_document(doc, str(path), left_out)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
