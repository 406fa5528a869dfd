"""The review page's fixes from the second review (issue 14's page): the model column and the
"same model" key carry the overlap and data-parallel cost fields and the ``overlap`` option, the
tooltip says how long an overlapped group lasts and that its job spans it, print keeps every overview column and names
the compared cases, find stays inside the step, colours and grid labels read, warnings are reachable.

The unit tests need no browser; the others run in headless Chromium with the fixtures of
``test_html_browser.py`` (skipped with the reason where Chromium or Playwright is missing).
"""

from __future__ import annotations

import math
import re

import pytest

from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.report.charts import cost_label
from harness.report.colours import KIND_COLOURS, STAGE_COLOURS
from harness.report.cost_table import cost_durations, model_notes, overlap_stretch
from harness.report.html import _row, default_pair, render_index
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case
from tests import test_html_browser as shared

_open = shared._open
browser = shared.browser
page = shared.page

F, B = 1_000_000, 2_000_000


def _dualpipev(case_id: str, **kw) -> dict:
    options = kw.pop("options", {})
    case = case_to_dict(run_case(PipelineCase("DualPipeV", stages=4, microbatches=8, options=options,
                                              cost=FixedCost(forward_ns=F, backward_ns=B, **kw)), "sim", range(1, 2), case_id=case_id))
    return dict(case, label=case_id)  # pytest's label: the test's name


@pytest.fixture(scope="module")
def overlap_cases():
    return [_dualpipev("ratio 0.5", overlap_ratio=0.5), _dualpipev("ratio 1", overlap_ratio=1.0),
            _dualpipev("no overlap", options={"overlap": False}), _dualpipev("ratio 0.5 again", overlap_ratio=0.5),
            _dualpipev("group 2.2 ms", overlap_ns=2_200_000)]


@pytest.fixture(scope="module")
def dp_case(tmp_path_factory):
    """The reviewer's dp.csv: PyTorch's UNSHARD/RESHARD/REDUCE_GRAD around 1F1B, p=2, m=2."""
    csv = tmp_path_factory.mktemp("dp") / "dp.csv"
    csv.write_text("0UNSHARD,0F0,0F1,,0B0,,0B1,0RESHARD,0REDUCE_GRAD\n1UNSHARD,,1F0,1B0,1F1,1B1,1RESHARD,1REDUCE_GRAD\n")
    return case_to_dict(run_case(PipelineCase(
        csv, cost=FixedCost(forward_ns=F, backward_ns=B, unshard_ns=300_000, reshard_ns=200_000, reduce_grad_ns=700_000)),
        "sim", range(0, 1), case_id="dp"))


# ---- 1. the model column, the "same model" key, the tooltip -------------------------------------------------------


def test_cost_label_shows_the_overlap_and_data_parallel_fields():
    base = {"model": "fixed", "forward_ns": F, "backward_ns": B}
    assert cost_label(base) == "F=1 B=2 ms"
    assert cost_label({**base, "overlap_ratio": 0.5}) == "F=1 B=2 ms · F&B overlap_ratio 0.5"
    assert cost_label({**base, "overlap_ratio": 1.0}) == "F=1 B=2 ms · F&B overlap_ratio 1"
    assert cost_label({**base, "overlap_ns": 2_500_000}) == "F=1 B=2 ms · F&B group 2.5 ms"
    assert cost_label({**base, "unshard_ns": 300_000, "reshard_ns": 200_000, "reduce_grad_ns": 700_000}) == \
        "F=1 B=2 ms · UNSHARD 0.3 RESHARD 0.2 REDUCE_GRAD 0.7 ms"
    assert cost_label({**base, "reduce_grad_ns": 700_000}) == "F=1 B=2 ms · REDUCE_GRAD 0.7 ms"  # only the fields set


def test_results_record_the_overlap_option_and_the_model_column_shows_it(overlap_cases):
    ratio, _, off, _, _ = overlap_cases
    assert off["options"] == {"overlap": False} and "options" not in ratio
    assert model_notes(off) == ["overlap=False (F&B pairs back to back)"] and model_notes(ratio) == []
    html = render_index(results_document([off, ratio]))
    assert "overlap=False (F&amp;B pairs back to back)" in html and "F=1 B=2 ms · F&amp;B overlap_ratio 0.5" in html


