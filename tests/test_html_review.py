"""The review page's schedule grid, timeline controls, comparison view and print, in real headless Chromium.

Same browser set-up as ``test_html_browser.py`` (Debian's ``chromium`` driven by
Playwright; skipped with the reason where either is missing). Screenshots go
to each test's ``tmp_path``.
"""

from __future__ import annotations

from itertools import pairwise

import pytest

from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.report.html import render_index
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case
from tests import test_html_browser as shared

_open = shared._open
browser = shared.browser  # the shared browser fixtures
page = shared.page

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def review(tmp_path_factory):
    cases = [case_to_dict(run_case(PipelineCase(schedule, stages=4, microbatches=8, chunks=v, comm=True), "sim", range(1, 3),
                                   case_id=f"{schedule} p=4 m=8"))
             for schedule, v in (("1F1B", 1), ("ZB-H1", 1), ("Interleaved1F1B", 2))]
    cases.append(case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=2, B=4)), "sim", range(0, 1),
                                       case_id="1F1B p=2 m=4 slow")))
    path = tmp_path_factory.mktemp("review") / "index.html"
    path.write_text(render_index(results_document(cases)), encoding="utf-8")
    return path, cases


def _grid(page, k):
    page.locator(f"#case-{k} .view-grid").click()
    page.locator(f"#case-{k} .grid .cell").first.wait_for()


def test_grid_labels_every_job_of_p4_m8(page, review, tmp_path):
    path, _ = review
    _open(page, path)
    _grid(page, 0)
    assert page.locator("#case-0 .tl").is_hidden()
    cells = page.evaluate("""() => [...document.querySelectorAll('#case-0 .grid-row[data-rank]')].map(r =>
        [+r.dataset.rank, [...r.querySelectorAll('.cell')].map(c => [c.textContent, Math.round(parseFloat(c.style.left))])])""")
    ranks = [r for r, row in cells]
    assert ranks == [0, 1, 2, 3]  # one row per compute stream; comm lanes are not grid rows
    labels = sorted(lab for _, row in cells for lab, _ in row)
    assert labels == sorted(f"{s}{k}{m}" for s in range(4) for k in "FB" for m in range(8))  # all 64 jobs of the step, once
    # 1F1B on 4 ranks: rank 3 idles 3 slots, then alternates F and B; rank 0 ends 3 slots after rank 3.
    row3 = [lab for lab, _ in sorted(cells[3][1], key=lambda c: c[1])]
    assert row3[:4] == ["3F0", "3B0", "3F1", "3B1"]
    lefts3 = sorted(x for _, x in cells[3][1])
    assert (lefts3[0] - 150) // 30 == 3
    note = page.locator("#case-0 .grid-head .hint").inner_text()
    assert "4 compute streams × 22 slots, 64 jobs, 24 idle slots" in note
    page.locator("#case-0").screenshot(path=str(tmp_path / "grid.png"))
    page.locator("#case-0 .view-tl").click()
    assert page.locator("#case-0 .tl").is_visible() and page.locator("#case-0 .grid").is_hidden()
    assert page.problems == []


