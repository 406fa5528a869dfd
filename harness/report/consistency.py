"""Stored figures that a case's own steps and per-step figures fix, checked against them.

A results file is plain JSON: a hand edit (or a damaged merge of files) can leave a figure
that the page and ``compare`` would show as measured although the case's own records say
otherwise. :func:`derived_figure_problem` recomputes what follows from the stored steps and
per-step figures without reading the jobs (a few operations per step, whatever the case's
size), the same way :func:`harness.analysis.metrics.compute_metrics` derived them:

* ``metrics.per_step`` holds one entry per recorded step;
* per step: ``busy_ns[r] + idle_ns[r]`` is the step time (each rank's idle time is the step
  less the union of its compute jobs), and ``bubble_ratio`` is ``sum(idle_ns) / (p x
  step_time_ns)``, the idle share of total;
* the case's ``metrics.bubble_ratio`` is the median of the per-step ones, and
  ``metrics.step_time_median_ns`` the median of the recorded steps' durations
  (``step_end_ns - step_start_ns``); ``metrics.stats.step_time_ns`` holds the same median
  inside its confidence interval;
* ``fidelity.change`` is the median step against ``fidelity.predicted_step_ns``, inside its
  own interval where it has one (:func:`harness.run.stability.fidelity`);
* ``decomposition``'s parts add up to its ``step_ns`` (:mod:`harness.analysis.bubble`);
* ``critical_path.length_ns`` is the duration of its step (:mod:`harness.analysis.critical_path`).

Only what every version of the harness has written so is checked: earlier versions stored a
decomposition's ``step_ns`` as the median of two middle steps, a critical path's ``busy_ns`` past
its length, and flagged no single step, so none of those is held against a file. The stored
figures here must be numbers a float holds (an integer of hundreds of digits is named).

Figures that only the jobs fix (a per-step busy time against the jobs' intervals) are not
recomputed here: that would cost a pass over every job of a million-job case.
"""

from __future__ import annotations

import statistics
from typing import Any

__all__ = ["derived_figure_problem"]

#: Slack for figures stored as floats (a ratio of two ns sums), relative.
_RATIO_SLACK = 1e-9
#: Slack for stored ns figures that a median of two steps can make a half, ns.
_NS_SLACK = 1


def _number(x: Any) -> bool:
    return type(x) is float or (type(x) is int and x.bit_length() <= 63)


def _steps(steps: list[Any]) -> str:
    """A list of step numbers for a message, cut after 8."""
    shown = ", ".join(map(str, steps[:8])) + (f", ... ({len(steps) - 8} more)" if len(steps) > 8 else "")
    return f"[{shown}]"


def _too_large(name: str, value: Any) -> str | None:
    """A problem text for an integer figure past 64 bits (no float arithmetic takes it), else ``None``."""
    if type(value) is int and value.bit_length() > 63:
        return f"{name} is an integer of {len(str(abs(value)))} digits, expected a number of ns or a ratio that fits 64 bits"
    return None


def _ns(x: float) -> str:
    """A figure in ns as text: whole ns without a fraction (a median of two steps can end in .5)."""
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.1f}"