def test_same_model_pairing_tells_overlap_settings_apart(overlap_cases):
    rows = [_row(c, None, None) for c in overlap_cases]
    assert [r["cost"] for r in rows] == ["F=1 B=2 ms · F&B overlap_ratio 0.5", "F=1 B=2 ms · F&B overlap_ratio 1", "F=1 B=2 ms",
                                         "F=1 B=2 ms · F&B overlap_ratio 0.5", "F=1 B=2 ms · F&B group 2.2 ms"]
    assert default_pair(rows)[0] == (0, 3)  # the only two with the same model: not 0 and 1, 1 and 2
    assert default_pair(rows[:3])[0] == (0, 1) and default_pair(rows[:3])[1].startswith("No two cases share their model")


def test_overlap_stretch_says_how_long_the_group_lasts_and_that_each_job_spans_it(overlap_cases):
    ratio, r1, off, _, fixed_g = overlap_cases
    text = overlap_stretch(ratio)
    # DualPipeV p=4 m=8: rank 0 overlaps 0F7 with 7B3 (its first pair); F=1, B=2: 2 + 0.5 (3 - 2) = 2.5 ms
    assert text["0F7"] == ("overlapped F&B group with 7B3: the group lasts 2.5 ms (overlap_ratio 0.5: max + 0.5 × (sum − max)) "
                           "from when every member's input is in; this job (1 ms alone) spans it and hands its output on at its end")
    assert text["7B3"].endswith("this job (2 ms alone) spans it and hands its output on at its end")
    assert overlap_stretch(r1)["0F7"].startswith("overlapped F&B group with 7B3: the group lasts 3 ms (overlap_ratio 1: ")
    assert overlap_stretch(fixed_g)["7B3"].startswith("overlapped F&B group with 0F7: the group lasts 2.2 ms (overlap_ns: every group lasts 2.2 ms)")
    assert overlap_stretch(off) == {}  # no groups
    jobs = ratio["jobs"]  # the sim ran the group time the sentence states, for both jobs
    durs = {(s, k, mb): e - a for s, k, mb, a, e in zip(jobs["stage"], jobs["kind"], jobs["microbatch"], jobs["start_ns"], jobs["end_ns"])}
    assert durs[(0, "F", 7)] == 2_500_000 and durs[(7, "B", 3)] == 2_500_000
    assert len(text) == 2 * sum(1 for _s, _d, e in ratio["deps"] if e == "start")


def test_cost_durations_include_the_data_parallel_kinds(dp_case):
    case = dp_case
    table = cost_durations(case)
    assert {k: v for k, v in table.items() if k.startswith("0,")} == {
        "0,B": B, "0,F": F, "0,UNSHARD": 300_000, "0,RESHARD": 200_000, "0,REDUCE_GRAD": 700_000}


# ---- 5, 6, 7 without a browser ----------------------------------------------------------------------------------


def test_header_names_the_backend_beside_its_reason(overlap_cases):
    html = render_index(results_document(overlap_cases[:1], {"backend": "sim", "backend_reason": "requested"}))
    assert re.search(r" · backend <bdi>sim</bdi> \(<bdi>requested</bdi>\)</div>", html)
    assert "· <bdi>requested</bdi>" not in html
    older = render_index(results_document(overlap_cases[:1], {"backend_reason": "auto: no GPU"}))  # a file without session.backend
    assert " · backend <bdi>sim</bdi> (<bdi>auto: no GPU</bdi>)</div>" in older