def test_selecting_1f3_highlights_micro_batch_3_on_every_rank(page, review, tmp_path):
    path, _ = review
    _open(page, path)
    _grid(page, 0)
    page.locator("#case-0 .grid .cell", has_text="1F3").click()
    marked = page.evaluate("""() => ({
        same: [...document.querySelectorAll('#case-0 .cell.same-mb')].map(c => [c.closest('.grid-row').dataset.rank, c.textContent]),
        pred: [...document.querySelectorAll('#case-0 .cell.pred')].map(c => c.textContent),
        succ: [...document.querySelectorAll('#case-0 .cell.succ')].map(c => c.textContent),
        sel: document.querySelector('#case-0 .cell.sel').textContent})""")
    assert marked["sel"] == "1F3"
    assert sorted(marked["same"]) == sorted([str(s), f"{s}{k}3"] for s in range(4) for k in "FB")
    # With comm lanes, 1F3 waits for its receive and feeds its send: transfers are not grid cells.
    tl = "window.__harness.caseTimeline(0)"
    assert page.evaluate(f"{tl}.markedRanks()") == [0, 1, 2, 3]
    preds, succs = page.evaluate(f"(() => {{ const t = {tl}, m = t.marked(t.sel), d = t.x.d;"
                                 " const lab = i => d.stage[i] + window.__harness.kinds[d.kind[i]].name + (d.mb[i] < 0 ? '' : d.mb[i]);"
                                 " return [m.preds.map(lab), m.succs.map(lab)]; })()")
    assert preds == ["1RECV_F3"] and succs == ["1SEND_F3"]
    assert "selected 1F3 (step 1): micro-batch 3 on rank(s) 0, 1, 2, 3 outlined" in page.locator("#case-0 .sel-info").inner_text()
    page.locator("#case-0").screenshot(path=str(tmp_path / "grid-selected.png"))
    # The same selection on the timeline, whose tooltip puts the cost model beside the measured duration.
    page.locator("#case-0 .view-tl").click()
    page.evaluate(f"{tl}.el.scrollIntoView()")
    i = page.evaluate(f"{tl}.sel")
    rect = page.evaluate(f"{tl}.jobRect({i})")
    page.mouse.move((rect["left"] + rect["right"]) / 2, (rect["top"] + rect["bottom"]) / 2)
    tip = page.locator("#tip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert "1F3: stage 1, F, micro-batch 3, chunk 0, step 1" in text
    assert "duration 1.000 ms measured, 1.000 ms cost model" in text
    assert "waited 0.000 µs idle before it" in text  # 1F1B on sim: 1F3 starts the moment its receive ends
    page.locator("#case-0").screenshot(path=str(tmp_path / "timeline-selected.png"))
    assert page.problems == []


def test_hiding_comm_lanes_removes_them_and_collapsing_a_rank(page, review, tmp_path):
    path, _ = review
    _open(page, path)
    tl = "window.__harness.caseTimeline(0)"
    before = page.evaluate(f"{tl}.visibleLanes()")
    assert sum("comm" in lane for lane in before) == 6 and len(before) == 10  # 4 compute + 6 comm (ranks 1, 2 have two)
    h0 = page.evaluate(f"{tl}.cssH")
    page.locator("#case-0 .comm-toggle").uncheck()
    after = page.evaluate(f"{tl}.visibleLanes()")
    assert after == [lane for lane in before if "comm" not in lane] and len(after) == 4
    assert page.evaluate(f"{tl}.cssH") == h0 - 6 * 20
    page.locator("#case-0").screenshot(path=str(tmp_path / "no-comm.png"))
    # Click rank 2's lane name: it collapses to one thin lane.
    page.evaluate(f"{tl}.el.scrollIntoView()")
    box = page.locator("#case-0 .tl canvas").bounding_box()
    page.mouse.click(box["x"] + 40, box["y"] + 30 + 2 * 20 + 10)
    assert page.evaluate(f"{tl}.collapsed[2]") is True
    assert page.evaluate(f"{tl}.cssH") == h0 - 6 * 20 - (20 - 8)
    page.locator("#case-0 .comm-toggle").check()
    assert len(page.evaluate(f"{tl}.visibleLanes()")) == 10 - 2  # rank 2 stays collapsed: its two comm lanes too
    assert page.problems == []


def test_search_finds_2b5_and_kinds(page, review, tmp_path):
    path, _ = review
    _open(page, path)
    tl = "window.__harness.caseTimeline(0)"
    box = page.locator("#case-0 .find")
    box.fill("2B5")
    assert page.locator("#case-0 .found-n").inner_text() == "2 matches (Enter: next)"  # one per recorded step
    box.press("Enter")
    i = page.evaluate(f"{tl}.sel")
    assert page.evaluate(f"(() => {{ const d = {tl}.x.d; return '' + d.stage[{i}] + d.mb[{i}] + d.step[{i}]; }})()") == "251"
    page.locator("#case-0").screenshot(path=str(tmp_path / "search.png"))
    box.fill("W")
    assert page.locator("#case-0 .found-n").inner_text() == "0 matches"  # 1F1B has no W jobs
    box.fill("SEND")
    assert page.locator("#case-0 .found-n").inner_text() == f"{2 * 2 * 3 * 8} matches (Enter: next)"  # SEND_F and SEND_B, 3 links, 8 mb, 2 steps
    page.locator("#case-1 .find").fill("W")
    assert page.locator("#case-1 .found-n").inner_text() == f"{2 * 4 * 8} matches (Enter: next)"  # ZB-H1: a W per stage and mb
    assert page.problems == []


def test_arrows_follow_the_selection_and_say_how_many(page, review):
    path, _ = review
    _open(page, path)
    tl = "window.__harness.caseTimeline(2)"
    page.evaluate(f"{tl}.el.scrollIntoView()")
    assert page.evaluate(f"{tl}.arrowsShown") == [0, 0]  # no arrows until asked or a job is focused
    page.evaluate(f"{tl}.select(5)")
    drawn, total = page.evaluate(f"{tl}.arrowsShown")
    assert drawn == total and total > 0
    page.locator("#case-2 .deps-toggle").check()
    page.evaluate(f"{tl}.whole()")  # it opens on one step: the whole recording, for every arrow
    drawn, total = page.evaluate(f"{tl}.arrowsShown")
    n_deps = page.evaluate(f"{tl}.x.d.deps.length / 3")
    assert drawn == total == n_deps  # whole view: every dependency, none dropped silently
    assert page.locator("#case-2 .arrows-n").inner_text() == f"{n_deps} arrows in view"
    assert page.problems == []


def test_keyboard_help_and_keys(page, review):
    path, _ = review
    _open(page, path)
    el = page.locator("#case-0 .tl")
    el.click(position={"x": 400, "y": 5})
    page.keyboard.press("?")
    assert page.locator("#case-0 .keyhelp").is_visible()
    page.keyboard.press("c")
    assert page.locator("#case-0 .comm-toggle").is_checked() is False
    page.keyboard.press("p")
    assert page.evaluate("window.__harness.caseTimeline(0).showCp") is True
    page.keyboard.press("g")
    assert page.locator("#case-0 .grid").is_visible()
    assert page.problems == []


def test_comparison_view_shows_both_cases_numbers_and_deltas(page, review, tmp_path):
    path, _ = review
    _open(page, path)
    # Default: the first two cases sharing model and p (1F1B and ZB-H1, p=4, F=1 B=2 ms).
    assert page.locator("#cmp-a").input_value() == "0" and page.locator("#cmp-b").input_value() == "1"
    rows = page.evaluate("() => [...document.querySelectorAll('#cmp-numbers tbody tr')].map(r => [...r.cells].map(c => c.textContent))")
    by = {r[0]: r[1:] for r in rows}
    assert by["step time (median)"][:4] == ["33.000 ms", "27.000 ms", "-18.18%", "exact"]
    assert by["bubble (idle share)"][:2] == ["27.273%", "11.111%"] and by["bubble (idle share)"][2] == "-16.16 pp"
    assert by["spread over steps"][:2] == ["min–max 33.000–33.000 ms over 2 steps", "min–max 27.000–27.000 ms over 2 steps"]
    assert by["critical path"][:3] == ["33.000 ms", "27.000 ms", "-18.18%"]
    assert by["peak memory (largest rank)"][0] == "— (no memory model)"
    page.select_option("#cmp-b", "3")
    rows = page.evaluate("() => [...document.querySelectorAll('#cmp-numbers tbody tr')].map(r => [...r.cells].map(c => c.textContent))")
    assert rows[0][1:4] == ["33.000 ms", "30.000 ms", "-9.09%"]  # 1F1B p=2 m=4 at F=2 B=4: (m + p - 1) x (F + B) = 30 ms
    page.check("#cmp-cp")
    assert page.evaluate("window.__harness.compare.map(t => t.marks.length)") == [2, 2]
    assert page.evaluate("window.__harness.compare.map(t => t.view.t0)") == [0, 0]  # step start aligned at 0
    page.locator("#compare").scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "compare.png"))
    assert page.problems == []


