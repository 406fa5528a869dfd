"""The HTML review page: one self-contained file rendered with jinja2.

Inline CSS and JavaScript, no network (a Content-Security-Policy meta tag
forbids loads), works from ``file://``. Autoescape is on for every user
string, and case data is embedded as JSON through jinja2's ``tojson`` filter,
which escapes ``<``, ``>``, ``&`` and ``'`` so a ``</script>`` in a case name
cannot end the script element.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.report.atomic import atomic_write_text

__all__ = ["render_index", "timeline_data", "write_index"]

KINDS = ("F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "OPT")
KIND_COLOURS = {
    "F": "#4e9a5b", "B": "#3d6fb6", "I": "#5fa8d3", "W": "#9b7fc9",
    "SEND_F": "#b0b0b0", "RECV_F": "#8c8c8c", "SEND_B": "#c9b26b", "RECV_B": "#a8924f", "OPT": "#e0a030",
}


def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("harness.report", "templates"),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ms"] = lambda ns: "—" if ns is None else f"{ns / 1e6:,.3f}"
    env.filters["pct"] = lambda x: "—" if x is None else f"{100 * x:.1f}%"
    return env


def timeline_data(case: dict[str, Any]) -> dict[str, Any]:
    """Compact per-case data for the canvas timeline: times in µs relative to the
    first recorded step, kinds as indices into :data:`KINDS`."""
    jobs = case["jobs"]
    base = min(case["step_start_ns"]) if case["step_start_ns"] else 0
    kind_index = {k: i for i, k in enumerate(KINDS)}
    return {
        "lanes": case["streams"],
        "steps": [[(a - base) / 1000, (b - base) / 1000, s] for s, a, b in zip(case["steps"], case["step_start_ns"], case["step_end_ns"])],
        "lane": jobs["stream"],
        "start": [(t - base) / 1000 for t in jobs["start_ns"]],
        "dur": [(b - a) / 1000 for a, b in zip(jobs["start_ns"], jobs["end_ns"])],
        "kind": [kind_index.get(k, 0) for k in jobs["kind"]],
        "stage": jobs["stage"],
        "mb": jobs["microbatch"],
        "chunk": jobs["chunk"],
        "step": jobs["step"],
    }


def _row(case: dict[str, Any], trace_href: str | None) -> dict[str, Any]:
    m = case["metrics"]
    th = case.get("theory") or {}
    return {
        "id": case["id"],
        "label": case.get("label", case["id"]),
        "schedule": case["schedule"]["name"],
        "p": case["schedule"]["p"],
        "m": case["schedule"]["m"],
        "v": case["schedule"]["v"],
        "backend": case["backend"],
        "workload": (case.get("device") or {}).get("workload", ""),
        "step_ms": m["step_time_median_ns"],
        "iqr_ms": m["step_time_iqr_ns"],
        "bubble": m["bubble_ratio"],
        "bubble_theory": th.get("bubble_ratio"),
        "peak": m["peak_inflight"],
        "peak_theory": th.get("peak_inflight"),
        "per_step": m.get("per_step", []),
        "trace": trace_href,
    }


def render_index(doc: dict[str, Any], trace_hrefs: dict[str, str] | None = None, title: str = "Pipeline schedules") -> str:
    """Render the review page of a results document to an HTML string."""
    trace_hrefs = trace_hrefs or {}
    env = _environment()
    cases = doc["cases"]
    rows = [_row(c, trace_hrefs.get(c["id"])) for c in cases]
    timelines = [{"id": c["id"], "label": c.get("label", c["id"]), **timeline_data(c)} for c in cases]
    return str(env.get_template("index.html.j2").render(
        title=title,
        doc=doc,
        rows=rows,
        timelines=timelines,
        kinds=[{"name": k, "colour": KIND_COLOURS[k]} for k in KINDS],
        normalization=cases[0]["metrics"].get("normalization", "") if cases else "",
    ))


def write_index(path: Path, doc: dict[str, Any], trace_hrefs: dict[str, str] | None = None) -> Path:
    """Atomically write the review page of ``doc`` to ``path``."""
    return atomic_write_text(path, render_index(doc, trace_hrefs))
