"""The chooser's page (harness.report.choose_page) and its pytest face (harness.pytest.choose): the page
shows every row, the limit, the Pareto front, the no-fit message and the exclusions, escapes what it is
given and is written atomically; choose_params' cases reproduce each row's step on sim."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.choose.layout_search import EVEN_NONE, search_layout
from harness.errors import ConfigError
from harness.model.transformer import TransformerCost
from harness.pytest.choose import choose_params, row_id
from harness.report.choose_page import pareto_front, recompute_text, render_choose_page, scatter_chart, write_choose_page
from harness.runner import run_case

SMALL = TransformerCost(hidden_size=256, seq_len=128, micro_batch_size=1, num_layers=7, tflops=10, vocab_size=3000,
                        num_attention_heads=4)
GIB = 2**30
P, M = 2, 4
SCHEDULES = (("1F1B", 1), ("ZB-H1", 1), ("ZB-H2", 1), ("Interleaved1F1B", 2))


def _document() -> dict[str, Any]:
    """A chooser document built by hand from search_layout's answers (the shape rank.py writes), through JSON."""
    free = search_layout("1F1B", P, M, 1, SMALL)
    limit = int(max(free.baselines[EVEN_NONE].peak_bytes_per_rank) * 0.97)  # the even split without recomputation does not fit
    rows = []
    for schedule, v in SCHEDULES:
        c = search_layout(schedule, P, M, v, SMALL, memory_limit_bytes=limit)
        rows.append({"schedule": schedule, "v": v, "m": M, **c.best.to_dict(), "options": {}, "comm_model": "stream",
                     "decomposition": c.decomposition,
                     "search": {"evaluated": c.evaluated, "lower_bound_ns": c.lower_bound_ns, "proven_optimal": c.proven_optimal,
                                "method": c.method, "baselines": {k: b.to_dict() for k, b in c.baselines.items()}}})
    rows.sort(key=lambda r: (not r["fits"], r["step_ns"], r["schedule"], r["v"], r["m"]))
    for k, r in enumerate(rows):
        r["rank"], r["best"] = k + 1, k == 0 and r["fits"]
    doc = {"query": {"p": P, "microbatches": [M], "chunks": [1, 2], "schedules": [s for s, _ in SCHEDULES], "comm_model": "stream",
                     "recompute": "search", "layout": "search", "memory_limit_bytes": limit, "base": dataclasses.asdict(SMALL)},
           "assumptions": ["Compute and communication do not overlap.", "Per-chunk durations come from the layer counts."],
           "limit_bytes": limit, "smallest_fitting_limit_bytes": None, "rows": rows,
           "excluded": [{"schedule": "ZB-V", "v": 3, "m": M, "reason": "ZB-V places exactly 2 chunks per rank, not 3"}]}
    return json.loads(json.dumps(doc))


DOC = _document()


def _row(schedule: str, v: int, m: int, step_ms: float, peak_gib: float, fits: bool, rank: int, **extra: Any) -> dict[str, Any]:
    return {"rank": rank, "schedule": schedule, "v": v, "m": m, "layout": "Et*4|t*3L", "recompute": "none", "options": {},
            "comm_model": "stream", "step_ns": int(step_ms * 1e6), "bubble": 0.1, "peak_bytes": int(peak_gib * GIB),
            "peak_bytes_per_rank": [int(peak_gib * GIB)] * 2, "fits": fits, "best": False, **extra}


def _hand_made() -> dict[str, Any]:
    """Known values: A (10 GiB, 100 ms), B (20, 80), C (15, 120), D (30, 80), E (40, 50, over the 35 GiB limit)."""
    rows = [_row("B", 1, 8, 80, 20, True, 1, best=True), _row("D", 1, 8, 80, 30, True, 2), _row("A", 1, 8, 100, 10, True, 3),
            _row("C", 1, 8, 120, 15, True, 4), _row("E", 1, 8, 50, 40, False, 5)]
    return {"query": {"p": 2, "microbatches": [8], "chunks": [1], "schedules": None, "memory_limit_bytes": 35 * GIB},
            "assumptions": ["an assumption"], "limit_bytes": 35 * GIB, "smallest_fitting_limit_bytes": None, "rows": rows,
            "excluded": []}