def test_print_draws_every_timeline(page, review, tmp_path):
    path, cases = review
    _open(page, path)
    page.emulate_media(media="print")
    page.wait_for_function("() => [...document.querySelectorAll('.tl[data-case]')].every(e => e.dataset.drawn === '1')", timeout=10_000)
    inked = page.evaluate("""() => [...document.querySelectorAll('.tl[data-case] canvas')].map(c => {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && (d[i] < 120 || d[i + 2] < 120)) n++;  // job colours, not lane stripes
        return n; })""")
    assert len(inked) == len(cases) and all(n > 1000 for n in inked), inked
    page.pdf(path=str(tmp_path / "report.pdf"))
    page.emulate_media(media="screen")
    page.screenshot(path=str(tmp_path / "full.png"), full_page=True)
    assert page.problems == []


@pytest.mark.parametrize("width", [800, 2560])
def test_layout_holds_at_800_and_2560_px(browser, review, tmp_path, width):
    path, _ = review
    p = browser.new_page(viewport={"width": width, "height": 1000})
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    _open(p, path)
    fit = p.evaluate("""() => ({page: document.documentElement.scrollWidth, viewport: window.innerWidth,
        bars: Math.max(...[...document.querySelectorAll('.bars')].map(t => t.getBoundingClientRect().right)),
        canvas: Math.max(...[...document.querySelectorAll('.tl canvas')].map(c => c.getBoundingClientRect().right))})""")
    assert fit["page"] <= fit["viewport"] and fit["bars"] <= fit["viewport"] and fit["canvas"] <= fit["viewport"], fit
    p.screenshot(path=str(tmp_path / f"layout-{width}.png"), full_page=True)
    p.close()
    assert errors == []


