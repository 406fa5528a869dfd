"""The review page, issue 26, in headless Chromium (fixtures of tests/test_html_browser.py).

Model identity on every chart and label; any two cases compared in the page with compare's statistics;
the step-time against peak-memory chart; timelines that open on their median step, a critical path that
zooms to its step, memory lanes with a GiB scale and the part over the limit in red; user strings isolated
in SVG tooltips; long names cut, every table inside the window.
"""

from __future__ import annotations

import random

import pytest

from harness.analysis.compare import step_samples
from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.model.transformer import TransformerCost
from harness.report.html import render_index
from harness.report.results import case_to_dict, results_document
from harness.runner import run_case
from harness.stats import compare_samples
from tests import test_html_browser as shared

browser = shared.browser  # the shared browser fixtures
page = shared.page
_open = shared._open

pytestmark = pytest.mark.browser

BASE = dict(hidden_size=512, seq_len=512, micro_batch_size=1, num_layers=8, tflops=100)
#: Models that differ from BASE in one field each (recompute changes no step time here: it must still be drawn).
VARIANTS = {"base": {}, "layout": {"layout": "Et*3|t*2|t*2|tL"}, "vocab": {"vocab_size": 32000}, "recompute": {"recompute": "selective"},
            "tflops": {"tflops": 200}, "nolimit": {}}
#: The memory limit of each variant's cases (bytes; None: no limit), 0.3 GiB where not named.
LIMITS = {"nolimit": None}
#: Interleaved1F1B with and without microbatch_group_size_per_vp_stage=8: the same step time (one spot on the chart), two models.
OPTIONS = ({}, {"microbatch_group_size_per_vp_stage": 8})
TIMED = len(VARIANTS) * 2 + len(OPTIONS)  # the first of the two timed cases
EVIL = "rtl\u202eevil"
LONG = "a_very_long_case_name_" * 9 + "end"  # 201 characters, no space


def _timed(case: dict, factor: float, seed: int) -> dict:
    """A sim case made to look timed: backend cpu, per-step times scaled by ``factor`` with 2 % noise."""
    rng = random.Random(seed)
    case["backend"] = "cpu"
    for st in case["metrics"]["per_step"]:
        st["step_time_ns"] = int(st["step_time_ns"] * factor * (1 + rng.gauss(0, 0.02)))
    return case


@pytest.fixture(scope="module")
def review(tmp_path_factory):
    cases = []
    for name, extra in VARIANTS.items():
        for s in ("1F1B", "ZB-H1"):
            cost = TransformerCost(**{**BASE, **extra})
            limit = LIMITS.get(name, int(0.3 * 2**30))
            cases.append(case_to_dict(run_case(PipelineCase(s, stages=4, microbatches=8, cost=cost, memory_limit_bytes=limit),
                                               "sim", range(0, 3), case_id=f"cases/test_zoo.py::test_schedule_zoo[{s}-{name}]")))
    for k, options in enumerate(OPTIONS):
        cases.append(case_to_dict(run_case(PipelineCase("Interleaved1F1B", stages=4, microbatches=8, chunks=2, options=options),
                                           "sim", range(0, 2), case_id=f"cases/test_zoo.py::test_group[{k}]")))
    for k, (s, v, f) in enumerate((("1F1B", 1, 1.0), ("Interleaved1F1B", 2, 0.9))):
        c = case_to_dict(run_case(PipelineCase(s, stages=4, microbatches=8, chunks=v), "sim", range(0, 9), case_id=f"timed::{s}"))
        cases.append(_timed(c, f, k))
    heavy = FixedCost.ms(F=1, B=2, W=1, mem_F=2**28, mem_static=2**30)
    over = case_to_dict(run_case(PipelineCase("ZB-V", stages=4, microbatches=8, chunks=2, cost=heavy, memory_limit_bytes=int(1.5 * 2**30)),
                                 "sim", range(0, 2), case_id=f"x::{LONG}"))
    over["label"] = LONG
    cases.append(over)
    evil = case_to_dict(run_case(PipelineCase("1F1B", stages=4, microbatches=4), "sim", range(0, 1), case_id=f"x::{EVIL}-a"))
    evil2 = case_to_dict(run_case(PipelineCase("1F1B", stages=4, microbatches=8), "sim", range(0, 1), case_id=f"x::{EVIL}-b"))
    evil["label"], evil2["label"] = f"{EVIL} a", f"{EVIL} b"
    cases += [evil, evil2]
    path = tmp_path_factory.mktemp("review26") / "index.html"
    path.write_text(render_index(results_document(cases)), encoding="utf-8")
    return path, cases