def _points(html: str) -> dict[int, set[str]]:
    """Per rank, the classes of its scatter point."""
    return {int(rank): set(cls.split()) for cls, rank in re.findall(r'<g class="([^"]*)" data-rank="(\d+)"', html)}


def test_the_page_shows_the_question_every_row_the_limit_and_the_assumptions(tmp_path: Path) -> None:
    path = write_choose_page(DOC, tmp_path / "page")
    assert path == tmp_path / "page" / "index.html"
    html = path.read_text(encoding="utf-8")
    body = html[html.index('<table id="ranked">'):html.index('<h2 id="excluded-list">')]
    for r in DOC["rows"]:
        assert f'<td class="l"><bdi>{r["schedule"]}</bdi></td><td>{r["v"]}</td><td>{r["m"]}</td>' in body
        assert f'<code>{r["layout"]}</code>' in body
        assert f"{r['step_ns'] / 1e6:,.3f}" in body
        assert recompute_text(r["recompute"]) in body
    # the best row is the first and marked; every row here fits
    assert re.search(r'<tr class="best( front)?" data-rank="1">', body)
    assert body.count('class="fits">yes<') == len(DOC["rows"])
    # the question and the assumptions, near the top, before the figures
    assert DOC["limit_bytes"] < GIB  # shown in the unit that shows it
    assert f'<b id="limit">{DOC["limit_bytes"] / 2**20:.3g} MiB</b>' in html
    assert "on <b>p=2</b> pipeline ranks" in html and "v = <bdi>1, 2</bdi>" in html and "m = <bdi>4</bdi>" in html
    assert "hidden 256, layers 7, heads 4" in html
    for a in DOC["assumptions"]:
        assert html.index(a) < html.index('id="chart"') < html.index('<table id="ranked">')
    # the limit line, at the limit's place on the x axis
    chart = scatter_chart(DOC["rows"], DOC["limit_bytes"])
    assert chart is not None and chart["limit"] is not None
    assert f'<line class="limit" x1="{chart["limit"]["x"]:.1f}"' in html
    assert all(p["x"] <= chart["limit"]["x"] for p in chart["points"])  # every row fits: left of the line
    # each row's baselines and search, in its details cell
    for r in DOC["rows"]:
        assert f"{r['search']['evaluated']} candidates evaluated" in html
        assert f"lower bound {r['search']['lower_bound_ns'] / 1e6:,.3f} ms" in html
    assert html.count("even split, no recomputation") == len(DOC["rows"])
    # exclusions with their reasons
    assert "<td><bdi>ZB-V</bdi></td><td>3</td><td>4</td><td><bdi>ZB-V places exactly 2 chunks per rank, not 3</bdi></td>" in html
    assert 'id="nofit"' not in html


def test_the_page_is_self_contained(tmp_path: Path) -> None:
    html = write_choose_page(DOC, tmp_path).read_text(encoding="utf-8")
    assert "default-src 'none'" in html
    assert not re.search(r'\b(src|href)="(?!#)', html)  # no file or address loaded, only in-page anchors
    assert "<link" not in html and "@import" not in html


def test_recompute_is_summarised_per_stage() -> None:
    assert recompute_text("none") == "none"
    assert recompute_text("full") == "full on every stage"
    assert recompute_text(["selective", "selective", "selective", "none", "none", "none", "none", "none"]) \
        == "selective on stages 0-2, none elsewhere"
    assert recompute_text(["full", "selective", "selective", "none", "none", "none"]) \
        == "full on stage 0, selective on stages 1-2, none elsewhere"
    assert recompute_text(["full", "full", "none", "full"]) == "none on stage 2, full elsewhere"
    assert recompute_text(["selective", "none", "selective", "none"]) == "selective on stages 0, 2, none elsewhere"
    assert recompute_text(["none", "none"]) == "none"