def test_dense_steps_labels_never_overlap_the_view_starts_at_0_and_charts_clear_the_nav(page, tmp_path):
    cases = [case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2), "sim", range(0, 60), case_id="dense")),
             *(case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=m), "sim", range(0, 1), case_id=f"m{m}")) for m in (2, 4))]
    path = tmp_path / "index.html"
    path.write_text(render_index(results_document(cases)), encoding="utf-8")
    _open(page, path)
    tl = "window.__harness.caseTimeline(0)"
    labels = page.evaluate(f"{tl}.stepLabels")
    assert 1 < len(labels) < 60  # 60 steps of 9 ms on ~1,200 px: only the labels that fit
    assert all(b[0] >= a[1] for a, b in pairwise(labels)), labels
    assert page.locator("#case-0 .tl").get_attribute("data-t0") == "0.000"  # no view range below 0
    page.locator("nav a[href='#charts']").click()
    page.wait_for_timeout(300)
    nav_bottom, chart_top = page.evaluate("[document.querySelector('nav').getBoundingClientRect().bottom, "
                                          "document.getElementById('charts').getBoundingClientRect().top]")
    assert chart_top >= nav_bottom, (chart_top, nav_bottom)
    page.screenshot(path=str(tmp_path / "charts.png"))
    assert page.problems == []


def test_a_long_grid_builds_the_cells_in_view_and_follows_the_scroll(page, tmp_path):
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=500), "sim", range(0, 1), case_id="long"))
    path = tmp_path / "index.html"
    path.write_text(render_index(results_document([case])), encoding="utf-8")
    _open(page, path)
    _grid(page, 0)
    # As the hand-computed m=3 grid (8 slots, 4 idle): 2(m + 1) slots, 2 idle per rank.
    assert "2 compute streams × 1002 slots, 2000 jobs, 4 idle slots" in page.locator("#case-0 .grid-head .hint").inner_text()
    texts = page.locator("#case-0 .cell").all_inner_texts()
    assert "0F0" in texts and "1B499" not in texts and len(texts) < 2000
    page.evaluate("(() => { const g = document.querySelector('#case-0 .grid'); g.scrollLeft = g.scrollWidth; })()")
    page.wait_for_function("() => [...document.querySelectorAll('#case-0 .cell')].some(c => c.textContent === '1B499')")
    texts = page.locator("#case-0 .cell").all_inner_texts()
    assert "0F0" not in texts and "0B499" in texts
    page.locator("#case-0").screenshot(path=str(tmp_path / "long-grid.png"))
    assert page.problems == []