def _titles(tab, selector: str) -> list[str]:
    return tab.evaluate(f"() => [...document.querySelectorAll({selector!r})].map(t => t.textContent)")


def test_cases_that_differ_only_in_one_model_field_are_all_drawn(page, review):
    # issue 26: the "against schedule" chart hid cases whose model differed in a field its series label left out
    path, _ = review
    _open(page, path)
    chart = page.locator("#chart-schedule + .charts svg").first
    dots = chart.locator("circle")
    titles = [dots.nth(i).locator("title").text_content() for i in range(dots.count())]
    names = {f"{s} p=4 m=8" for s in ("1F1B", "ZB-H1")}
    shown = {"base": "· 100 TFLOP/s · limit 0.3 GiB", "layout": "layout Et*3|t*2|t*2|tL", "vocab": "vocab 32000",
             "recompute": "recompute=selective", "tflops": "200 TFLOP/s", "nolimit": "· 100 TFLOP/s · no limit"}
    for name in VARIANTS:  # each model: both schedules, as two dots of its own series
        ours = [t for t in titles if t.split("\u2069", 1)[0].lstrip("\u2068") in names and shown[name] in t]
        assert len(ours) == 2, (name, titles)
    series = page.locator("#chart-schedule ~ .legend").first.locator("bdi")
    labels = [series.nth(i).text_content() for i in range(series.count())]
    assert len(labels) == len(set(labels))  # no two series read the same
    for needle in ("layout Et*3|t*2|t*2|tL", "vocab 32000", "recompute=selective", "200 TFLOP/s", "no limit",
                   "microbatch_group_size_per_vp_stage=8", "microbatch_group_size_per_vp_stage=default"):
        assert sum(needle in lab for lab in labels) == 1, (needle, labels)
    # the schedule option: both Interleaved1F1B cases drawn, each tooltip naming its own value of it
    grouped = [t for t in titles if t.startswith("\u2068Interleaved1F1B p=4 m=8 v=2\u2069") and "(sim, " in t]
    assert len(grouped) == 2 and sum("microbatch_group_size_per_vp_stage=8" in t for t in grouped) == 1 \
        and sum("microbatch_group_size_per_vp_stage=default" in t for t in grouped) == 1, grouped
    # every dot inside the plot, and the two models with equal figures (base, recompute) both visible: apart
    boxes = page.evaluate("""() => { const svg = document.querySelector('#chart-schedule + .charts svg');
        const r = svg.getBoundingClientRect();
        return [...svg.querySelectorAll('circle')].map(c => { const b = c.getBoundingClientRect();
            return [b.left - r.left, b.top - r.top, b.right - r.left, b.bottom - r.top, c.querySelector('title').textContent]; }); }""")
    assert all(0 <= b[0] and b[2] <= 600 and 0 <= b[1] for b in boxes)
    base_1f1b = [b for b in boxes if b[4].startswith("\u20681F1B p=4 m=8\u2069") and "h=512" in b[4] and "·" in b[4]]
    xs = sorted(round(b[0], 1) for b in base_1f1b)
    assert len(xs) == len(set(xs)) == len(VARIANTS)  # six models of 1F1B, six dots side by side
    # no dot overlaps another: every pair of centres at least two radii (3.5 px) and the outline apart
    centres = [((b[0] + b[2]) / 2, (b[1] + b[3]) / 2) for b in boxes]
    closest = min(((ax - bx) ** 2 + (ay - by) ** 2) ** 0.5 for i, (ax, ay) in enumerate(centres) for bx, by in centres[i + 1:])
    assert closest >= 8.9, closest
    # the overview's model column tells them apart too
    cells = page.locator("#summary tbody td.cost .clamp")
    texts = [cells.nth(i).text_content() for i in range(cells.count())]
    assert len({t for t in texts if t.startswith("h=512")}) == len(VARIANTS)
    assert sum(t.endswith(" · no limit") for t in texts) == 2  # the two cases of the variant without a limit
    assert sorted(t for t in texts if "microbatch_group_size_per_vp_stage" in t) == [  # the timed Interleaved1F1B has no option either
        "F=1 B=2 ms · microbatch_group_size_per_vp_stage=8"] + ["F=1 B=2 ms · microbatch_group_size_per_vp_stage=default"] * 2
    assert page.problems == []