def test_the_pareto_front_of_known_values(tmp_path: Path) -> None:
    doc = _hand_made()
    points = [(r["peak_bytes"], r["step_ns"]) for r in doc["rows"]]
    # rows: B, D, A, C, E; the front in increasing peak: A (10 GiB), B (20), E (40); C (15 GiB, 120 ms) is beaten by A,
    # D (30 GiB, 80 ms) by B (the same step at less memory)
    assert pareto_front(points) == [2, 0, 4]
    html = render_choose_page(doc)
    classes = _points(html)
    assert {rank for rank, c in classes.items() if "front" in c} == {3, 1, 5}
    assert {rank for rank, c in classes.items() if "best" in c} == {1}
    assert {rank for rank, c in classes.items() if "nofit" in c} == {5}
    chart = scatter_chart(doc["rows"], doc["limit_bytes"])
    assert chart is not None
    xs = {p["rank"]: p["x"] for p in chart["points"]}
    ys = {p["rank"]: p["y"] for p in chart["points"]}
    # the step line: from A right to B's peak, down to B's step, right to E's peak, down to E's step, right to the edge
    assert chart["front_path"] == (f"M{xs[3]:.1f},{ys[3]:.1f} H{xs[1]:.1f} V{ys[1]:.1f} H{xs[5]:.1f} V{ys[5]:.1f} "
                                   f"H{chart['right']:.1f}")
    assert f'd="{chart["front_path"]}"' in html
    assert xs[2] < chart["limit"]["x"] < xs[5]  # the 35 GiB line between D (30 GiB) and E (40 GiB)
    assert chart["limit"]["label"] == "limit 35 GiB"
    assert ys[5] > chart["top"] and ys[4] < chart["bottom"]  # every point inside the plot
    # the table marks the row over the limit
    assert re.search(r'<tr class="nofit front" data-rank="5">', html)
    # two equal points: only the first is on the front
    assert pareto_front([(5, 7), (5, 7), (4, 9)]) == [2, 0]


def test_nothing_fits_says_the_smallest_limit_that_would(tmp_path: Path) -> None:
    doc = _hand_made()
    for r in doc["rows"]:
        r["fits"], r["best"] = False, False
    doc["limit_bytes"] = 5 * GIB
    doc["smallest_fitting_limit_bytes"] = 10 * GIB + 12345
    doc["rows"][2]["peak_bytes"] = 10 * GIB + 12345  # A, ranked third: the rows are not ranked by peak
    html = write_choose_page(doc, tmp_path).read_text(encoding="utf-8")
    message = html[html.index('<p class="nofit" id="nofit">'):]
    message = message[:message.index("</p>")]
    assert "Nothing fits within 5 GiB per rank." in message
    assert f"{10 * GIB + 12345:,} bytes" in message and "10.00 GiB" in message
    assert "(the lowest peak of any row: #3 A v=1 m=8)." in message
    assert 'class="best' not in html  # no row is marked best
    doc["rows"] = []
    html = render_choose_page(doc)
    assert "No configuration could be built for these sizes" in html


def test_every_string_is_escaped() -> None:
    hostile = '<img src=x onerror="alert(1)">&'
    doc = _hand_made()
    doc["rows"][0].update(schedule=hostile, layout=hostile, options={"x": hostile})
    doc["assumptions"] = [hostile]
    doc["excluded"] = [{"schedule": hostile, "v": 1, "m": 8, "reason": hostile}]
    doc["query"]["base"] = {"hidden_size": hostile}
    html = render_choose_page(doc)
    assert "<img" not in html and 'onerror="' not in html
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;&amp;" in html
    # in the scatter's tooltip too
    title = re.search(r'<g class="pt[^"]*" data-rank="1"><title>([^<]*)</title>', html)
    assert title is not None and "&lt;img" in title.group(1)