def derived_figure_problem(case: dict[str, Any]) -> str | None:
    """The first stored figure of ``case`` that contradicts its steps or per-step figures (see the
    module doc), described with what they give; ``None`` when all agree, or where a figure is absent.

    Args:
        case: a results-document case whose fields have their types and ranges
            (:func:`harness.report.fields.case_field_problem` checks them first).
    """
    metrics = case["metrics"]
    for name, fields in (("fidelity", case.get("fidelity")), ("decomposition", case.get("decomposition")),
                         ("critical_path", case.get("critical_path"))):
        for key, value in fields.items() if isinstance(fields, dict) else ():
            problem = _too_large(f"{name}.{key}", value)
            if problem:
                return problem
    spans = {s: b - a for s, a, b in zip(case["steps"], case["step_start_ns"], case["step_end_ns"])}
    edited = "; was the file edited?"
    per_step = metrics.get("per_step")
    if isinstance(per_step, list):  # one entry per recorded step, each once (a missing one hid the checks below)
        listed = [e.get("step") for e in per_step if isinstance(e, dict)]
        if sorted(listed, key=str) != sorted(case["steps"], key=str):
            return (f"metrics.per_step lists steps {_steps(listed)}, but the case recorded {_steps(case['steps'])}: "
                    f"expected one entry per recorded step{edited}")
    ratios: list[float] = []
    for k, entry in enumerate(per_step if isinstance(per_step, list) else []):
        busy, idle, time, ratio = (entry.get(key) for key in ("busy_ns", "idle_ns", "step_time_ns", "bubble_ratio"))
        if not (isinstance(busy, list) and isinstance(idle, list) and _number(time) and _number(ratio)) or not idle:
            return None  # an older or partial layout: nothing to hold the figures against
        where = f"metrics.per_step[{k}]"
        bad = next((r for r, (b, i) in enumerate(zip(busy, idle)) if abs(b + i - time) > _NS_SLACK), None)
        if bad is not None:
            return (f"{where}: rank {bad}'s busy_ns ({busy[bad]!r}) and idle_ns ({idle[bad]!r}) add up to "
                    f"{busy[bad] + idle[bad]!r}, not the step time ({time!r} ns){edited}")
        if time > 0:
            share = sum(idle) / (len(idle) * time)
            if abs(ratio - share) > _RATIO_SLACK:
                return (f"{where}.bubble_ratio is {ratio!r}, but its idle times give {share:.6g} "
                        f"(sum(idle_ns) / (p x step_time_ns)){edited}")
        ratios.append(ratio)
    if ratios and len(ratios) == len(spans):
        median = statistics.median(ratios)
        if abs(metrics["bubble_ratio"] - median) > _RATIO_SLACK:
            return (f"metrics.bubble_ratio is {metrics['bubble_ratio']!r}, but the median of metrics.per_step's bubble "
                    f"ratios is {median:.6g}{edited}")
    if spans:
        median_ns = statistics.median(spans.values())
        if abs(metrics["step_time_median_ns"] - median_ns) > _NS_SLACK:
            return (f"metrics.step_time_median_ns is {metrics['step_time_median_ns']!r}, but the median of the case's "
                    f"{len(spans)} step(s) (step_end_ns - step_start_ns) is {_ns(median_ns)} ns{edited}")
    stats = metrics.get("stats")
    step_stats = stats.get("step_time_ns") if isinstance(stats, dict) else None
    if isinstance(step_stats, dict) and all(_number(step_stats.get(k)) for k in ("median", "ci_low", "ci_high")):
        lo, med, hi = step_stats["ci_low"], step_stats["median"], step_stats["ci_high"]
        if abs(med - metrics["step_time_median_ns"]) > _NS_SLACK:
            return f"metrics.stats.step_time_ns.median is {med!r}, not metrics.step_time_median_ns ({metrics['step_time_median_ns']!r}){edited}"
        if not lo <= med <= hi:
            return f"metrics.stats.step_time_ns: the median {med!r} lies outside its interval ({lo!r} to {hi!r}){edited}"
    problem = _fidelity_problem(case.get("fidelity"), metrics["step_time_median_ns"])
    if problem:
        return problem + edited
    problem = _decomposition_problem(case.get("decomposition"), spans)
    if problem:
        return problem + edited
    problem = _critical_path_problem(case.get("critical_path"), spans)
    return problem + edited if problem else None


def _fidelity_problem(fid: Any, median_ns: float) -> str | None:
    if not isinstance(fid, dict) or not (_number(fid.get("change")) and _number(fid.get("predicted_step_ns"))):
        return None
    change, predicted = fid["change"], fid["predicted_step_ns"]
    if predicted <= 0:
        return f"fidelity.predicted_step_ns is {predicted!r}, expected a positive step time (ns)"
    expect = median_ns / predicted - 1
    if abs(change - expect) > _RATIO_SLACK * max(1.0, abs(expect)):
        return (f"fidelity.change is {change!r}, but the median step ({_ns(median_ns)} ns) against fidelity.predicted_step_ns "
                f"({predicted!r} ns) gives {expect:.6g}")
    lo: Any = fid.get("ci_low")
    hi: Any = fid.get("ci_high")
    if _number(lo) and _number(hi) and not lo - _RATIO_SLACK <= change <= hi + _RATIO_SLACK:
        return f"fidelity.change ({change!r}) lies outside its own interval (fidelity.ci_low {lo!r} to ci_high {hi!r})"
    return None


_PARTS = ("ideal_ns", "imbalance_ns", "recompute_ns", "comm_ns", "schedule_ns")


def _decomposition_problem(d: Any, spans: dict[int, int]) -> str | None:
    if not isinstance(d, dict) or not all(_number(d.get(k)) for k in (*_PARTS, "step_ns")):
        return None
    total = sum(d[k] for k in _PARTS)
    if abs(total - d["step_ns"]) > len(_PARTS) * _NS_SLACK:
        return f"decomposition: its parts ({', '.join(_PARTS)}) add up to {_ns(total)} ns, not its step_ns ({d['step_ns']!r})"
    return None