def test_any_two_cases_are_compared_in_the_page_with_compares_statistics(page, review):
    path, cases = review
    _open(page, path)
    a, b = TIMED, TIMED + 1  # the two timed cases, far apart in a page of 19
    page.select_option("#cmp-a", str(a))
    page.select_option("#cmp-b", str(b))
    shown = page.evaluate("window.__harness.shownPair")
    expected = compare_samples(step_samples(cases[a]), step_samples(cases[b]))
    assert shown["step"][0] == pytest.approx(expected.estimate, abs=1e-9)  # the medians' change: the same number
    assert shown["step"][1] == pytest.approx(expected.ci_low, abs=0.004)  # bootstraps of 2,000 and 4,000: a few tenths of a point
    assert shown["step"][2] == pytest.approx(expected.ci_high, abs=0.004)
    assert shown["step"][3] == "slower" and expected.verdict == "larger"  # 1F1B 33 ms against Interleaved1F1B 0.9 x 57 ms
    row = page.locator("#cmp-numbers tbody tr").first.locator("td")
    assert row.nth(3).inner_text() == f"{100 * expected.estimate:+.2f}%"
    assert row.nth(4).inner_text().startswith("[") and row.nth(5).inner_text() == "slower"
    # sim against sim: exact; a case with fewer than 5 steps against a timed one: not enough samples
    page.select_option("#cmp-a", "0")
    page.select_option("#cmp-b", "1")
    assert page.locator("#cmp-numbers tbody tr").first.locator("td").nth(4).inner_text() == "exact"
    page.select_option("#cmp-b", str(a))
    assert page.locator("#cmp-numbers tbody tr").first.locator("td").nth(5).inner_text().startswith("not enough samples")
    assert page.problems == []


def test_the_step_time_against_peak_memory_chart_draws_every_case_and_the_limits(page, review):
    path, cases = review
    _open(page, path)
    with_memory = [k for k, c in enumerate(cases) if c.get("memory")]
    dots = page.locator("#memory-chart circle.mdot")
    assert dots.count() == len(with_memory)
    assert sorted(int(dots.nth(i).get_attribute("data-k")) for i in range(dots.count())) == with_memory
    limits = [page.locator("#memory-chart .limit-label").nth(i).text_content() for i in range(page.locator("#memory-chart .limit-label").count())]
    assert limits == ["limit 0.3 GiB", "limit 1.5 GiB"]
    over = page.locator(f"#memory-chart circle.mdot[data-k='{len(cases) - 3}']")
    assert over.get_attribute("fill") == "#b42318"  # 4 GiB against a 1.5 GiB limit
    over.click()
    assert page.locator("#cmp-b").input_value() == str(len(cases) - 3)
    assert "Not drawn, without a memory model" in page.locator("#memory-chart figcaption").inner_text()
    assert page.problems == []


def test_a_timeline_opens_on_its_median_step_readable_and_the_critical_path_zooms_to_its_step(page, review):
    path, cases = review
    _open(page, path)
    k = TIMED  # timed 1F1B: 9 recorded steps
    tl = f"window.__harness.caseTimeline({k})"
    page.evaluate(f"{tl}.el.scrollIntoView()")
    view = page.evaluate(f"[{tl}.view.t0, {tl}.view.t1, {tl}.x.open]")
    step = cases[k]["critical_path"]["step"]
    i = cases[k]["steps"].index(step)
    start_us = (cases[k]["step_start_ns"][i] - cases[k]["step_start_ns"][0]) / 1000
    length_us = (cases[k]["step_end_ns"][i] - cases[k]["step_start_ns"][i]) / 1000
    assert view[2][2] == step
    assert view[0] == pytest.approx(max(0.0, start_us - 0.02 * length_us)) and view[1] == pytest.approx(start_us + 1.02 * length_us)
    # readable: every job of that step wide enough for its label (F 1 ms, B 2 ms at ~1200 px per 33 ms)
    widths = page.evaluate(f"""(() => {{ const t = {tl}, out = [];
        for (let j = 0; j < t.x.n; j++) if (t.x.d.step[j] === {step}) {{ const r = t.jobRect(j); out.push(r.right - r.left); }}
        return out; }})()""")
    assert widths and min(widths) > 30
    page.evaluate(f"{tl}.el.focus()")  # keys go to the focused timeline
    page.keyboard.press("w")
    whole = page.evaluate(f"{tl}.view.t1 - {tl}.view.t0")
    assert whole > 8 * length_us
    page.locator(f"#case-{k} .cp-toggle").check()  # the critical path: back to its step
    assert page.evaluate(f"[{tl}.view.t0, {tl}.view.t1]") == pytest.approx(view[:2])
    summary = page.locator(f"#case-{k} .meta.critical").inner_text()
    assert summary.startswith("critical path: runs through rank ") and "% of the step on rank" in summary
    assert page.problems == []


