"""The chooser's page: which schedule, stage layout and recomputation to run, as one self-contained HTML file.

:func:`write_choose_page` renders the JSON document of ``python -m harness choose`` (the chooser's
``to_document()``: ``query``, ``assumptions``, ``limit_bytes``, ``smallest_fitting_limit_bytes``,
``rows``, ``excluded``) into ``index.html``, written atomically (:mod:`harness.report.atomic`). The
page shows, top to bottom:

* the question (the model, ``p``, the ``m`` and ``v`` values tried, the memory limit) and the
  assumptions behind every figure, beside the figures;
* a scatter of step time (ms) against peak memory (GiB, the fullest rank), one point per row, the
  limit as a dashed vertical line and the Pareto front (the least step time at a given peak,
  :func:`pareto_front`) as a step line with its points ringed, the best row starred;
* when no row fits, the smallest limit at which one would;
* the ranked table (rank, schedule, v, m, layout, recomputation, step, bubble, peak, fits; the best
  row marked, rows that do not fit struck through), each row's baselines (the even split without
  recomputation and with the best uniform one) and how its layout was searched in a details cell;
* the combinations left out, with the reason for each;
* the timelines of the cases passed in (the review page's canvas timeline and schedule grid,
  :mod:`harness.report.timeline` and its scripts), one per label.

Units: times in the document are ns and shown in ms; memory is bytes and shown in GiB (2**30 bytes).
Every string of the document is HTML-escaped (jinja2 autoescape); the timeline data is embedded
through ``tojson``, which escapes ``<``, ``>``, ``&`` and ``'``. A Content-Security-Policy meta tag
forbids every load: the page needs no network and no other file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import ConfigError
from harness.report.atomic import atomic_write_text, ensure_writable_dir
from harness.report.charts import tick_label
from harness.report.identity import isolated
from harness.report.numbers import ms_text

if TYPE_CHECKING:
    from harness.analysis.result import CaseResult

__all__ = ["excluded_groups", "pareto_front", "recompute_text", "render_choose_page", "rows_at_peak", "scatter_chart",
           "write_choose_page"]

_GIB = 2**30
#: Keys every row of the document must have for the page.
ROW_KEYS = ("schedule", "v", "m", "layout", "recompute", "step_ns", "peak_bytes", "fits")
#: Fields of the query's model shown in the question, with their names there.
_MODEL_FIELDS = (("hidden_size", "hidden"), ("num_layers", "layers"), ("num_attention_heads", "heads"), ("seq_len", "sequence"),
                 ("micro_batch_size", "micro-batch"), ("vocab_size", "vocabulary"), ("tensor_parallel_size", "TP"),
                 ("tflops", "TFLOP/s"))


def write_choose_page(document: Mapping[str, Any], out_dir: Path,
                      timelines: Sequence[tuple[str, CaseResult]] = ()) -> Path:
    """Write the chooser's page (module doc) to ``out_dir/index.html``, atomically.

    The page is rendered in full before anything is written, and written through a temporary file
    renamed over ``index.html``: a failure anywhere leaves an earlier ``index.html`` as it was.

    Args:
        document: the chooser's JSON document (times in ns, memory in bytes).
        out_dir: the folder (created if needed).
        timelines: ``(label, result)`` per case to draw (e.g. the top rows run on ``sim``), in order.

    Returns:
        The path of the page.

    Raises:
        ConfigError: the document has no ``rows`` (or a row lacks a key the page needs: it names it),
            or ``out_dir`` cannot be created or written.
        OSError: the page cannot be written (the earlier one is kept).
    """
    html = render_choose_page(document, timelines)
    ensure_writable_dir(Path(out_dir), "choose page folder")
    return atomic_write_text(Path(out_dir) / "index.html", html)


def render_choose_page(document: Mapping[str, Any], timelines: Sequence[tuple[str, CaseResult]] = ()) -> str:
    """The chooser's page as an HTML string (see :func:`write_choose_page`).

    Raises:
        ConfigError: the document is not a mapping, has no ``rows``, or a row lacks a key of :data:`ROW_KEYS`.
    """
    if not isinstance(document, Mapping):
        raise ConfigError(f"choose page: the document must be a JSON object (a mapping), got {type(document).__name__}")
    if "rows" not in document:
        raise ConfigError("choose page: the document has no 'rows' key (the ranked configurations); "
                          f"its keys: {', '.join(map(repr, document)) or 'none'}")
    raw_rows = document["rows"]
    if not isinstance(raw_rows, Sequence) or isinstance(raw_rows, (str, bytes)):
        raise ConfigError(f"choose page: the document's 'rows' must be a list, got {type(raw_rows).__name__}")
    for k, row in enumerate(raw_rows):
        if not isinstance(row, Mapping):
            raise ConfigError(f"choose page: row {k} is not an object, got {type(row).__name__}")
        missing = [key for key in ROW_KEYS if key not in row]
        if missing:
            raise ConfigError(f"choose page: row {k} has no {', '.join(map(repr, missing))} key(s)")
    query: Mapping[str, Any] = document["query"] if isinstance(document.get("query"), Mapping) else {}
    limit = document.get("limit_bytes", query.get("memory_limit_bytes"))
    limit = int(limit) if isinstance(limit, (int, float)) and not isinstance(limit, bool) else None
    per_mb = _per_microbatch(raw_rows)
    points = [(int(r["peak_bytes"]), _y_ns(r, per_mb)) for r in raw_rows]
    front = set(pareto_front(points))
    marked = [bool(r.get("best")) for r in raw_rows]
    if not any(marked):  # a document without "best": the first fitting row, as the ranking puts it first
        first = next((k for k, r in enumerate(raw_rows) if r["fits"]), None)
        if first is not None:
            marked[first] = True
    rows = [_row_view(k, r, k in front, marked[k]) for k, r in enumerate(raw_rows)]
    smallest = document.get("smallest_fitting_limit_bytes")
    excluded = [e for e in document.get("excluded") or [] if isinstance(e, Mapping)]
    cases, payload = _timeline_views(timelines)
    env = _environment()
    return str(env.get_template("choose.html.j2").render(
        question=_question(query, limit),
        assumptions=[str(a) for a in document.get("assumptions") or []],
        limit=limit,
        limit_text=_limit_text(limit),
        rows=rows,
        chart=scatter_chart(raw_rows, limit, front=front, best=[k for k, b in enumerate(marked) if b]),
        per_microbatch=per_mb,
        none_fit=bool(rows) and not any(r["fits"] for r in rows),
        smallest=int(smallest) if isinstance(smallest, (int, float)) and not isinstance(smallest, bool) else None,
        smallest_text=_bytes_text(smallest) if isinstance(smallest, (int, float)) and not isinstance(smallest, bool) else None,
        smallest_rows=rows_at_peak(raw_rows, smallest),
        excluded=excluded_groups(excluded),
        cases=cases,
        payload=payload,
    ))


def rows_at_peak(rows: Sequence[Mapping[str, Any]], peak: Any) -> str:
    """The rows whose peak is ``peak`` (bytes), by rank (1-based) and name: ``"#37 ZB-auto v=1 m=16, #38 ..."``
    (three at most, then how many more); empty where ``peak`` is not a number or no row has it."""
    if not isinstance(peak, (int, float)) or isinstance(peak, bool):
        return ""
    at = [(r.get("rank", k + 1), r) for k, r in enumerate(rows) if r["peak_bytes"] == peak]
    names = ", ".join(f"#{rank} {r['schedule']} v={r['v']} m={r['m']}" for rank, r in at[:3])
    return names + (f" and {len(at) - 3} more" if len(at) > 3 else "")


def excluded_groups(excluded: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One table row per schedule, ``v`` and reason, the micro-batch counts it holds for listed together (``"16, 32"``),
    in the order of their first entry; ``None`` (every ``v`` or ``m``) stays ``None``."""
    groups: dict[tuple[str, Any, str], list[Any]] = {}
    for e in excluded:
        v = e.get("v", "?")
        groups.setdefault((str(e.get("schedule", "?")), v if isinstance(v, (int, str)) or v is None else str(v),
                           str(e.get("reason", ""))), []).append(e.get("m", "?"))
    return [{"schedule": schedule, "v": v, "m": None if None in ms else ", ".join(str(m) for m in ms), "reason": reason}
            for (schedule, v, reason), ms in groups.items()]