def test_a_document_without_rows_is_refused() -> None:
    with pytest.raises(ConfigError, match="no 'rows' key"):
        render_choose_page({"query": {}})
    doc = _hand_made()
    del doc["rows"][1]["peak_bytes"]
    with pytest.raises(ConfigError, match="row 1 has no 'peak_bytes'"):
        render_choose_page(doc)
    with pytest.raises(ConfigError, match="no 'rows'"):
        choose_params({"query": {"p": 2}})


def test_a_failed_write_keeps_the_earlier_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_choose_page(DOC, tmp_path)
    before = path.read_bytes()
    # a document the page refuses: nothing is written
    with pytest.raises(ConfigError):
        write_choose_page({"query": {}}, tmp_path)
    assert path.read_bytes() == before

    def no_rename(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(OSError, match="No space left"):
        write_choose_page(_hand_made(), tmp_path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.html"]  # the temporary file is gone
    assert b'data-rank="5"' not in before and b'data-rank="5"' in write_choose_page(_hand_made(), tmp_path).read_bytes()


def test_timelines_reuse_the_review_pages_timeline(tmp_path: Path) -> None:
    params = choose_params(DOC, top=2)
    results = [(f"#{k + 1} <{p.id}>", run_case(p.values[0], backend="sim")) for k, p in enumerate(params)]
    html = write_choose_page(DOC, tmp_path, results).read_text(encoding="utf-8")
    data = re.search(r'<script type="application/json" id="harness-data">(.*?)</script>', html, re.S)
    assert data is not None
    payload = json.loads(data.group(1))
    assert [c["label"] for c in payload["cases"]] == [label for label, _ in results]
    for c, (_, result) in zip(payload["cases"], results):
        assert len(c["lanes"]) == len(result.records.streams)
        assert len(c["gap"]) == len(result.records.columns.start_ns)  # every job of the run
    assert "function Timeline(el, k, view)" in html and "function wire(tl)" in html
    assert html.count('<div class="tl" data-case="') == 2
    for label, _ in results:
        assert f"<h3><bdi>{label.replace('<', '&lt;').replace('>', '&gt;')}</bdi></h3>" in html
    assert "<" + params[0].id + ">" not in html  # escaped in the heading, and the JSON's < is \u003c
    assert 'id="tip"' in html
    # without timelines, no script at all
    assert "<script" not in render_choose_page(DOC)


# -- choose_params ------------------------------------------------------------------------------------
FITTING = [r for r in DOC["rows"] if r["fits"]]


@pytest.mark.parametrize("case", choose_params(DOC, top=3))
def test_choose_params_reproduce_each_rows_step_on_sim(case: Any) -> None:
    row = next(r for r in DOC["rows"] if (r["schedule"], r["v"], r["m"]) == (case.schedule, case.chunks, case.microbatches))
    result = run_case(case, backend="sim")
    assert round(result.metrics.step_time_median_ns) == row["step_ns"]
    assert tuple(result.memory.peak_bytes) == tuple(row["peak_bytes_per_rank"])
    assert case.memory_limit_bytes == DOC["limit_bytes"] and case.stages == P
    assert case.cost.layout == row["layout"]
    assert case.cost.recompute == (row["recompute"] if isinstance(row["recompute"], str) else tuple(row["recompute"]))


def test_choose_params_ids_and_defaults() -> None:
    params = choose_params(DOC, top=3)
    assert [p.id for p in params] == [row_id(r) for r in FITTING[:3]]
    assert all(re.fullmatch(r"[A-Za-z0-9._+-]+", p.id) for p in params)
    assert len(choose_params(DOC, top=10)) == len(FITTING)

    class Result:
        def to_document(self) -> dict[str, Any]:
            return DOC

    assert [p.id for p in choose_params(Result(), top=3)] == [p.id for p in params]
    other = choose_params(DOC, top=1, base=dataclasses.replace(SMALL, tflops=20), p=P, memory_limit_bytes=GIB)
    assert other[0].values[0].cost.tflops == 20 and other[0].values[0].memory_limit_bytes == GIB
    with pytest.raises(ConfigError, match="top"):
        choose_params(DOC, top=0)


def test_choose_params_ids_on_known_rows() -> None:
    base = dataclasses.asdict(SMALL)
    rows = [
        _row("ZB-H2", 1, 32, 10, 1, True, 1, recompute=["selective", "selective", "selective", "none", "none"]),
        _row("1F1B", 1, 32, 11, 1, True, 2),
        _row("ZB-H1", 1, 32, 12, 1, True, 3, recompute=["full", "selective", "none", "none"]),
        _row("ZB-H1", 1, 32, 13, 1, True, 4, recompute=["full", "full", "none", "full"]),
        _row("Interleaved 1F1B", 2, 32, 14, 1, True, 5),
        _row("ZB-V", 2, 32, 15, 1, True, 6, layout="Et*4|t*3L"),
        _row("ZB-V", 2, 32, 16, 1, True, 7, layout="Et*3|t*4L"),
        _row("ZB-H2", 1, 32, 17, 1, False, 8),
    ]
    doc = {"query": {"p": 2, "base": base, "memory_limit_bytes": None}, "rows": rows}
    ids = [p.id for p in choose_params(doc, top=10)]
    assert ids == ["ZB-H2-v1-m32-selective0-2", "1F1B-v1-m32-none", "ZB-H1-v1-m32-full0_selective1",
                   "ZB-H1-v1-m32-full0-1.3", "Interleaved_1F1B-v2-m32-none", "ZB-V-v2-m32-none-L4.3", "ZB-V-v2-m32-none-L3.4"]
    every = choose_params(doc, top=10, fitting_only=False)
    assert [p.id for p in every][-1] == "ZB-H2-v1-m32-none"
    assert [p.id for p in choose_params(doc, top=2)] == ids[:2]


def test_a_rows_baselines_and_search_are_shown_with_their_values() -> None:
    doc = _hand_made()
    doc["rows"][0]["recompute"] = ["selective", "none"]
    doc["rows"][0]["search"] = {
        "evaluated": 63, "lower_bound_ns": 75_000_000, "proven_optimal": True, "method": "exhaustive: every one of 63 candidates",
        "baselines": {"even split, no recomputation": {"layout": "Et*4|t*3L", "recompute": "none", "step_ns": 88_000_000,
                                                       "peak_bytes": 50 * GIB, "fits": False},
                      "even split, best uniform recomputation": {"layout": "Et*4|t*3L", "recompute": "full", "step_ns": 96_000_000,
                                                                 "peak_bytes": 12 * GIB, "fits": True}}}
    doc["rows"][0]["decomposition"] = {"step_ns": 80_000_000, "ideal_ns": 70_000_000, "imbalance_ns": 1_000_000, "recompute_ns": 4_000_000,
                                       "comm_ns": 0, "schedule_ns": 5_000_000, "busiest_rank": 0}
    html = render_choose_page(doc)
    row = html[html.index('data-rank="1">\n<td>1'):]
    row = row[:row.index("</tr>\n<tr")]
    assert "<summary>63 evaluated, proven optimal</summary>" in row
    assert ('<tr><td class="l">even split, no recomputation</td><td class="l"><code>Et*4|t*3L</code></td><td class="l">none</td>'
            "<td>88.000</td><td>+10.0%</td><td>50.00</td><td>no</td></tr>") in row
    assert ('<td class="l">full on every stage</td><td>96.000</td><td>+20.0%</td><td>12.00</td><td>yes</td></tr>') in row
    assert "lower bound 75.000 ms; proven optimal; method: exhaustive: every one of 63 candidates" in row
    assert ("step 80.000 ms = ideal 70.000 + imbalance 1.000 + recompute 4.000 + comm 0.000 + schedule bubble 5.000 ms") in row
    assert '<td class="rec" title="per stage: 0: selective, 1: none">selective on stage 0, none elsewhere</td>' in row


def test_a_minimal_document_with_one_row_and_no_memory_model() -> None:
    doc = {"rows": [{"schedule": "1F1B", "v": 1, "m": 8, "layout": "t*4|t*4", "recompute": "none", "step_ns": 5_000_000,
                     "peak_bytes": 0, "fits": True}]}
    html = render_choose_page(doc)
    assert "within <b id=\"limit\">no memory limit</b> per rank" in html
    assert 'class="limit"' not in html  # no line without a limit
    assert _points(html) == {1: {"pt", "front", "best"}}  # the only row: on the front, and (no "best" key) the best
    assert "The document states none." in html and 'id="excluded"' not in html


def test_choose_params_needs_p_and_a_model() -> None:
    rows = [_row("1F1B", 1, 8, 10, 1, True, 1)]
    with pytest.raises(ConfigError, match="give p"):
        choose_params({"query": {}, "rows": rows})
    with pytest.raises(ConfigError, match="give base"):
        choose_params({"query": {"p": 2}, "rows": rows})
    (param,) = choose_params({"query": {}, "rows": rows}, p=2, base=SMALL)
    assert param.id == "1F1B-v1-m8-none" and param.values[0].memory_limit_bytes is None
    del rows[0]["layout"]
    with pytest.raises(ConfigError, match="row 1 has no 'layout' key"):
        choose_params({"query": {}, "rows": rows}, p=2, base=SMALL)


#: A stand-in for the browser's DOM, enough for the timeline scripts to build, wire and draw each timeline:
#: every element answers any selector with an element of its own, the canvas's context ignores every call.
_DOM_STUB = r"""
const fs = require('fs');
const [script, data, cases] = [0, 1, 2].map(i => fs.readFileSync(process.argv[2 + i], 'utf8'));
const ctx = new Proxy({}, { get(t, p) { if (p === 'measureText') return () => ({ width: 10 }); return p in t ? t[p] : () => {}; },
                            set(t, p, v) { t[p] = v; return true; } });
class El {
  constructor() { this.attrs = {}; this.style = {}; this.kids = {}; this.hidden = false; this.checked = false; this.value = '';
    this.classList = { add() {}, remove() {}, contains() { return false; } }; this.parentNode = {}; this.clientWidth = 1200;
    this.width = 0; this.height = 0; this.textContent = ''; }
  querySelector(sel) { return this.kids[sel] || (this.kids[sel] = new El()); }
  querySelectorAll() { return []; }
  closest() { return this.section; }
  addEventListener() {} focus() {} appendChild() {}
  setAttribute(k, v) { this.attrs[k] = String(v); } getAttribute(k) { return this.attrs[k]; }
  getBoundingClientRect() { return { left: 0, top: 0, width: 1200, height: 300 }; }
  getContext() { return ctx; }
}
const tls = JSON.parse(cases).map(k => { const el = new El(); el.attrs['data-case'] = k; el.section = new El(); return el; });
global.window = { addEventListener() {}, devicePixelRatio: 1, innerWidth: 1400, innerHeight: 900 };
global.document = { getElementById(id) { return id === 'harness-data' ? { textContent: data } : new El(); },
                    querySelectorAll(sel) { return sel === '.tl[data-case]' ? tls : []; },
                    createElement() { return new El(); }, createDocumentFragment() { return new El(); } };
global.requestAnimationFrame = () => {};
eval(script);
console.log(JSON.stringify({ timelines: window.__harness.timelines.length, errors: window.__harness.errors,
                             drawn: tls.map(t => t.attrs['data-drawn']), t1: tls.map(t => +t.attrs['data-t1']) }));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="the page-script check needs Node.js (node)")
def test_the_timeline_scripts_build_and_draw_each_timeline(tmp_path: Path) -> None:
    """The review page's timeline scripts, run by Node.js on a stand-in DOM: every timeline of the page is
    built, wired to its toolbar and drawn, opening on its step (no browser here: the drawing itself is not checked)."""
    params = choose_params(DOC, top=2)
    results = [(p.id, run_case(p.values[0], backend="sim")) for p in params]
    html = render_choose_page(DOC, results)
    script = re.findall(r"<script>(.*?)</script>", html, re.S)
    data = re.search(r'<script type="application/json" id="harness-data">(.*?)</script>', html, re.S)
    assert len(script) == 1 and data is not None
    files = []
    for name, text in (("page.js", script[0]), ("data.json", data.group(1)),
                       ("cases.json", json.dumps(re.findall(r'<div class="tl" data-case="(\d+)"', html))), ("dom.js", _DOM_STUB)):
        (tmp_path / name).write_text(text, encoding="utf-8")
        files.append(str(tmp_path / name))
    out = subprocess.run(["node", files[3], *files[:3]], capture_output=True, text=True, timeout=120, check=True)
    report = json.loads(out.stdout)
    assert report["timelines"] == 2 and report["errors"] == [] and report["drawn"] == ["1", "1"]
    # each view ends at or after its step's end (µs), within the step and a small margin
    for t1, (_, result) in zip(report["t1"], results):
        step_us = result.metrics.step_time_median_ns / 1e3
        assert step_us <= t1 <= 1.1 * step_us


def test_the_chooser_writes_the_document_the_page_and_choose_params_read(tmp_path: Path) -> None:
    """The real chooser's document (harness.choose.rank) has the rows the hand-made DOC has, and the page and
    choose_params read it alike."""
    from harness.choose.query import ChooseQuery
    from harness.choose.rank import choose

    query = ChooseQuery(SMALL, P, (M,), chunks=(1, 2), schedules=tuple(s for s, _ in SCHEDULES), memory_limit_bytes=DOC["limit_bytes"])
    real = json.loads(json.dumps(choose(query, executor="serial", progress=False).to_document()))
    keys = ("rank", "schedule", "v", "m", "layout", "recompute", "step_ns", "peak_bytes", "peak_bytes_per_rank", "fits", "best")
    assert [{k: r[k] for k in keys} for r in real["rows"]] == [{k: r[k] for k in keys} for r in DOC["rows"]]
    assert [r["search"]["baselines"] for r in real["rows"]] == [r["search"]["baselines"] for r in DOC["rows"]]
    assert real["query"]["base"] == DOC["query"]["base"] and real["limit_bytes"] == DOC["limit_bytes"]
    assert [p.id for p in choose_params(real, top=3)] == [p.id for p in choose_params(DOC, top=3)]
    page = write_choose_page(real, tmp_path).read_text(encoding="utf-8")
    for row in real["rows"]:
        assert f'data-rank="{row["rank"]}"' in page
    assert "no tensor parallelism (TP=1)" in page  # the real assumptions, not DOC's hand-written ones


def test_a_schedule_excluded_for_every_v_and_m_says_so() -> None:
    doc = _hand_made()
    doc["excluded"] = [{"schedule": "Interleaved1F1B", "v": None, "m": None,
                        "reason": "Interleaved1F1B interleaves v >= 2 chunks per rank and the query's chunks are [1]"},
                       *({"schedule": "DualPipe", "v": 2, "m": m, "reason": "chains"} for m in (8, 16))]
    doc["limit_bytes"] = 20 * 2**20
    html = render_choose_page(doc)
    table = html[html.index('<table id="excluded">'):]
    table = table[:table.index("</table>")]
    assert "<td>every</td><td>every</td>" in table and "None" not in table
    assert "<td><bdi>DualPipe</bdi></td><td>2</td><td>8, 16</td><td><bdi>chains</bdi></td>" in table  # one row for both m
    assert '<b id="limit">20 MiB</b>' in html