def test_memory_lanes_have_a_gib_scale_and_the_part_over_the_limit_in_red(page, review):
    path, cases = review
    _open(page, path)
    k = len(cases) - 3  # ZB-V over its 1.5 GiB limit on every rank
    tl = f"window.__harness.caseTimeline({k})"
    page.evaluate(f"{tl}.el.scrollIntoView()")
    page.evaluate(f"{tl}.whole()")
    # a pixel just under the peak of rank 0's lane, inside the area and above the limit: red; one below the limit: purple
    colours = page.evaluate(f"""(() => {{ const t = {tl}, d = t.x.d, mem = d.mem, c = t.c, g = c.getContext('2d'), dpr = window.devicePixelRatio || 1;
        const ln = mem.lines[0], top = t.lanesBottom + 6, yb = top + 48 - 4, hh = 48 - 10;
        let at = 0; for (let q = 1; q < ln.b.length; q++) if (ln.b[q] > ln.b[at]) at = q;
        const x = 170 + (ln.t[at] - t.view.t0) * t.scale() + 2;
        const y0 = Math.round((yb - hh) * dpr), img = g.getImageData(Math.round(x * dpr), y0, 1, Math.round(hh * dpr) + 2).data;  // one read
        const pick = y => Array.from(img.slice(4 * (Math.round(y * dpr) - y0), 4 * (Math.round(y * dpr) - y0) + 4));
        return {{over: pick(yb - hh * ln.b[at] / mem.top + 2), under: pick(yb - 2), limit: mem.limit, peak: mem.peak[0]}}; }})()""")
    assert colours["peak"] > colours["limit"]
    r, g_, b_, _ = colours["over"]
    assert r > g_ + 60 and r > b_ + 30, colours  # red
    r, g_, b_, _ = colours["under"]
    assert b_ > g_ and r < 230, colours  # the purple of the bytes held
    assert page.problems == []


def test_user_strings_are_isolated_in_svg_titles_and_long_names_fit_the_window(page, review):
    path, cases = review
    _open(page, path)
    titles = _titles(page, ".charts svg circle title") + _titles(page, "#memory-chart title")
    evil = [t for t in titles if EVIL in t]
    assert evil and all(f"\u2068{EVIL} " in t and "\u2069" in t.split(EVIL, 1)[1] for t in evil)
    page.select_option("#cmp-a", str(len(cases) - 3))  # the 201-character name, top of the comparison
    fit = page.evaluate("""() => ({page: document.documentElement.scrollWidth, viewport: window.innerWidth,
        cmp: document.querySelector('#cmp-numbers').getBoundingClientRect().right,
        boxes: [...document.querySelectorAll('.scroll')].map(e => [e.scrollWidth, e.clientWidth])})""")
    assert fit["page"] <= fit["viewport"] and fit["cmp"] <= fit["viewport"], fit
    assert all(s <= c for s, c in fit["boxes"]), fit
    head = page.locator("#cmp-th-a bdi")
    assert head.get_attribute("title") == LONG and head.text_content() == LONG  # cut on screen, whole in the tooltip
    assert page.evaluate("(() => { const b = document.querySelector('#cmp-th-a bdi'); return b.scrollWidth > b.clientWidth; })()")
    cell = page.locator(f"#summary tbody tr[data-case='{len(cases) - 3}'] td.case .clamp")
    assert cell.get_attribute("title").startswith(f"{LONG} · assumptions: ")  # the name whole, then the case's assumptions
    assert page.problems == []