def _critical_path_problem(cp: Any, spans: dict[int, int]) -> str | None:
    if not isinstance(cp, dict) or type(cp.get("step")) is not int or not _number(cp.get("length_ns")):
        return None
    step, length = cp["step"], cp["length_ns"]
    if step not in spans:
        return f"critical_path.step is {step}, which is not among the case's steps"
    if abs(length - spans[step]) > _NS_SLACK:
        return f"critical_path.length_ns is {length!r}, but step {step} lasts {spans[step]} ns (step_end_ns - step_start_ns)"
    return None


def metric_range_problem(case: dict[str, Any], metrics: dict[str, Any]) -> str | None:
    """Stored metrics that contradict the case's own steps or their ranges: a step time
    outside the steps' durations (``step_end_ns - step_start_ns``), a bubble share
    outside 0..1, a negative spread, ratio or peak."""
    steps = case["steps"]
    spans = [b - a for a, b in zip(case["step_start_ns"], case["step_end_ns"])]
    if spans:
        lo, hi = min(spans), max(spans)
        for key in ("step_time_median_ns", "step_time_min_ns", "step_time_max_ns"):
            value: Any = metrics.get(key)
            if type(value) in (int, float) and not lo <= value <= hi:
                return (f"metrics.{key} is {value!r}, but the case's steps last {lo} to {hi} ns "
                        "(step_end_ns - step_start_ns); was the file edited?")
    for key in ("bubble_ratio", "span_bubble_ratio"):
        value = metrics.get(key)
        if type(value) in (int, float) and not 0 <= value <= 1:
            return f"metrics.{key} is {value!r}, expected 0 to 1 (a share of the time)"
    for key in ("step_time_iqr_ns", "bubble_over_ideal", "enqueue_ns_per_job"):
        value = metrics.get(key)
        if type(value) in (int, float) and value < 0:
            return f"metrics.{key} is {value!r}, expected 0 or more"
    bad = next((k for k, x in enumerate(metrics["peak_inflight"]) if x < 0), None)
    if bad is not None:
        return f"metrics.peak_inflight[{bad}] is {metrics['peak_inflight'][bad]}, expected 0 or more"
    lo_hi: list[Any] = [metrics.get(k) for k in ("step_time_min_ns", "step_time_median_ns", "step_time_max_ns")]
    if all(type(x) in (int, float) for x in lo_hi) and not lo_hi[0] <= lo_hi[1] <= lo_hi[2]:
        return f"metrics.step_time_min_ns, _median_ns and _max_ns are {lo_hi[0]!r}, {lo_hi[1]!r} and {lo_hi[2]!r}; expected min <= median <= max"
    return per_step_problem(case, metrics.get("per_step"), dict(zip(steps, spans)))

def per_step_problem(case: dict[str, Any], per_step: Any, span_of: dict[int, int]) -> str | None:
    """``metrics.per_step`` entries that contradict the case's steps: an unknown step, a step time other
    than that step's duration, a bubble share outside 0..1, busy/idle lists not of one entry per rank
    within 0..step time. Entries of the wrong shape are left to :func:`harness.report.results.load_results`."""
    if not isinstance(per_step, list):
        return None
    p = case["schedule"]["p"]
    for k, entry in enumerate(per_step):
        if not isinstance(entry, dict) or type(entry.get("step")) is not int or type(entry.get("step_time_ns")) not in (int, float):
            continue
        where = f"metrics.per_step[{k}]"
        step, time = entry["step"], entry["step_time_ns"]
        if step not in span_of:
            return f"{where}.step is {step}, which is not among the case's steps"
        if abs(time - span_of[step]) > 1:
            return f"{where}.step_time_ns is {time!r}, but step {step} lasts {span_of[step]} ns (step_end_ns - step_start_ns)"
        ratio: Any = entry.get("bubble_ratio")
        if type(ratio) in (int, float) and not 0 <= ratio <= 1:
            return f"{where}.bubble_ratio is {ratio!r}, expected 0 to 1 (a share of the step)"
        for key in ("busy_ns", "idle_ns"):
            values = entry.get(key)
            if not isinstance(values, list) or not all(type(x) in (int, float) for x in values):
                continue
            if len(values) != p:
                return f"{where}.{key} has {len(values)} entries, expected one per rank ({p})"
            bad = next((r for r, x in enumerate(values) if not -1 <= x <= time + 1), None)
            if bad is not None:
                return f"{where}.{key}[{bad}] is {values[bad]!r}, expected 0 to the step time ({time!r} ns)"
    return None
