"""Charts of the review page: step time and bubble against each swept dimension (inline SVG geometry).

Plain-number axis labels (never scientific notation), theory dashed, measured
with error bars (the min–max of the recorded steps).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from harness.report.dots import DOT_GAP, set_apart
from harness.report.identity import cost_label, isolated, model_key, model_labels

__all__ = ["SERIES_COLOURS", "chart_data", "cost_label", "sweep_chart", "sweep_charts", "tick_label", "time_axis", "value_label"]

SERIES_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _nice(hi: float) -> tuple[float, list[float]]:
    """A rounded axis top and 4-5 ticks for values in [0, hi]."""
    if hi <= 0:
        return 1.0, [0.0, 0.5, 1.0]
    step = 10 ** math.floor(math.log10(hi / 4))
    for f in (1, 2, 2.5, 5, 10):
        if hi / (f * step) <= 5:
            step *= f
            break
    top = step * math.ceil(hi / step)
    return top, [step * k for k in range(round(top / step) + 1)]


def _decimals(step: float) -> int:
    """Decimals needed to tell ticks ``step`` apart (0 for steps of 1 or more)."""
    if step <= 0:
        return 0
    for d in range(7):
        if abs(round(step * 10**d) - step * 10**d) < 1e-6 * max(1.0, step * 10**d):
            return d
    return 6


def time_axis(top_ms: float) -> tuple[float, str]:
    """``(divisor, unit)`` for a time axis whose top is ``top_ms``: ms up to
    10,000 ms, seconds above."""
    return (1000.0, "s") if top_ms >= 10_000 else (1.0, "ms")


def tick_label(value: float, step: float, unit: str) -> str:
    """A plain-number axis label: ``"1,000 ms"``, ``"2.5 s"``, ``"12.5%"`` - never
    scientific notation; as many decimals as the tick step needs."""
    d = _decimals(step)
    text = "0" if value == 0 else f"{value:,.{d}f}"
    return f"{text}%" if unit == "%" else f"{text} {unit}"


def value_label(value: float, unit: str) -> str:
    """A data point's label: 3 decimals below 10, plain thousands separators above."""
    d = 3 if abs(value) < 10 else 2 if abs(value) < 1000 else 1 if abs(value) < 10_000 else 0
    text = f"{value:,.{d}f}"
    return f"{text}%" if unit == "%" else f"{text} {unit}"


#: The dimensions a sweep can vary, with their axis titles.
DIMENSIONS = {"m": "m (micro-batches)", "v": "v (chunks per rank)", "p": "p (ranks)", "schedule": "schedule"}


def _key(case: dict[str, Any], dim: str) -> tuple[str, ...]:
    """What a series holds fixed: everything but ``dim`` (and, across schedules, v), the whole model
    included (:func:`harness.report.identity.model_key`: every cost field, option, memory limit,
    communication model and placement, backend and workload)."""
    s = case["schedule"]
    fixed = {"schedule": str(s["name"]), "p": str(s["p"]), "m": str(s["m"]), "v": str(s["v"])}
    fixed.pop(dim)
    if dim == "schedule":
        fixed.pop("v")
    return (*fixed.values(), model_key(case))


def _series_label(case: dict[str, Any], dim: str, model: str, comm: bool) -> str:
    """A series' legend text: what it holds fixed, its model (``model``: :func:`model_labels`), options,
    backend and workload, and (``comm``: where the page's cases differ in it) the communication model."""
    s = case["schedule"]
    workload = str((case.get("device") or {}).get("workload") or "")
    backend = case["backend"] + (f", {workload}" if workload else "") + (f", comm {case.get('comm_model') or 'stream'}" if comm else "")
    named = [part.split(" (", 1)[0] for part in model.split(" · ")]  # an option the model label names already is said once
    notes = [n for n in (f"{k}={v!r}" for k, v in sorted((case.get("options") or {}).items())) if n not in named] \
        if isinstance(case.get("options"), dict) else []
    parts = [] if dim == "schedule" else [str(s["name"])]
    parts += [f"{k}={s[k]}" for k in ("p", "m", "v") if k != dim and not (k == "v" and (dim == "schedule" or s["v"] == 1))]
    return " ".join(parts) + (f", {model}" if model else "") + "".join(f", {n}" for n in notes) + f" ({backend})"


