"""The HTML review page: one self-contained file rendered with jinja2.

Inline CSS and JavaScript, no network (a Content-Security-Policy meta tag
forbids every load), works from ``file://``. What it shows:

* an overview table, one row per case (schedule, p, m, v, backend, the cost
  model and its per-job durations, step time median and spread - min–max, or
  the IQR from 5 steps on, with n - bubble measured against theory with the Δ
  rule stated, span bubble where present, peak in-flight with its unit; a
  failed or errored case marked), sortable by clicking a header; above it, the cases that could not
  be reported, and those that did not run (:mod:`harness.report.not_run`), each with its error;
* charts of step time and bubble against every swept dimension (m, v, p,
  schedule; :mod:`harness.report.charts`), series keyed on the whole model
  (:mod:`harness.report.identity`);
* per case, a canvas timeline (one lane per stream, colour per kind, step
  boundaries, zoom and pan with mouse and keyboard, a tooltip per job with the
  cost model's duration and its wait; comm lanes hidden or shown, ranks
  collapsed, search, the critical path, arrows for the focused job or every
  one in view) and a schedule grid (rank × slot, :mod:`harness.report.grid`),
  per-rank busy/idle bars split by stage; beside an imported run, its replay
  (:mod:`harness.report.replay_block`); beside a ``torch`` backend run, its two sims and what
  PyTorch's lowering and runtime added per rank (:mod:`harness.report.torch_beside`);
* two cases, any two, compared on one time scale, with their numbers and the Δ of each
  (computed in the page from the per-step samples, :func:`compare_numbers`), and every
  case's step time against its peak memory (:mod:`harness.report.memory_chart`).

Safety: autoescape is on for every user string, and the data the scripts read
is embedded through jinja2's ``tojson`` filter, which escapes ``<``, ``>``,
``&`` and ``'``, so a ``</script>`` in a case name cannot end the script
element; the scripts only ever set ``textContent``.

Size: timeline data is columnar and compact (see :func:`timeline_data`): about
25 bytes per job, so a 100,000-job case stays well under 10 MB.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.analysis.critical_path import middle_step_note
from harness.report.atomic import atomic_write_text
from harness.report.charts import sweep_charts
from harness.report.colours import STAGE_COLOURS, kind_table
from harness.report.cost_table import cost_durations, durations_text, model_notes
from harness.report.critical_summary import critical_summary
from harness.report.identity import cost_label, model_key, model_labels
from harness.report.jobtable import JobTable
from harness.report.layout import rank_labels
from harness.report.memory_chart import step_memory_chart
from harness.report.not_run import not_run_view
from harness.report.timeline import page_json, timeline_columns

__all__ = ["render_index", "write_index"]


_COMPUTE = frozenset({"F", "B", "I", "W", "OPT"})

_COMM = frozenset({"SEND_F", "RECV_F", "SEND_B", "RECV_B"})

def _replay_block(case: dict[str, Any]) -> str | None:
    from harness.report.replay_block import replay_block

    return replay_block(case)

def _torch_beside_block(case: dict[str, Any]) -> str | None:
    from harness.report.torch_beside import torch_beside_block

    return torch_beside_block(case)

def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("harness.report", "templates"),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # Compact JSON for the embedded data; tojson still escapes < > & '.
    env.policies["json.dumps_kwargs"] = {"sort_keys": False, "separators": (",", ":"), "allow_nan": False}
    env.policies["json.dumps_function"] = page_json  # json.dumps' text, numpy job columns written in C
    env.filters["ms"] = lambda ns: "—" if ns is None else f"{ns / 1e6:,.3f}"
    env.filters["pct"] = lambda x: "—" if x is None else f"{100 * x:.1f}%"
    return env

def _tick(values: list[int]) -> int:
    """The coarsest unit in ns (1, 10, 100 or 1000) that divides every value."""
    for unit in (1000, 100, 10):
        if all(v % unit == 0 for v in values):
            return unit
    return 1

def _stage_bars(case: dict[str, Any], table: JobTable | None = None) -> list[dict[str, Any]]:
    """Per rank: mean busy time per stage over recorded steps, mean idle, as % of mean step time."""
    import numpy as np

    steps = case["steps"]
    p = int(case["schedule"]["p"])
    if not steps:
        return []
    t = JobTable.from_case(case) if table is None else table
    compute = ~np.asarray([k in _COMM for k in t.kinds] or [False], dtype=bool)[t.kind] if t.n else np.zeros(0, bool)
    span = int(t.stage.max()) + 1 if t.n else 1
    size = (max(p, int(t.rank.max()) + 1 if t.n else 0)) * span
    key = t.rank[compute] * span + t.stage[compute]  # (rank, stage) of every job that is not a transfer, summed in int64
    sums = np.zeros(size, np.int64)
    np.add.at(sums, key, (t.end_ns - t.start_ns)[compute])
    present = np.bincount(key, minlength=size) > 0
    busy = {(k // span, k % span): ns for k, ns in zip(np.flatnonzero(present).tolist(), sums[present].tolist())}
    per_step = case["metrics"].get("per_step") or []
    step_time = sum(b - a for a, b in zip(case["step_start_ns"], case["step_end_ns"])) / len(steps)
    labels = rank_labels(case)
    out = []
    for r in range(p):
        segs = []
        for (rank, stage), ns in sorted(busy.items()):
            if rank == r:
                mean = ns / len(steps)
                segs.append({"stage": stage, "ns": mean, "pct": 100 * mean / step_time if step_time else 0.0})
        if per_step and all(r < len(s["idle_ns"]) and r < len(s["busy_ns"]) for s in per_step):
            idle = sum(s["idle_ns"][r] for s in per_step) / len(per_step)
            busy_r = sum(s["busy_ns"][r] for s in per_step) / len(per_step)
            summed = sum(s["ns"] for s in segs)
            if summed > busy_r > 0:  # overlapping imported jobs: busy is their union, scale the stages to it
                for s in segs:
                    s["ns"] *= busy_r / summed
                    s["pct"] *= busy_r / summed
        else:
            idle = max(0.0, step_time - sum(s["ns"] for s in segs))
        total_pct = sum(s["pct"] for s in segs)
        out.append({"rank": r, "label": labels[r], "segs": segs, "idle_ns": idle,
                    "idle_pct": max(0.0, min(100.0 - min(total_pct, 100.0), 100 * idle / step_time if step_time else 0.0)),
                    "busy_ns": sum(s["ns"] for s in segs)})
    return out

#: The overview marks a bubble red when the shown Δ (rounded to 0.1 pp) exceeds theory by more
#: than this many percentage points; nothing is coloured green.
BUBBLE_DELTA_PP = 0.5

#: pytest outcomes that mark a case as not passing, with their badge text.
_BAD_OUTCOMES = {"failed": "FAILED", "error": "ERROR"}

def spread_text(n_steps: int, min_ns: float | None, max_ns: float | None, iqr_ns: float | None) -> dict[str, Any]:
    """The overview's spread cell, honest about what it is: the inter-quartile
    range from 5 recorded steps on, the min–max range below that, nothing for one
    step; ``n`` is always stated. Returns ``{"main", "sub", "title", "sort",
    "detail"}`` (``detail``: one line for the case's section)."""
    def ms(ns: float) -> str:
        return f"{ns / 1e6:,.3f}"

    have_range = min_ns is not None and max_ns is not None
    span = f"min {ms(min_ns)} ms, max {ms(max_ns)} ms" if have_range else "min and max not recorded"  # type: ignore[arg-type]
    rng = f"min–max {ms(min_ns)}–{ms(max_ns)} ms" if have_range else ""  # type: ignore[arg-type]
    if n_steps >= 5 and iqr_ns is not None:
        return {"main": f"IQR {ms(iqr_ns)}", "sub": f"n={n_steps} steps",
                "title": f"inter-quartile range over {n_steps} recorded steps; {span}", "sort": iqr_ns,
                "detail": f"IQR {ms(iqr_ns)} ms" + (f", {rng}" if rng else "") + f" over {n_steps} steps"}
    if n_steps >= 2 and have_range:
        return {"main": f"{ms(min_ns)}–{ms(max_ns)}", "sub": f"min–max, n={n_steps} steps",  # type: ignore[arg-type]
                "title": f"range over {n_steps} recorded steps (an inter-quartile range needs at least 5)",
                "sort": max_ns - min_ns, "detail": f"{rng} over {n_steps} steps"}  # type: ignore[operator]
    return {"main": "—", "sub": f"n={n_steps} step" + ("" if n_steps == 1 else "s"),
            "title": "no spread from fewer than 2 recorded steps", "sort": 0,
            "detail": f"{n_steps} step" + ("" if n_steps == 1 else "s")}

def _ci_text(case: dict[str, Any]) -> dict[str, Any] | None:
    """The median step's 95 % CI for the page, from ``metrics.stats`` (``None`` for files
    without it, sim, which is exact, and fewer than :data:`harness.stats.MIN_SAMPLES` steps,
    runs and imports alike: below it the interval is the min-max range at a far lower
    coverage than 95 %, and the spread column already shows that range)."""
    from harness.stats import MIN_SAMPLES

    st = ((case["metrics"].get("stats") or {}).get("step_time_ns")) if isinstance(case["metrics"].get("stats"), dict) else None
    if (not isinstance(st, dict) or case.get("backend") == "sim" or not st.get("median")
            or (st.get("n") or 0) < MIN_SAMPLES):
        return None
    med, lo, hi = float(st["median"]), float(st["ci_low"]), float(st["ci_high"])
    half = max(med - lo, hi - med) / med
    level = float(st.get("ci_level") or 0)
    return {"short": f"±{100 * half:.1f}%", "title": f"{100 * level:.1f}% CI of the median: {lo / 1e6:,.3f}–{hi / 1e6:,.3f} ms "
            f"(order statistics, n={st.get('n')}); relative standard error {100 * float(st.get('rel_err') or 0):.2f}%",
            "outliers": len(st.get("outliers") or [])}

def _critical_text(case: dict[str, Any]) -> str | None:
    """The critical path as one line: its jobs (with any gap before one), its length."""
    cp = case.get("critical_path")
    if not isinstance(cp, dict) or not isinstance(cp.get("jobs"), list) or not cp["jobs"]:
        return None
    jobs, gaps = [str(j) for j in cp["jobs"]], list(cp.get("gaps_ns") or [0] * len(cp["jobs"]))
    shown = [(f"(+{g / 1e3:,.0f} µs) " if isinstance(g, (int, float)) and g > 0 else "") + j for j, g in zip(jobs, gaps)]
    if len(shown) > 40:
        shown = [*shown[:20], f"… {len(shown) - 40} more …", *shown[-20:]]
    which = "" if len(case["steps"]) % 2 else f" ({middle_step_note(len(case['steps']))})"
    return (f"step {cp.get('step')}{which}: {len(jobs)} jobs, {float(cp.get('length_ns', 0)) / 1e6:,.3f} ms "
            f"({float(cp.get('busy_ns', 0)) / 1e6:,.3f} ms of it running): " + " → ".join(shown))

def _cost_jobs(case: dict[str, Any], table: JobTable | None = None) -> str:
    """The overview's per-job durations of the cost model, where they add to its label: a
    transformer's computed durations, or a fixed model's per-stage ranges and split backward."""
    text = durations_text(cost_durations(case, table))
    fixed = isinstance(case.get("cost"), dict) and case["cost"].get("model") == "fixed"
    return text if not fixed or "–" in text or " I " in f" {text}" else ""

def _open_step(case: dict[str, Any]) -> int | None:
    """The recorded step a case's timeline opens on: its critical path's (:func:`harness.analysis.critical_path.median_step`),
    else the median step by time (the lower middle of an even number), ``None`` without steps."""
    cp = case.get("critical_path")
    if isinstance(cp, dict) and cp.get("step") in case["steps"]:
        return int(cp["step"])
    if not case["steps"]:
        return None
    times = [b - a for a, b in zip(case["step_start_ns"], case["step_end_ns"])]
    return int(case["steps"][times.index(sorted(times)[(len(times) - 1) // 2])])

def _cp_ms(case: dict[str, Any]) -> float | None:
    """The critical path's length in ms (the compare view's overlay), ``None`` without one."""
    cp = case.get("critical_path")
    return float(cp["length_ns"]) / 1e6 if isinstance(cp, dict) and isinstance(cp.get("length_ns"), (int, float)) else None

def _decomposition_text(case: dict[str, Any]) -> str | None:
    """``"step 116.544 ms = ideal 98.1 + imbalance 6.6 + ... ms"`` from the case's ``decomposition``."""
    d = case.get("decomposition")
    keys = ("ideal_ns", "imbalance_ns", "recompute_ns", "comm_ns", "schedule_ns")
    if not isinstance(d, dict) or not all(isinstance(d.get(k), (int, float)) for k in (*keys, "step_ns")):
        return None
    parts = " + ".join(f"{k.removesuffix('_ns').replace('schedule', 'schedule bubble')} {d[k] / 1e6:,.3f}" for k in keys)
    which = "" if len(case["steps"]) % 2 else f"{middle_step_note(len(case['steps']))}; "
    return (f"step {d['step_ns'] / 1e6:,.3f} ms = {parts} ms ({which}imbalance and recompute on rank {d.get('busiest_rank')}, "
            "the busiest)")

def _gib(n: float) -> str:
    from harness.analysis.memory import format_bytes

    return format_bytes(n)

def _memory_text(case: dict[str, Any]) -> dict[str, Any] | None:
    """The overview's peak-memory cell: the largest peak over ranks, the limit, whether it fits."""
    mem = case.get("memory")
    if not isinstance(mem, dict) or not mem.get("peak_bytes"):
        return None
    peaks = [int(x) for x in mem["peak_bytes"]]
    limit = mem.get("limit_bytes")
    fits = mem.get("fits")
    worst = max(range(len(peaks)), key=lambda r: peaks[r])
    theory = (case.get("theory") or {}).get("peak_memory_bytes")
    title = ("peak bytes held per rank (static + activations): " + ", ".join(_gib(x) for x in peaks)
             + (f"; theory {', '.join(_gib(x) for x in theory)}" if theory else "")
             + (f"; limit {_gib(limit)} per rank" if isinstance(limit, int) else ""))
    return {"main": _gib(peaks[worst]), "sub": f"rank {worst}", "sort": peaks[worst], "title": title,
            "fits": fits, "limit": _gib(limit) if isinstance(limit, int) else None}

def _flags(case: dict[str, Any]) -> list[dict[str, str]]:
    """A case's flags, one per kind, its reasons joined (for one badge each)."""
    flags = case.get("flags")
    by_kind: dict[str, list[str]] = {}
    for f in flags if isinstance(flags, list) else []:
        if isinstance(f, dict):
            by_kind.setdefault(str(f.get("kind")), []).append(str(f.get("reason")))
    return [{"kind": kind, "reason": "; ".join(reasons)} for kind, reasons in by_kind.items()]

def _fidelity(case: dict[str, Any]) -> dict[str, Any] | None:
    f = case.get("fidelity")
    if not isinstance(f, dict) or not all(isinstance(f.get(k), (int, float)) for k in ("change", "predicted_step_ns")):
        return None
    known = all(isinstance(f.get(k), (int, float)) for k in ("ci_low", "ci_high"))
    return {"text": f"{100 * f['change']:+.1f}%", "sort": f["change"],
            "title": f"measured median step against the cost model's exact step ({f['predicted_step_ns'] / 1e6:,.3f} ms, the sim figure); "
                     + (f"CI {100 * f['ci_low']:+.1f}% to {100 * f['ci_high']:+.1f}%" if known else "no CI (one recorded step)")}

def _row(case: dict[str, Any], trace_href: str | None, hta_href: str | None, table: JobTable | None = None) -> dict[str, Any]:
    m = case["metrics"]
    th = case.get("theory") or {}
    bubble_theory = th.get("bubble_ratio")
    outcome = case.get("outcome")
    outcome = str(outcome) if outcome else None
    n_steps = len(case["steps"])
    peak, peak_theory = m["peak_inflight"], th.get("peak_inflight")
    return {
        "id": case["id"],
        "label": case.get("label", case["id"]),
        "schedule": case["schedule"]["name"],
        "p": case["schedule"]["p"],
        "m": case["schedule"]["m"],
        "v": case["schedule"]["v"],
        "backend": case["backend"],
        "workload": (case.get("device") or {}).get("workload", ""),
        "comm_model": str(case.get("comm_model") or "stream"),  # files before harness.model.comm: today's model
        "step_ns": m["step_time_median_ns"],
        "iqr_ns": m["step_time_iqr_ns"],
        "min_ns": m.get("step_time_min_ns"),
        "max_ns": m.get("step_time_max_ns"),
        "spread": spread_text(n_steps, m.get("step_time_min_ns"), m.get("step_time_max_ns"), m.get("step_time_iqr_ns")),
        "bubble": m["bubble_ratio"],
        "bubble_theory": bubble_theory,
        "bubble_delta": None if bubble_theory is None else m["bubble_ratio"] - bubble_theory,
        "bubble_over": bubble_theory is not None and round(100 * (m["bubble_ratio"] - bubble_theory), 1) > BUBBLE_DELTA_PP,
        "cost": cost_label(case.get("cost")),
        "model_key": model_key(case),
        "cost_jobs": _cost_jobs(case, table),
        "cost_notes": model_notes(case),
        "peak_unit": "chunk-activations" if int(case["schedule"]["v"]) > 1 else "micro-batches",
        "span_bubble": m.get("span_bubble_ratio"),
        "peak": peak,
        "peak_theory": peak_theory,
        "peak_matches": peak_theory is not None and list(peak_theory) == list(peak),
        "jobs": len(case["jobs"]["kind"]),
        "steps": n_steps,
        "outcome": outcome,
        "bad": _BAD_OUTCOMES.get(outcome or ""),
        "canvas_h": 30 + 20 * len(case["streams"]) + 6 + (48 * int(case["schedule"]["p"]) if isinstance(case.get("memory"), dict) else 0),
        "memory": _memory_text(case),
        "decomposition": _decomposition_text(case),
        "critical": _critical_text(case),
        "critical_summary": critical_summary(case, table),
        "waiting": [str(w.get("description")) for w in case.get("waiting") or [] if isinstance(w, dict) and w.get("description")],
        "warnings": list(case.get("warnings") or []),
        "assumptions": [str(a) for a in case["assumptions"]] if isinstance(case.get("assumptions"), list) else None,
        "replay": _replay_block(case),
        "torch_beside": _torch_beside_block(case),
        "ci": _ci_text(case),
        "flags": _flags(case),
        "fidelity": _fidelity(case),
        "window": (case.get("window") or {}).get("description") if isinstance(case.get("window"), dict) else None,
        "trace": trace_href,
        "hta": hta_href,
        "bars": _stage_bars(case, table),
    }

def compare_numbers(case: dict[str, Any]) -> dict[str, Any]:
    """What the side-by-side view computes any pair's change from, in the page: the case's per-step
    times (ms) and bubble ratios (:func:`harness.analysis.compare.step_samples`, ``bubble_samples``) and
    whether it is exact (``sim``), as ``{"steps", "bubbles", "exact"}``. The page draws the same
    two-sample percentile bootstrap of the medians' change as ``compare``
    (:func:`harness.stats.compare_samples`: fewer than :data:`harness.stats.MIN_SAMPLES` steps a side is
    "not enough samples", no spread on either side is the medians' change, sim against sim is exact),
    with 2,000 resamples and its own seeded generator where compare draws 4,000 with numpy's."""
    from harness.analysis.compare import bubble_samples, step_samples

    return {"steps": [round(x / 1e6, 6) for x in step_samples(case)], "bubbles": [round(x, 9) for x in bubble_samples(case)],
            "exact": case.get("backend") == "sim"}

def default_pair(rows: list[dict[str, Any]]) -> tuple[tuple[int, int], str]:
    """The comparison view's first pair: the first two cases that share their model (every field of it,
    :func:`harness.report.identity.model_key`: cost model, the case options that change it, memory limit,
    communication model, workload, backend) and p, else the first two; with the sentence that says why."""
    for a in range(len(rows)):
        for b in range(a + 1, len(rows)):
            if all(rows[a][k] == rows[b][k] for k in ("model_key", "p")):
                return (a, b), f"Shown first: the first two cases with the same model and p (p={rows[a]['p']}); pick any two above."
    return (0, min(1, len(rows) - 1)), "No two cases share their model and p: shown first are the first two; pick any two above."

def render_index(
    doc: dict[str, Any],
    trace_hrefs: dict[str, str] | None = None,
    title: str = "Pipeline schedules",
    hta_hrefs: dict[str, str] | None = None,
    tables: list[JobTable | None] | None = None,
    trace_cuts: dict[str, tuple[int, int]] | None = None,
) -> str:
    """Render the review page of a results document to an HTML string.

    Args:
        doc: a results document (:func:`harness.report.results.results_document`).
        trace_hrefs: per case id, a link to its Chrome-trace JSON (relative to the page).
        title: the page title (escaped).
        hta_hrefs: per case id, a link to its folder of per-rank HTA traces.
        tables: per case (in order), its jobs in columns where the caller has them
            (:class:`harness.report.jobtable.JobTable`, or ``None``).
        trace_cuts: per case id whose trace holds only its first steps (``--trace-steps``),
            ``(traced, recorded)``: its trace link says so.

    Raises:
        KeyError, TypeError: a case lacks fields the page needs (validate with
            :func:`harness.report.results.validate_document` first).
    """
    trace_hrefs = trace_hrefs or {}
    hta_hrefs = hta_hrefs or {}
    env = _environment()
    cases = doc["cases"]
    kinds = kind_table(cases)
    tables = tables or [None] * len(cases)
    rows = [_row(c, trace_hrefs.get(c["id"]), hta_hrefs.get(c["id"]), tables[k]) for k, c in enumerate(cases)]
    for r in rows:
        cut = (trace_cuts or {}).get(r["id"])
        r["trace_cut"] = f"first {cut[0]} of {cut[1]} steps" if cut and r["trace"] else None
    labels = model_labels(cases)  # every model field that tells the page's cases apart
    for r, label in zip(rows, labels):
        r["cost"] = label
        r["cost_notes"] = [n for n in r["cost_notes"] if n not in label.split(" · ")]  # an option the label names already
    timelines = [timeline_columns(c, kinds, tables[k]) for k, c in enumerate(cases)]
    pair = default_pair(rows)
    return str(env.get_template("index.html.j2").render(
        title=title,
        doc=doc,
        session=doc.get("session") or {},
        not_run=not_run_view(doc.get("session") or {}),
        rows=rows,
        charts=sweep_charts(cases),
        delta_pp=BUBBLE_DELTA_PP,
        payload={"kinds": kinds, "cases": timelines, "open": [_open_step(c) for c in cases],  # the step each timeline opens on
                 "numbers": [{"step_ms": c["metrics"]["step_time_median_ns"] / 1e6, "bubble": c["metrics"]["bubble_ratio"],
                              "flagged": bool(r["flags"]), "spread": r["spread"]["detail"], "p": r["p"], "label": r["label"],
                              "model": r["cost"], "cpMs": _cp_ms(c), **compare_numbers(c),
                              "mem": max(c["memory"]["peak_bytes"]) if r["memory"] else None} for c, r in zip(cases, rows)]},
        memory_chart=step_memory_chart(cases, labels),
        flagged=sum(1 for r in rows if r["flags"]),
        cmp_pair=pair[0], cmp_pair_note=pair[1],
        stage_colours=STAGE_COLOURS,
        has_memory=any(r["memory"] for r in rows),
        kinds=kinds,
        normalization=cases[0]["metrics"].get("normalization", "") if cases else "",
    ))

def write_index(path: Path, doc: dict[str, Any], trace_hrefs: dict[str, str] | None = None,
                hta_hrefs: dict[str, str] | None = None) -> Path:
    """Atomically write the review page of ``doc`` to ``path`` (see :func:`render_index`).

    Raises:
        OSError: the file cannot be written (the previous one is kept).
    """
    return atomic_write_text(path, render_index(doc, trace_hrefs, hta_hrefs=hta_hrefs))
