"""The review page in a real headless Chromium (Debian's ``chromium``, driven by Playwright).

Skipped, with the reason, where Chromium or the ``playwright`` package is
missing. Never runs ``playwright install``: it launches the system browser.
Install: ``apt-get install chromium`` and ``pip install playwright``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harness.case import PipelineCase
from harness.imports.paddle import import_paddle_logs
from harness.model.cost import FixedCost
from harness.report.html import render_index
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("HARNESS_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
EVIL = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (pip install playwright)")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set HARNESS_CHROMIUM)")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    p = browser.new_page(viewport={"width": 1400, "height": 1000})
    problems: list[str] = []
    p.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    p.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    p.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    p.on("request", lambda r: problems.append(f"request: {r.url}") if not r.url.startswith(("file:", "data:", "about:")) else None)
    p.problems = problems  # type: ignore[attr-defined]
    yield p
    p.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    cases = []
    for schedule, v in (("1F1B", 1), ("ZB-H1", 1), ("Interleaved1F1B", 2)):
        cases.append(case_to_dict(run_case(PipelineCase(schedule, stages=4, microbatches=8, chunks=v, comm=True), "sim", range(1, 3),
                                           case_id=f"cases/test_gpt.py::test[{schedule}]")))
    evil = case_to_dict(run_case(PipelineCase("FThenB", stages=2, microbatches=4), "sim", range(0, 1), case_id=EVIL))
    evil["label"] = EVIL
    cases.append(evil)
    logs = tmp_path_factory.mktemp("logs")
    (logs / "workerlog.0").write_text(
        "Profiler Info: Job (3), type = forward, micro_batch_id = 2, job_start_time = 1697793307213.760986, job_end_time = 1697793307254.006104\n"
        "Profiler Info: Job (4), type = forward, micro_batch_id = 3, job_start_time = 1697793307214.742920, job_end_time = 1697793307219.168945\n"
    )
    with pytest.warns(UserWarning):
        cases.append(import_paddle_logs(logs))
    path = tmp_path_factory.mktemp("report") / "index.html"
    path.write_text(render_index(results_document(cases)), encoding="utf-8")
    return path, cases


def _open(page, path: Path) -> None:
    page.goto(path.as_uri())
    page.wait_for_function("window.__harness && window.__harness.firstDrawMs !== null", timeout=10_000)


def test_page_loads_clean_and_lists_every_case(page, report, tmp_path):
    path, cases = report
    _open(page, path)
    labels = page.locator("#summary tbody tr td:first-child").all_inner_texts()
    assert labels == [c.get("label", c["id"]) for c in cases]
    page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)
    assert page.problems == []


def test_hover_shows_the_job_tooltip(page, report):
    path, _ = report
    _open(page, path)
    tl = "window.__harness.caseTimeline(0)"
    page.evaluate(f"{tl}.el.scrollIntoView()")
    # Job 0 of the timeline's sorted order: the first job of the first lane (rank 0 compute), 1F0... of step 1.
    rect = page.evaluate(f"{tl}.jobRect(0)")
    page.mouse.move((rect["left"] + rect["right"]) / 2, (rect["top"] + rect["bottom"]) / 2)
    tip = page.locator("#tip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert "0F0: stage 0, F, micro-batch 0, chunk 0, step 1" in text
    assert "start 0.000 µs, duration 1.000 ms" in text
    assert page.problems == []


def test_zoom_changes_the_visible_range(page, report):
    path, _ = report
    _open(page, path)
    el = page.locator(".tl[data-case='0']")
    el.scroll_into_view_if_needed()
    before = float(el.get_attribute("data-t1")) - float(el.get_attribute("data-t0"))
    box = el.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 40)
    page.mouse.wheel(0, -400)  # wheel up: zoom in around the pointer
    page.wait_for_function("(b) => { const e = document.querySelector(\".tl[data-case='0']\"); "
                           "return +e.dataset.t1 - +e.dataset.t0 < b * 0.9; }", arg=before)
    after_wheel = float(el.get_attribute("data-t1")) - float(el.get_attribute("data-t0"))
    assert after_wheel < before * 0.9
    el.focus()
    page.keyboard.press("0")
    page.keyboard.press("-")  # keyboard zoom out
    after_key = float(el.get_attribute("data-t1")) - float(el.get_attribute("data-t0"))
    assert after_key == pytest.approx(before * 1.25, rel=1e-3)
    page.keyboard.press("w")  # the whole recording, then wider than it
    page.keyboard.press("-")
    start = float(el.get_attribute("data-t0"))
    page.keyboard.press("ArrowRight")  # wider than the whole view: it stays at its start (never past the end)
    assert float(el.get_attribute("data-t0")) == start
    page.keyboard.press("0")
    page.keyboard.press("+")  # zoomed in, at the start: the arrow pans a tenth of the window
    start, span = float(el.get_attribute("data-t0")), float(el.get_attribute("data-t1")) - float(el.get_attribute("data-t0"))
    page.keyboard.press("ArrowRight")
    assert float(el.get_attribute("data-t0")) == pytest.approx(start + span / 10, rel=1e-3)
    assert page.problems == []


def test_hostile_case_name_renders_as_text(page, report, tmp_path):
    path, cases = report
    _open(page, path)
    k = len(cases) - 2
    cell = page.locator(f"#summary tbody tr[data-case='{k}'] td:first-child")
    assert cell.inner_text() == EVIL
    assert page.locator("#summary img").count() == 0 and page.locator("main img").count() == 0
    heading = page.locator(f"#case-{k} h3")
    assert heading.inner_text() == EVIL
    assert page.problems == []  # no alert dialog, no request for "x"


def test_overlap_flag_dependency_arrows_and_side_by_side(page, report, tmp_path):
    path, cases = report
    _open(page, path)
    k = len(cases) - 1
    warn = page.locator(f"#case-{k} .warn li").first
    assert "overlapping jobs on one device" in warn.inner_text()
    page.locator("#case-0 .deps-toggle").check()
    assert page.evaluate("window.__harness.caseTimeline(0).showDeps") is True
    page.select_option("#cmp-b", "1")
    top, bottom = page.evaluate("[window.__harness.compare[0].view === window.__harness.compare[1].view, window.__harness.compare[1].k]")
    assert top is True and bottom == 1
    page.locator("#compare").scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "compare.png"))
    assert page.problems == []


def _overview_fit(page) -> dict:
    """The overview's scroll box widths and the right edge of its last column, in px."""
    return page.evaluate("""() => {
        const box = document.querySelector('.scroll');
        const last = [...document.querySelectorAll('#summary tbody tr td:last-child')].map(td => td.getBoundingClientRect().right);
        return {scroll: box.scrollWidth, client: box.clientWidth, lastRight: Math.max(...last), viewport: window.innerWidth};
    }""")