def _lab(hex_colour: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of an sRGB colour (the sRGB and CIE formulas, IEC 61966-2-1 and CIE 15)."""
    def lin(c: float) -> float:
        return ((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92
    r, g, b = (lin(int(hex_colour[i:i + 2], 16) / 255) for i in (1, 3, 5))
    x, y, z = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b,
               (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)
    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116
    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def test_no_stage_colour_is_near_a_job_kinds_colour():
    def delta_e(a: str, b: str) -> float:  # CIE76
        return math.dist(_lab(a), _lab(b))
    assert delta_e("#d4846a", "#e76f51") < 21  # the old UNSHARD beside stage 1: what the reviewer saw
    for kind, colour in KIND_COLOURS.items():
        nearest = min(delta_e(colour, s) for s in STAGE_COLOURS)
        assert nearest >= (30 if kind in ("UNSHARD", "RESHARD", "REDUCE_GRAD") else 15), (kind, colour, nearest)


def test_the_warning_badge_links_to_the_listed_warnings(overlap_cases):
    case = dict(overlap_cases[0], warnings=["jobs shorter than the timer's resolution <b>"])
    html = render_index(results_document([overlap_cases[1], case]))
    assert '<a class="warnbadge" href="#case-1-warnings" title="jobs shorter than the timer&#39;s resolution &lt;b&gt;">⚠ 1 warning</a>' in html
    assert ('<ul class="warn" id="case-1-warnings" aria-label="warnings">'
            '<li><bdi>jobs shorter than the timer&#39;s resolution &lt;b&gt;</bdi></li></ul>') in html


# ---- in the browser ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def page_path(tmp_path_factory, overlap_cases, dp_case):
    dp = dp_case
    cases = [dict(overlap_cases[0], warnings=["a warning a user must be able to read"]), overlap_cases[2], dp,
             case_to_dict(run_case(PipelineCase("1F1B", stages=4, microbatches=8, comm=True), "sim", range(1, 3), case_id="1F1B p=4 m=8"))]
    path = tmp_path_factory.mktemp("fixes") / "index.html"
    path.write_text(render_index(results_document(cases, {"backend": "sim", "backend_reason": "requested"})), encoding="utf-8")
    return path


@pytest.mark.browser
def test_tooltip_of_a_grouped_job_says_how_long_the_group_lasts(page, page_path):
    _open(page, page_path)
    tip = page.evaluate("""(() => { const t = window.__harness.caseTimeline(0), d = t.x.d;
        for (let i = 0; i < t.x.n; i++) if (d.stage[i] === 0 && d.mb[i] === 7 && d.kind[i] === 0 && d.step[i] === 1) return t.tipText(i); })()""")
    lines = tip.split("\n")
    # rank 0 runs 0F0..0F6, then 7F/7I/7W of micro-batches 0-2, then 7F3, all 1 ms, idle-free: 0F7 starts at 17 ms
    assert lines[5] == "waited 0.000 µs idle before it", tip
    assert lines[3] == "start 17.000 ms, duration 2.500 ms measured, 1.000 ms cost model alone", tip
    assert lines[4].startswith("overlapped F&B group with 7B3: the group lasts 2.5 ms (overlap_ratio 0.5")
    assert page.problems == []


@pytest.mark.browser
def test_printed_overview_carries_every_column_at_800_px(browser, page_path, tmp_path):
    p = browser.new_page(viewport={"width": 800, "height": 1000})
    _open(p, page_path)
    p.emulate_media(media="print")
    fit = p.evaluate("""() => { const t = document.getElementById('summary'), s = t.closest('.scroll');
        const cells = [...t.querySelectorAll('th, td')].map(c => c.getBoundingClientRect().right);
        return {right: Math.max(...cells), width: document.documentElement.clientWidth, scroll: s.scrollWidth, client: s.clientWidth,
                last: t.tHead.rows[0].lastElementChild.textContent}; }""")
    p.screenshot(path=str(tmp_path / "print-overview-800.png"), full_page=True)
    p.close()
    assert fit["last"] == "traces"
    assert fit["right"] <= fit["width"] and fit["scroll"] <= fit["client"], fit


@pytest.mark.browser
def test_printed_comparison_names_both_cases(page, page_path, tmp_path):
    _open(page, page_path)
    page.emulate_media(media="print")
    names = page.evaluate("""() => ['cmp-th-a', 'cmp-th-b', 'cmp-name-a', 'cmp-name-b'].map(id => {
        const e = document.getElementById(id); return [e.textContent, e.getBoundingClientRect().height > 0]; })""")
    assert names == [["top: ratio 0.5", True], ["bottom: no overlap", True], ["top: ratio 0.5", True], ["bottom: no overlap", True]]
    page.set_viewport_size({"width": 800, "height": 1000})
    right = page.evaluate("Math.max(...[...document.querySelectorAll('#cmp-numbers th, #cmp-numbers td')].map(c => c.getBoundingClientRect().right))")
    assert right <= 800, right  # the table's every column on the page too
    page.emulate_media(media="screen")
    page.select_option("#cmp-b", "2")
    assert page.locator("#cmp-th-b").inner_text() == "bottom: dp.csv" and page.locator("#cmp-name-b").inner_text() == "bottom: dp.csv"
    page.locator("#compare").screenshot(path=str(tmp_path / "compare-head.png"))
    assert page.problems == []


@pytest.mark.browser
def test_find_never_pans_outside_the_step_and_a_selected_match_shows_both_outlines(page, page_path, tmp_path):
    _open(page, page_path)
    k = 3  # 1F1B p=4 m=8, two recorded steps
    tl = f"window.__harness.caseTimeline({k})"
    box = page.locator(f"#case-{k} .find")
    box.fill("0F0")  # the first job of the first step: centring it would start the view before 0
    box.press("Enter")
    t0, t1, end = page.evaluate(f"[{tl}.view.t0, {tl}.view.t1, {tl}.bounds()[1]]")
    assert t0 == 0 and t1 <= end, (t0, t1, end)
    rng = page.locator(f"#case-{k} .range").inner_text()
    assert rng.startswith("view 0.000 µs … "), rng
    box.fill("0B7")  # the last job of rank 0 in the last step: centring it would end the view past the end
    box.press("Enter")
    box.press("Enter")
    t0, t1, end = page.evaluate(f"[{tl}.view.t0, {tl}.view.t1, {tl}.bounds()[1]]")
    assert t0 >= 0 and abs(t1 - end) < 1e-6, (t0, t1, end)
    page.evaluate(f"{tl}.zoom(0.1, {tl}.x.start[{tl}.sel])")  # zoom in so the job is wide
    sel = page.evaluate(f"{tl}.sel")
    colours = page.evaluate(f"""(() => {{ const t = {tl}, r = t.jobRect({sel}), c = t.c, b = c.getBoundingClientRect();
        const dpr = window.devicePixelRatio || 1;
        const x0 = Math.max(0, Math.floor((r.left - b.left) * dpr)), x1 = Math.min(c.width, Math.ceil((r.right - b.left) * dpr));
        const y0 = Math.floor((r.top - b.top - 2) * dpr), y1 = Math.ceil((r.bottom - b.top + 2) * dpr);
        const d = c.getContext('2d').getImageData(x0, y0, x1 - x0, y1 - y0).data; let yellow = 0, black = 0;
        for (let i = 0; i < d.length; i += 4) {{
            if (d[i] > 230 && d[i + 1] > 170 && d[i + 1] < 200 && d[i + 2] < 30) yellow++;
            if (d[i] < 30 && d[i + 1] < 30 && d[i + 2] < 30) black++; }}
        return [yellow, black]; }})()""")
    page.locator(f"#case-{k} .tl").screenshot(path=str(tmp_path / "found-selected.png"))
    assert colours[0] > 50 and colours[1] > 50, colours  # the selection's black and the match's yellow
    assert page.problems == []


def _contrast(fg: tuple[float, ...], bg: tuple[float, ...]) -> float:
    """WCAG 2 contrast ratio of two sRGB colours (0-255)."""
    def lum(c: tuple[float, ...]) -> float:
        lin = [((v / 255 + 0.055) / 1.055) ** 2.4 if v / 255 > 0.03928 else v / 255 / 12.92 for v in c[:3]]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    hi, lo = sorted((lum(fg), lum(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _rgb(css: str) -> tuple[float, ...]:
    return tuple(float(x) for x in re.findall(r"[\d.]+", css)[:3])


@pytest.mark.browser
def test_grid_shortens_data_parallel_labels_and_dimmed_cells_stay_readable(page, page_path, tmp_path):
    _open(page, page_path)
    page.locator("#case-2 .view-grid").click()
    page.locator("#case-2 .grid .cell").first.wait_for()
    cells = page.evaluate("""() => [...document.querySelectorAll('#case-2 .grid .cell')].map(c =>
        [c.textContent, c.title, c.scrollWidth <= c.clientWidth])""")
    texts = sorted(t for t, _, _ in cells)
    assert texts == sorted(["0UNSH", "0RESH", "0RG", "1UNSH", "1RESH", "1RG", "0F0", "0F1", "0B0", "0B1", "1F0", "1F1", "1B0", "1B1"])
    assert {t: title for t, title, _ in cells if title} == {"0UNSH": "0UNSHARD", "0RESH": "0RESHARD", "0RG": "0REDUCE_GRAD",
                                                           "1UNSH": "1UNSHARD", "1RESH": "1RESHARD", "1RG": "1REDUCE_GRAD"}
    assert all(fits for _, _, fits in cells), cells
    page.locator("#case-3 .view-grid").click()
    page.locator("#case-3 .grid .cell").first.wait_for()
    page.locator("#case-3 .grid .cell", has_text=re.compile("^1F3$")).click()
    dim = page.evaluate("""() => [...document.querySelectorAll('#case-3 .grid .cell')].filter(c => !c.className.match(/same-mb|pred|succ|sel|found/))
        .map(c => { const s = getComputedStyle(c); return [s.color, s.backgroundColor, s.opacity, s.backgroundImage]; })""")
    assert dim, "no dimmed cell"
    for fg, bg, opacity, image in dim:
        assert opacity == "1" and "rgba(255, 255, 255, 0.62)" in image, (opacity, image)
        washed = tuple(0.62 * 255 + 0.38 * v for v in _rgb(bg))  # the wash over the kind's colour
        assert _contrast(_rgb(fg), washed) >= 4.5, (fg, bg)
    page.locator("#case-3").screenshot(path=str(tmp_path / "grid-dimmed.png"))
    assert page.problems == []


@pytest.mark.browser
def test_the_warning_badge_leads_to_the_warning_text(page, page_path):
    _open(page, page_path)
    page.locator("#summary a.warnbadge").click()
    target = page.locator("#case-0-warnings")
    assert target.inner_text() == "a warning a user must be able to read"
    assert page.evaluate("location.hash") == "#case-0-warnings" and target.is_visible()
    assert page.problems == []


@pytest.mark.browser
def test_overview_with_the_longer_model_cells_and_warning_links_still_fits_1400_px(page, page_path):
    _open(page, page_path)  # the shared page: 1400 px wide
    fit = page.evaluate("""() => { const box = document.querySelector('.scroll');
        return {scroll: box.scrollWidth, client: box.clientWidth,
                right: Math.max(...[...document.querySelectorAll('#summary td:last-child')].map(td => td.getBoundingClientRect().right))}; }""")
    assert fit["scroll"] <= fit["client"] and fit["right"] <= 1400, fit
    assert page.problems == []


def test_a_receive_starting_with_its_send_is_no_overlapped_group():
    # Transfers are joined by start dependencies too; taking each pair for an F&B group cost 2.5 s of
    # write_report per 200k jobs and gave transfers a group sentence.
    from harness.report.cost_table import overlap_stretch
    from harness.report.results import case_to_dict
    from harness.runner import run_case

    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2, comm=True, cost=FixedCost.ms(F=1, B=2)),
                                 "sim", range(0, 1)))
    assert any(edge == "start" for _, _, edge in case["deps"])
    assert overlap_stretch(case) == {}


def test_drag_keys_and_zoom_never_pan_outside_the_step(page, page_path):
    # Noticed after the Find fix: dragging or the arrow keys could still start the view before 0.
    _open(page, page_path)
    k = 3
    tl = f"window.__harness.caseTimeline({k})"
    page.evaluate(f"{tl}.zoom(0.25, {tl}.view.t0)")  # zoomed in at the start
    canvas = page.locator(f"#case-{k} .tl canvas")
    canvas.focus()
    page.locator(f"#case-{k} .tl").press("ArrowLeft")
    assert page.evaluate(f"{tl}.view.t0") == 0
    box = canvas.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + 300, y)
    page.mouse.down()
    page.mouse.move(box["x"] + 700, y, steps=4)  # drag right: earlier time
    page.mouse.up()
    assert page.evaluate(f"{tl}.view.t0") == 0
    page.evaluate(f"{tl}.zoom(8, {tl}.view.t1)")  # zoom out past the whole step
    t0, t1, b = page.evaluate(f"[{tl}.view.t0, {tl}.view.t1, {tl}.bounds()]")
    assert t0 == b[0] == 0 and t1 > b[1]
    for _ in range(3):
        page.locator(f"#case-{k} .tl").press("ArrowRight")
    assert page.evaluate(f"{tl}.view.t0") == 0  # wider than the step: it stays at its start
    page.evaluate(f"{tl}.reset()")
    page.evaluate(f"{tl}.zoom(0.25, {tl}.bounds()[1])")
    for _ in range(20):
        page.locator(f"#case-{k} .tl").press("ArrowRight")
    t1, end = page.evaluate(f"[{tl}.view.t1, {tl}.bounds()[1]]")
    assert abs(t1 - end) < 1e-6
    assert page.problems == []


@pytest.mark.browser
def test_a_control_of_a_case_not_drawn_yet_still_works(page, page_path):
    # CI under load: case 2's grid button was clicked before idle time or its scroll into view had made its timeline
    # (which wires its toolbar), and the click was lost. No idle time and no scroll observer here: only case 0 is made
    page.add_init_script("window.requestIdleCallback = function () { return 0; }; window.setTimeout = function () { return 0; };"
                         " delete window.IntersectionObserver;")
    _open(page, page_path)
    assert page.evaluate("() => !document.querySelector('#case-2 .tl[data-case]').__tl")  # not made yet
    page.locator("#case-2 .view-grid").click()
    page.locator("#case-2 .grid .cell").first.wait_for(timeout=5_000)
    assert page.locator("#case-2 .view-grid").get_attribute("aria-pressed") == "true"
    assert page.problems == []
