"""How fast a 100,000-job report renders, loads and draws (pytest-benchmark).

Run: ``python -m pytest benchmarks/bench_report.py`` (add ``--benchmark-json=FILE``
to keep the figures). Goals from issue 5: the page loads and draws its first
timeline in Chromium in under 2 s on a 2-core machine, and the HTML stays
under 10 MB. The figures are reported (``extra_info``), not asserted: timing
asserts make flaky tests.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.report.html import render_index
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case

CHROMIUM = os.environ.get("HARNESS_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def doc_100k():
    # 1F1B, p=8, m=2084, 3 recorded steps: 8 * 2084 * 2 * 3 = 100,032 jobs.
    result = run_case(PipelineCase("1F1B", stages=8, microbatches=2084, cost=FixedCost.ms(F=1, B=2)), "sim", range(0, 3))
    case = case_to_dict(result)
    assert len(case["jobs"]["kind"]) == 100_032
    return results_document([case])


@pytest.fixture(scope="module")
def page_100k(doc_100k, tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "index.html"
    path.write_text(render_index(doc_100k), encoding="utf-8")
    return path


def test_render_100k_jobs(benchmark, doc_100k):
    html = benchmark.pedantic(render_index, args=(doc_100k,), rounds=3, iterations=1)
    benchmark.extra_info["jobs"] = 100_032
    benchmark.extra_info["html_bytes"] = len(html.encode("utf-8"))


def test_load_and_first_draw_100k_jobs_in_chromium(benchmark, page_100k):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (pip install playwright)")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    in_page: list[float] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))

        def load() -> None:
            page.goto("about:blank")
            page.goto(page_100k.as_uri())
            page.wait_for_function("window.__harness && window.__harness.firstDrawMs !== null", timeout=60_000)
            in_page.append(page.evaluate("window.__harness.firstDrawMs"))

        benchmark.pedantic(load, rounds=5, iterations=1, warmup_rounds=1)
        browser.close()
    assert errors == []
    benchmark.extra_info["html_bytes"] = page_100k.stat().st_size
    benchmark.extra_info["first_draw_ms_since_navigation_median"] = sorted(in_page)[len(in_page) // 2]
    benchmark.extra_info["first_draw_ms_since_navigation_max"] = max(in_page)


def test_open_grid_view_100k_jobs_in_chromium(benchmark, page_100k):
    """Opening the grid view of one step of the 100,032-job case (33,344 jobs; cells are built for
    the slots in view and 400 either side) and its first layout, measured in the page
    (``performance.now``), reported, not asserted."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed (pip install playwright)")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    in_page: list[float] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_100k.as_uri())
        page.wait_for_function("window.__harness && window.__harness.firstDrawMs !== null", timeout=60_000)

        def open_grid() -> None:
            in_page.append(page.evaluate("""() => { const tl = window.__harness.caseTimeline(0), t = performance.now();
                tl.setView(true); document.querySelector('#case-0 .grid').getBoundingClientRect();
                const ms = performance.now() - t; tl.setView(false); return ms; }"""))

        benchmark.pedantic(open_grid, rounds=3, iterations=1)
        cells, note = page.evaluate("(() => { window.__harness.caseTimeline(0).setView(true); "
                                    "return [document.querySelectorAll('#case-0 .cell').length, "
                                    "document.querySelector('#case-0 .grid-head .hint').textContent]; })()")
        browser.close()
    assert errors == [] and "33344 jobs" in note
    benchmark.extra_info["grid_cells_built"] = cells
    benchmark.extra_info["grid_ms_in_page_median"] = sorted(in_page)[len(in_page) // 2]