def test_overview_fits_a_1400_px_window_and_chart_labels_fit(page, tmp_path):
    # A realistic mix: long pytest ids, two m per schedule (charts), a failed case, seconds-long steps.
    cases = []
    for schedule, v in (("1F1B", 1), ("ZB-H1", 1), ("Interleaved1F1B", 2), ("ZB-V", 1), ("FThenB", 1)):
        for m in (8, 16):
            c = case_to_dict(run_case(PipelineCase(schedule, stages=4, microbatches=m, chunks=v, cost=FixedCost.ms(F=40, B=80)), "sim",
                                      range(1, 4), case_id=f"cases/test_gpt_schedules.py::test_gpt_sweep_m[{schedule}-{m}]"))
            cases.append(c)
    cases[1]["outcome"] = "failed"
    path = tmp_path / "index.html"
    path.write_text(render_index(results_document(cases), {c["id"]: "traces/x.json" for c in cases},
                                 hta_hrefs={c["id"]: "hta/x/" for c in cases}), encoding="utf-8")
    _open(page, path)
    fit = _overview_fit(page)
    assert fit["scroll"] <= fit["client"], fit  # no sideways scrolling
    assert fit["lastRight"] <= fit["viewport"], fit  # the traces column is on screen
    assert page.locator("#summary tbody tr.failed").count() == 1
    # Every y-axis label of the charts lies inside its SVG (nothing cut off at the left edge).
    labels = page.evaluate("""() => [...document.querySelectorAll('#charts ~ .charts svg text[text-anchor=end]')]
        .map(t => ({text: t.textContent, x: t.getBBox().x}))""")
    assert labels and all(lab["x"] >= 0 for lab in labels), labels
    assert "1,000 ms" in [lab["text"] for lab in labels]
    assert page.problems == []


