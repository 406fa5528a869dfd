"""The side-by-side view's chart of every case: median step time against peak memory, the limit drawn.

One dot per case that models memory: x its largest peak over ranks (GiB: static plus live activations,
:mod:`harness.analysis.memory`), y its median step time; a case over its memory limit is drawn red.
Each memory limit the cases have is a dashed vertical line. Dots that would overlap are set apart
(:func:`harness.report.dots.set_apart`), so every case is whole and visible; each dot's tooltip names its case (isolated,
U+2068/U+2069) and model, and a click puts it in the comparison below. Cases without a memory model
are named under the chart, not drawn.
"""

from __future__ import annotations

import math
from typing import Any

from harness.report.charts import _nice, tick_label, time_axis, value_label
from harness.report.dots import DOT_GAP, set_apart
from harness.report.identity import isolated

__all__ = ["step_memory_chart"]

_GIB = 2**30


def step_memory_chart(cases: list[dict[str, Any]], labels: list[str]) -> dict[str, Any] | None:
    """SVG geometry of the chart (module doc), or ``None`` when no case models memory.

    Args:
        cases: results-document cases.
        labels: per case, its model (:func:`harness.report.identity.model_labels`).

    Returns:
        ``{"w", "h", "left", "right", "top", "bottom", "xticks", "yticks", "dots", "limits",
        "not_drawn"}``: pixels; each dot ``{"x", "y", "k", "over", "title"}`` (``k``: the case's index);
        each limit ``{"x", "label"}``; ``not_drawn``: the labels of the cases without memory.
    """
    width, height, left, right, top_pad, bottom_pad = 640, 320, 76, 24, 16, 44
    points, not_drawn = [], []
    for k, c in enumerate(cases):
        mem = c.get("memory")
        name = str(c.get("label") or c["id"])
        if not isinstance(mem, dict) or not mem.get("peak_bytes"):
            not_drawn.append(name)
            continue
        limit = mem.get("limit_bytes") if isinstance(mem.get("limit_bytes"), int) else None
        peak = max(int(b) for b in mem["peak_bytes"])
        points.append({"k": k, "name": name, "gib": peak / _GIB, "ms": c["metrics"]["step_time_median_ns"] / 1e6,
                       "limit": limit, "over": mem.get("fits") is False or (limit is not None and peak > limit)})
    if not points:
        return None
    limits = sorted({p["limit"] for p in points if p["limit"] is not None})
    top_x, ticks_x = _nice(1.06 * max([p["gib"] for p in points] + [v / _GIB for v in limits]))  # room for a dot at the end
    top_y, ticks_y = _nice(1.06 * max(p["ms"] for p in points))
    div, unit = time_axis(top_y)
    plot_w, plot_h = width - left - right, height - top_pad - bottom_pad

    def x(gib: float) -> float:
        return left + plot_w * gib / top_x

    def y(ms: float) -> float:
        return top_pad + plot_h * (1 - ms / top_y)

    # dots that would overlap (within a dot's width) are set apart, so every case is whole and visible
    placed = set_apart([(x(p["gib"]), y(p["ms"])) for p in points], box=(left, top_pad, width - right, height - bottom_pad))
    near = {p["k"]: [q["name"] for q in points if q is not p and math.hypot(x(p["gib"]) - x(q["gib"]), y(p["ms"]) - y(q["ms"])) < DOT_GAP]
            for p in points}
    dots = []
    for p, (px, py) in zip(points, placed):
        also = near[p["k"]]
        title = (f"{isolated(p['name'])} ({isolated(labels[p['k']])}): peak {p['gib']:.2f} GiB on its fullest rank, "
                 f"median step {value_label(p['ms'] / div, unit)}"
                 + (f"; limit {p['limit'] / _GIB:g} GiB" + (": does not fit" if p["over"] else "") if p["limit"] is not None else "")
                 + (f"; drawn beside it, at the same place: {', '.join(map(isolated, also))}" if also else "")
                 + "; click to compare it")
        dots.append({"x": px, "y": py, "k": p["k"], "over": p["over"], "title": title})
    step_x = ticks_x[1] - ticks_x[0] if len(ticks_x) > 1 else top_x
    step_y = ticks_y[1] - ticks_y[0] if len(ticks_y) > 1 else top_y
    return {
        "w": width, "h": height, "left": left, "right": width - right, "top": top_pad, "bottom": height - bottom_pad,
        "xticks": [{"x": x(t), "label": tick_label(t, step_x, "GiB")} for t in ticks_x],
        "yticks": [{"y": y(t), "label": tick_label(t / div, step_y / div, unit)} for t in ticks_y],
        "dots": dots,
        "limits": [{"x": x(v / _GIB), "label": f"limit {v / _GIB:g} GiB"} for v in limits],
        "not_drawn": not_drawn,
    }