def recompute_text(recompute: str | Sequence[str]) -> str:
    """A row's recomputation in words: ``"none"``, ``"selective on every stage"``, or per stage
    (stage 0 first) grouped by mode, the commonest as "elsewhere":
    ``"selective on stages 0-2, none elsewhere"``, ``"full on stage 0, selective on stages 1-2, none elsewhere"``."""
    if isinstance(recompute, str):
        return "none" if recompute == "none" else f"{recompute} on every stage"
    modes = [str(x) for x in recompute]
    if not modes:
        return "none"
    if len(set(modes)) == 1:
        return recompute_text(modes[0])
    stages: dict[str, list[int]] = {}
    for k, mode in enumerate(modes):
        stages.setdefault(mode, []).append(k)
    # "elsewhere": the mode of the most stages (none where tied), the others named by their stages
    rest = max(stages, key=lambda mode: (len(stages[mode]), mode == "none"))
    named = [f"{mode} on {_stage_ranges(ks)}" for mode, ks in sorted(stages.items(), key=lambda kv: kv[1][0]) if mode != rest]
    return ", ".join(named) + f", {rest} elsewhere"


def _stage_ranges(stages: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"stages 0-2, 5"``; ``[3]`` -> ``"stage 3"``."""
    runs: list[list[int]] = []
    for k in stages:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    text = ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)
    return ("stage " if len(stages) == 1 else "stages ") + text


def pareto_front(points: Sequence[tuple[int, int]]) -> list[int]:
    """The rows on the Pareto front of step time against peak memory: the least step time at a given peak.

    Args:
        points: per row ``(peak_bytes, step_ns)``.

    Returns:
        The indices of the rows no other row beats, in increasing peak: a row is on the front when every
        row with a peak at most its own has a longer step, or the same step and a higher peak or a later
        place (of two equal points the earlier is on the front, the later is not).
    """
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1], i))
    front: list[int] = []
    least = math.inf
    for i in order:
        if points[i][1] < least:
            front.append(i)
            least = points[i][1]
    return front


def _nice_range(lo: float, hi: float) -> tuple[float, float, float, list[float]]:
    """An axis from about ``lo`` to ``hi`` with a little room at each end: ``(start, end, tick step, ticks)``."""
    if hi < lo:
        lo, hi = hi, lo
    pad = (hi - lo) * 0.06 or (abs(hi) * 0.05 or 1.0)
    lo, hi = lo - pad, hi + pad
    if lo < 0 <= lo + pad:
        lo = 0.0  # values that are all >= 0 get an axis that is too
    raw = (hi - lo) / 4
    mag = 10 ** math.floor(math.log10(raw))
    step = next(f * mag for f in (1, 2, 2.5, 5, 10) if raw <= f * mag)
    start, end = math.floor(lo / step) * step, math.ceil(hi / step) * step
    ticks = [start + k * step for k in range(round((end - start) / step) + 1)]
    return start, end, step, ticks


def _per_microbatch(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Rows of several micro-batch counts are compared by step time per micro-batch (as the chooser ranks them)."""
    return len({r["m"] for r in rows}) > 1


def _y_ns(row: Mapping[str, Any], per_mb: bool) -> int:
    """The chart's y value of ``row`` (ns): its step time, or per micro-batch where rows differ in ``m``."""
    return round(int(row["step_ns"]) / int(row["m"])) if per_mb else int(row["step_ns"])


def scatter_chart(rows: Sequence[Mapping[str, Any]], limit_bytes: int | None, *, front: set[int] | None = None,
                  best: Sequence[int] = ()) -> dict[str, Any] | None:
    """SVG geometry of the scatter: x the row's peak memory (GiB, its fullest rank), y its step time (ms), or
    its step time per micro-batch where the rows differ in ``m`` (the chooser ranks by it then).

    Args:
        rows: the document's rows (``peak_bytes`` in bytes, ``step_ns`` in ns).
        limit_bytes: the memory limit per rank (bytes), drawn as a vertical line; ``None``: none drawn.
        front: the indices of the rows on the Pareto front (default: :func:`pareto_front` of the rows).
        best: the indices of the rows marked best.

    Returns:
        ``None`` without rows; else ``{"w", "h", "left", "right", "top", "bottom", "xticks", "yticks",
        "points", "front_path", "limit"}`` in pixels; each point ``{"x", "y", "k", "rank", "fits",
        "front", "best", "title", "label"}``, ``front_path`` the SVG path of the front's step line
        (from each front point right to the next one's peak, then down to its step), ``limit``
        ``{"x", "label"}`` or ``None``.
    """
    if not rows:
        return None
    width, height, left, right, top_pad, bottom_pad = 680, 340, 78, 24, 18, 46
    peaks = [int(r["peak_bytes"]) / _GIB for r in rows]
    per_mb = _per_microbatch(rows)
    steps = [_y_ns(r, per_mb) / 1e6 for r in rows]
    if front is None:
        front = set(pareto_front([(int(r["peak_bytes"]), _y_ns(r, per_mb)) for r in rows]))
    xs = peaks + ([limit_bytes / _GIB] if limit_bytes is not None else [])
    x0, x1, xstep, xticks = _nice_range(min(xs), max(xs))
    y0, y1, ystep, yticks = _nice_range(min(steps), max(steps))
    plot_w, plot_h = width - left - right, height - top_pad - bottom_pad

    def px(gib: float) -> float:
        return left + plot_w * (gib - x0) / (x1 - x0)

    def py(ms: float) -> float:
        return top_pad + plot_h * (1 - (ms - y0) / (y1 - y0))

    best_set = set(best)
    points = []
    for k, r in enumerate(rows):
        name = f"{r['schedule']} v={r['v']} m={r['m']}"
        notes = [w for w, on in (("best", k in best_set), ("on the Pareto front", k in front), ("does not fit", not r["fits"])) if on]
        title = (f"#{r.get('rank', k + 1)} {isolated(name)}: step {ms_text(int(r['step_ns']), 3)} ms"
                 + (f" ({steps[k]:,.3f} ms per micro-batch)" if per_mb else "") + f", peak {_gib(int(r['peak_bytes']))} GiB"
                 + (f" ({', '.join(notes)})" if notes else ""))
        points.append({"x": px(peaks[k]), "y": py(steps[k]), "k": k, "rank": r.get("rank", k + 1), "fits": bool(r["fits"]),
                       "front": k in front, "best": k in best_set, "title": title, "label": f"{r['schedule']} v{r['v']} m{r['m']}"})
    on_front = sorted(front, key=lambda i: (peaks[i], steps[i]))
    path = ""
    if on_front:
        path = f"M{px(peaks[on_front[0]]):.1f},{py(steps[on_front[0]]):.1f}"
        for i in on_front[1:]:
            path += f" H{px(peaks[i]):.1f} V{py(steps[i]):.1f}"
        path += f" H{width - right:.1f}"
    return {
        "w": width, "h": height, "left": left, "right": width - right, "top": top_pad, "bottom": height - bottom_pad,
        "xticks": [{"x": px(t), "label": tick_label(t, xstep, "GiB")} for t in xticks],
        "yticks": [{"y": py(t), "label": tick_label(t, ystep, "ms")} for t in yticks],
        "points": points,
        "front_path": path,
        "limit": {"x": px(limit_bytes / _GIB), "label": f"limit {_limit_text(limit_bytes)}"} if limit_bytes is not None else None,
    }


# -- the page's text ----------------------------------------------------------------------------
def _gib(n: float) -> str:
    """Bytes as GiB for a table cell: 2 decimals from 1 GiB, 3 significant digits below."""
    v = n / _GIB
    return f"{v:,.1f}" if abs(v) >= 100 else f"{v:,.2f}" if abs(v) >= 1 else f"{v:.3g}"


def _bytes_text(n: float) -> str:
    return f"{_gib(n)} GiB ({int(n):,} bytes)"


def _limit_text(limit: int | None) -> str:
    if limit is None:
        return "no memory limit"
    if limit < _GIB:  # a small limit in the unit that shows it (20.0 MiB, not 0.0195312 GiB)
        from harness.analysis.memory import format_bytes

        return format_bytes(limit)
    return f"{limit / _GIB:g} GiB" if limit % (_GIB // 1024) == 0 else f"{_gib(limit)} GiB"


def _values(x: Any) -> str:
    if isinstance(x, (list, tuple)):
        return ", ".join(str(v) for v in x)
    return "—" if x is None else str(x)


def _question(query: Mapping[str, Any], limit: int | None) -> dict[str, Any]:
    """The question the page answers, in parts (each escaped by the template)."""
    base: Mapping[str, Any] = query["base"] if isinstance(query.get("base"), Mapping) else {}
    shown = []
    for key, name in _MODEL_FIELDS:
        value = base.get(key)
        if value is None or isinstance(value, bool) or (key, value) in (("vocab_size", 0), ("tensor_parallel_size", 1)):
            continue  # no vocabulary, no tensor parallelism: nothing to say
        shown.append(f"{name} {value:,}" if isinstance(value, int) else f"{name} {value}")
    model = ", ".join(shown)
    schedules = query.get("schedules")
    return {
        "model": model or "the model of the query",
        "p": query.get("p", "?"),
        "m": _values(query.get("microbatches")),
        "v": _values(query.get("chunks")),
        "schedules": "every registered schedule" if schedules is None else _values(schedules),
        "comm_model": str(query.get("comm_model", "stream")),
        "recompute": str(query.get("recompute", "search")),
        "layout": str(query.get("layout", "search")),
        "limit": _limit_text(limit),
    }


def _ms(ns: Any) -> str:
    return "—" if not isinstance(ns, (int, float)) or isinstance(ns, bool) else ms_text(ns, 3)


def _slower(baseline_ns: Any, step_ns: Any) -> str:
    """How much longer the baseline's step is than the row's, in percent (``"+12.3%"``), ``"—"`` where unknown."""
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (baseline_ns, step_ns)) or not step_ns:
        return "—"
    return f"{100 * (baseline_ns - step_ns) / step_ns:+.1f}%"


def _decomposition_text(d: Any) -> str | None:
    keys = ("ideal_ns", "imbalance_ns", "recompute_ns", "comm_ns", "schedule_ns")
    if not isinstance(d, Mapping) or not all(isinstance(d.get(k), (int, float)) for k in (*keys, "step_ns")):
        return None
    parts = " + ".join(f"{k.removesuffix('_ns').replace('schedule', 'schedule bubble')} {_ms(d[k])}" for k in keys)
    return f"step {_ms(d['step_ns'])} ms = {parts} ms"


def _row_view(k: int, r: Mapping[str, Any], front: bool, best: bool) -> dict[str, Any]:
    search: Mapping[str, Any] = r["search"] if isinstance(r.get("search"), Mapping) else {}
    baselines: Mapping[str, Any] = search["baselines"] if isinstance(search.get("baselines"), Mapping) else {}
    per_rank = r.get("peak_bytes_per_rank") or []
    rec = r["recompute"]
    return {
        "rank": r.get("rank", k + 1),
        "schedule": str(r["schedule"]),
        "v": r["v"],
        "m": r["m"],
        "layout": str(r["layout"]),
        "recompute": recompute_text(rec if isinstance(rec, str) else [str(x) for x in rec]),
        "recompute_stages": None if isinstance(rec, str) else ", ".join(f"{s}: {mode}" for s, mode in enumerate(rec)),
        "step_ns": int(r["step_ns"]),
        "step_ms": _ms(r["step_ns"]),
        "bubble": f"{100 * r['bubble']:.1f}" if isinstance(r.get("bubble"), (int, float)) else "—",
        "peak_bytes": int(r["peak_bytes"]),
        "peak": _gib(int(r["peak_bytes"])),
        "peak_title": f"{int(r['peak_bytes']):,} bytes on the fullest rank" + (
            "; per rank (GiB): " + ", ".join(_gib(int(b)) for b in per_rank) if per_rank else ""),
        "fits": bool(r["fits"]),
        "best": best,
        "front": front,
        "classes": " ".join(c for c, on in (("best", best), ("nofit", not r["fits"]), ("front", front)) if on),
        "options": ", ".join(f"{key}={value!r}" for key, value in (r.get("options") or {}).items()) or "none",
        "comm_model": str(r.get("comm_model", "—")),
        "baselines": [{"name": str(name), "layout": str(b.get("layout", "—")),
                       "recompute": recompute_text(b["recompute"]) if "recompute" in b else "—",
                       "step_ms": _ms(b.get("step_ns")), "peak": _gib(int(b["peak_bytes"])) if isinstance(b.get("peak_bytes"), (int, float)) else "—",
                       "fits": b.get("fits"), "slower": _slower(b.get("step_ns"), r["step_ns"])}
                      for name, b in baselines.items() if isinstance(b, Mapping)],
        "search": {"evaluated": search.get("evaluated", "—"), "lower_bound": _ms(search.get("lower_bound_ns")),
                   "proven": search.get("proven_optimal"), "method": str(search.get("method", "—"))} if search else None,
        "decomposition": _decomposition_text(r.get("decomposition")),
    }


# -- timelines ----------------------------------------------------------------------------------
def _timeline_views(timelines: Sequence[tuple[str, CaseResult]]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Per ``(label, result)``: what its section shows, and the review page's timeline payload
    (``kinds``, ``cases``, ``open``: :func:`harness.report.timeline.timeline_columns`) of those that serialize."""
    if not timelines:
        return [], None
    from harness.report.colours import kind_table
    from harness.report.results import reportable_case
    from harness.report.timeline import timeline_columns

    views: list[dict[str, Any]] = []
    good: list[dict[str, Any]] = []
    for label, result in timelines:
        case, problem = reportable_case(result)
        if case is None:
            views.append({"label": str(label), "problem": problem, "k": None})
            continue
        s = case["schedule"]
        mem = case.get("memory") if isinstance(case.get("memory"), dict) else None
        views.append({"label": str(label), "problem": None, "k": len(good), "schedule": str(s["name"]), "p": s["p"], "m": s["m"],
                      "v": s["v"], "backend": str(case["backend"]), "step_ms": _ms(case["metrics"]["step_time_median_ns"]),
                      "peak": _gib(max(mem["peak_bytes"])) if mem and mem.get("peak_bytes") else None,
                      "canvas_h": 30 + 20 * len(case["streams"]) + 6 + (48 * int(s["p"]) if mem else 0)})
        good.append(case)
    if not good:
        return views, None
    kinds = kind_table(good)
    columns = []
    for case, view in zip(good, (v for v in views if v["k"] is not None)):
        data = timeline_columns(case, kinds)
        data["label"] = view["label"]
        columns.append(data)
    opens = [int(c["critical_path"]["step"]) if isinstance(c.get("critical_path"), dict) and c["critical_path"].get("step") in c["steps"]
             else None for c in good]
    return views, {"kinds": kinds, "cases": columns, "open": opens}


def _environment() -> Any:
    import jinja2

    from harness.report.timeline import page_json

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("harness.report", "templates"),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.policies["json.dumps_kwargs"] = {"sort_keys": False, "separators": (",", ":"), "allow_nan": False}
    env.policies["json.dumps_function"] = page_json  # the timeline's numpy columns, as the review page writes them
    return env