def test_overview_with_flag_badges_and_memory_still_fits_a_1400_px_window(page, tmp_path):
    # A cpu run flags most cases contended, some unstable too, with warnings: the notes column took 177 px and
    # pushed the traces column off screen (1462 px in a 1355 px box).
    cost = FixedCost.ms(F=40, B=80, mem_F=2**30, mem_static=4 * 2**30)
    cases = []
    for schedule, v in (("1F1B", 1), ("ZB-H1", 1), ("Interleaved1F1B", 2), ("ZB-V", 1), ("FThenB", 1)):
        for m in (8, 16):
            c = case_to_dict(run_case(PipelineCase(schedule, stages=4, microbatches=m, chunks=v, cost=cost, memory_limit_bytes=7 * 2**30),
                                      "sim", range(1, 6), case_id=f"cases/test_gpt_schedules.py::test_gpt_sweep_m[{schedule}-{m}]"))
            c["flags"] = [{"kind": "contended", "reason": "needed 5 cores, had 2"}, {"kind": "unstable", "reason": "IQR 26%"}]
            c["warnings"] = ["one", "two"]
            cases.append(c)
    path = tmp_path / "index.html"
    path.write_text(render_index(results_document(cases), {c["id"]: "traces/x.json" for c in cases},
                                 hta_hrefs={c["id"]: "hta/x/" for c in cases}), encoding="utf-8")
    _open(page, path)
    fit = _overview_fit(page)
    assert page.locator("#summary .badge.bad-outcome").count() > 0  # some cases do not fit their memory limit: the widest notes
    assert fit["scroll"] <= fit["client"], fit
    assert fit["lastRight"] <= fit["viewport"], fit
    assert page.problems == []


def test_bidi_names_are_isolated_and_long_file_names_wrap(page, tmp_path):
    # issue 12 item 6: U+202E in a file name reversed the rest of the subtitle ("p=2, m=2" read "2=m ,2=p").
    csv_text = "0F0,0F1,,0B0,0B1\n,1F0,1B0,1F1,1B1\n"
    rtl = tmp_path / "rtl\u202eVSC.exe.csv"
    rtl.write_text(csv_text)
    long = tmp_path / ("very_long_schedule_file_name_" * 5 + ".csv")  # 146 characters, no spaces
    long.write_text(csv_text)
    cases = [case_to_dict(run_case(PipelineCase(path), "sim", range(0, 1), case_id=f"t.py::test[{k}]"))
             for k, path in enumerate((rtl, long))]
    html = render_index(results_document(cases))
    assert "<bdi>rtl\u202eVSC.exe.csv</bdi>, p=2, m=2" in html
    path = tmp_path / "index.html"
    path.write_text(html, encoding="utf-8")
    _open(page, path)
    order = page.evaluate("""() => {
        const meta = document.querySelector('#case-0 .meta');
        const text = [...meta.childNodes].find(n => n.nodeType === 3 && n.textContent.includes('p=2'));
        const at = s => { const r = document.createRange(); const i = text.textContent.indexOf(s);
                          r.setStart(text, i); r.setEnd(text, i + s.length); return r.getBoundingClientRect().left; };
        return [at('p=2'), at('m=2'), at('v=1')];
    }""")
    assert order[0] < order[1] < order[2], order  # left to right, as written
    fit = page.evaluate("""() => ({scroll: document.querySelector('.scroll').scrollWidth, client: document.querySelector('.scroll').clientWidth,
                                   page: document.documentElement.scrollWidth, viewport: window.innerWidth})""")
    assert fit["scroll"] <= fit["client"] and fit["page"] <= fit["viewport"], fit
    assert page.problems == []