def sweep_chart(cases: list[dict[str, Any]], dim: str = "m") -> dict[str, Any] | None:
    """SVG geometry of the step-time and bubble charts against one swept dimension.

    One series per group of cases equal in everything but ``dim``: schedule, p, m, v and the whole
    model (:func:`harness.report.identity.model_key`: every cost-model field, the options that change
    it, memory limit, communication model and placement, backend and workload; across schedules v may
    differ too). Two cases that differ in any of it are never one series, so never one dot. Against m,
    v and p a series needs two values of ``dim``; against schedule every series is drawn (dots only:
    schedules have no order) once one has two. Values sit evenly spaced, sorted (m, p and v are
    usually powers of 2: a log scale). Measured: a line with error bars from the fastest to the slowest
    recorded step (``step_time_min_ns`` .. ``step_time_max_ns``); theory dashed: the closed-form bubble,
    and for step time the cost model's exact step (``fidelity``) where the case has one. Series are
    shifted apart by a few pixels so equal values stay visible, and dots that would still overlap are
    set apart, sideways within their value's slot first (:func:`harness.report.dots.set_apart`), so
    every dot is whole and visible; cases of one series at one value of
    ``dim`` (the same case run twice under two ids, say) are all drawn, side by side, and the line
    goes through the first. A flagged case's dot (``flags``: unstable, contended, clocks, steps) is
    marked ``flagged`` (drawn hollow) and its tooltip names the flags. A dot's tooltip names its case
    and its series' model; user strings in it are isolated (U+2068/U+2069), so a right-to-left
    override cannot reverse the rest.

    Args:
        cases: results-document cases.
        dim: ``"m"``, ``"v"``, ``"p"`` or ``"schedule"``.

    Returns:
        ``None`` when no series has two values of ``dim``; else ``{"dim", "title", "w", "h",
        "left", "right", "top", "bottom", "xticks", "step", "bubble", "series", "flagged"}`` (pixels;
        ``flagged``: whether any dot is).

    Raises:
        ValueError: an unknown ``dim``.
    """
    if dim not in DIMENSIONS:
        raise ValueError(f"sweep chart: unknown dimension {dim!r}; choose one of {', '.join(DIMENSIONS)}")
    labels = dict(zip(map(id, cases), model_labels(cases)))
    comm = len({str(c.get("comm_model") or "stream") for c in cases}) > 1
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for c in cases:
        groups[_key(c, dim)].append(c)

    def value(c: dict[str, Any]) -> Any:
        return str(c["schedule"]["name"]) if dim == "schedule" else int(c["schedule"][dim])

    categorical = dim == "schedule"  # schedules have no order: dots and theory ticks, no lines between them
    if not any(len({value(c) for c in items}) >= 2 for items in groups.values()):
        return None
    series: list[dict[str, Any]] = []
    for _, items in sorted(groups.items()):
        by_x: dict[Any, list[dict[str, Any]]] = defaultdict(list)
        for c in items:
            by_x[value(c)].append(c)
        if len(by_x) < 2 and not categorical:
            continue
        pts = []
        for xv, at in sorted(by_x.items()):
            names = [str(c.get("label") or c["id"]) for c in at]
            for j, c in enumerate(at):
                m = c["metrics"]
                fid: dict[str, Any] = c["fidelity"] if isinstance(c.get("fidelity"), dict) else {}
                pts.append({"x": xv, "sub": j, "subs": len(at), "step_ms": m["step_time_median_ns"] / 1e6,
                            "lo_ms": (m.get("step_time_min_ns") or m["step_time_median_ns"]) / 1e6,
                            "hi_ms": (m.get("step_time_max_ns") or m["step_time_median_ns"]) / 1e6,
                            "bubble": m["bubble_ratio"], "bubble_th": (c.get("theory") or {}).get("bubble_ratio"),
                            "step_th": fid["predicted_step_ns"] / 1e6 if isinstance(fid.get("predicted_step_ns"), (int, float)) else None,
                            "flags": _flag_kinds(c), "case": names[j], "also": [n for i, n in enumerate(names) if i != j]})
        series.append({"label": _series_label(items[0], dim, labels[id(items[0])], comm), "points": pts,
                       "colour": SERIES_COLOURS[len(series) % len(SERIES_COLOURS)]})
    xs = sorted({pt["x"] for s in series for pt in s["points"]}, key=lambda v: (isinstance(v, str), v))
    width, height, left, right, top_pad, bottom_pad = 600, 300, 76, 16, 14, 40
    slot = (width - left - right) / max(1, len(xs))

    def x(pt: dict[str, Any], k: int) -> float:
        dodge = (k - (len(series) - 1) / 2) * min(5.0, slot / (2 * len(series)))
        side = (pt["sub"] - (pt["subs"] - 1) / 2) * min(7.0, slot / (3 * len(series) * pt["subs"]))  # cases at one value: side by side
        return left + slot * (xs.index(pt["x"]) + 0.5) + dodge + side

    def panel(key: str, lo_key: str | None, hi_key: str | None, th_key: str, top: float, ticks: list[float],
              scale: float, unit: str) -> dict[str, Any]:
        def y(val: float) -> float:
            return top_pad + (height - top_pad - bottom_pad) * (1 - val / top)

        step = ticks[1] - ticks[0] if len(ticks) > 1 else top
        # dots that would overlap are set apart (sideways within their value's slot first), so none hides another
        flat = [(k, pt) for k, s in enumerate(series) for pt in s["points"]]
        placed = set_apart([(x(pt, k), y(pt[key])) for k, pt in flat],
                           bands=[(left + slot * xs.index(pt["x"]) + DOT_GAP / 2, left + slot * (xs.index(pt["x"]) + 1) - DOT_GAP / 2)
                                  for _, pt in flat],
                           box=(left, top_pad, width - right, height - bottom_pad))
        at = {(k, id(pt)): xy for (k, pt), xy in zip(flat, placed)}
        lines = []
        for k, s in enumerate(series):
            first = [pt for pt in s["points"] if pt["sub"] == 0]  # the line goes through the first case at each value
            pts = [at[(k, id(pt))] for pt in s["points"]]
            path = [at[(k, id(pt))] for pt in first]
            theory = [(at[(k, id(pt))][0], y(pt[th_key])) for pt in first if pt[th_key] is not None]
            bars = [{"x": at[(k, id(pt))][0], "y0": y(pt[lo_key]), "y1": y(pt[hi_key])} for pt in s["points"]
                    if lo_key and hi_key and pt[hi_key] > pt[lo_key]]
            lines.append({"colour": s["colour"], "label": s["label"],
                          "path": "" if categorical else " ".join(f"{a:.1f},{b:.1f}" for a, b in path), "bars": bars,
                          "dots": [{"x": a, "y": b, "title": f"{isolated(pt['case'])} ({isolated(s['label'])}): {dim}={pt['x']}, "
                                    + value_label(pt[key] * scale, unit)
                                    + (f" (steps {value_label(pt[lo_key] * scale, unit)} to {value_label(pt[hi_key] * scale, unit)})"
                                       if lo_key and hi_key and pt[hi_key] > pt[lo_key] else "")
                                    + (f"; theory {value_label(pt[th_key] * scale, unit)}" if pt[th_key] is not None else "")
                                    + (f"; flagged {', '.join(pt['flags'])}: its figures may not repeat" if pt["flags"] else "")
                                    + (f"; drawn beside it, at the same {dim}: {', '.join(map(isolated, pt['also']))}" if pt["also"] else ""),
                                    "flagged": bool(pt["flags"])}
                                   for (a, b), pt in zip(pts, s["points"])],
                          "theory": "" if categorical else " ".join(f"{a:.1f},{b:.1f}" for a, b in theory),
                          "theory_ticks": [{"x": a, "y": b} for a, b in theory] if categorical else []})
        return {"lines": lines, "unit": unit,
                "yticks": [{"y": y(t), "label": tick_label(t * scale, step * scale, unit)} for t in ticks]}

    top_ms, ticks_ms = _nice(max(max(pt["hi_ms"], pt["step_th"] or 0) for s in series for pt in s["points"]))
    top_b, ticks_b = _nice(max(max(pt["bubble"], pt["bubble_th"] or 0) for s in series for pt in s["points"]))
    div, unit = time_axis(top_ms)
    return {
        "dim": dim, "title": DIMENSIONS[dim],
        "w": width, "h": height, "left": left, "right": width - right, "top": top_pad, "bottom": height - bottom_pad,
        "xticks": [{"x": left + slot * (i + 0.5), "label": str(v)} for i, v in enumerate(xs)],
        "step": panel("step_ms", "lo_ms", "hi_ms", "step_th", top_ms, ticks_ms, 1 / div, unit),
        "bubble": panel("bubble", None, None, "bubble_th", top_b, ticks_b, 100.0, "%"),
        "series": [{"label": s["label"], "colour": s["colour"]} for s in series],
        "flagged": any(pt["flags"] for s in series for pt in s["points"]),
    }


def _flag_kinds(case: dict[str, Any]) -> list[str]:
    """The kinds of ``case``'s flags (``unstable``, ``contended``, ``clocks``), each once, in order."""
    flags = case.get("flags")
    kinds = [str(f.get("kind")) for f in flags if isinstance(f, dict)] if isinstance(flags, list) else []
    return list(dict.fromkeys(kinds))


def chart_data(cases: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The charts against m (:func:`sweep_chart` with ``dim="m"``)."""
    return sweep_chart(cases, "m")


def sweep_charts(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One :func:`sweep_chart` per dimension the cases sweep (m, v, p, schedule), in that order."""
    return [c for c in (sweep_chart(cases, d) for d in DIMENSIONS) if c is not None]
