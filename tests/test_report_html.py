"""The HTML review page: content, escaping, compact data, size at 100,000 jobs."""

from __future__ import annotations

import json
import re

import pytest

from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.report.colours import kind_table
from harness.report.html import render_index
from harness.report.results import case_to_dict, results_document
from harness.report.timeline import timeline_data
from harness.runner import run_case

EVIL = "<img src=x onerror=alert(1)></script><script>alert(2)</script>"


def _case(schedule: str = "1F1B", p: int = 4, m: int = 8, v: int = 1, case_id: str | None = None, **kw) -> dict:
    result = run_case(PipelineCase(schedule, stages=p, microbatches=m, chunks=v, **kw), "sim", range(1, 3), case_id=case_id)
    return case_to_dict(result)


def _data(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="harness-data">(.*?)</script>', html, re.S)
    assert m is not None
    return json.loads(m.group(1))


def test_page_lists_every_case_with_figures():
    cases = [_case("FThenB", m=4), _case("1F1B", m=8), _case("ZB-H1", m=8)]
    html = render_index(results_document(cases))
    rows = re.findall(r'<tr data-case="(\d+)"', html)
    assert rows == ["0", "1", "2"]
    # 1F1B p=4 m=8, F=1 ms, B=2 ms: step time (m+p-1)(F+B) = 33 ms, bubble 3/11 = 27.3%.
    assert "33.000" in html and "27.3%" in html
    assert 'http-equiv="Content-Security-Policy"' in html and "default-src 'none'" in html
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing loaded from the network


def test_user_strings_are_escaped_and_cannot_leave_the_data_script():
    case = _case(case_id=EVIL)
    case["label"] = EVIL
    case["schedule"]["name"] = EVIL
    html = render_index(results_document([case]), title=EVIL)
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    # Exactly the page's own two script elements: the data and the code.
    assert html.count("<script") == 2 and html.count("</script>") == 2
    data = _data(html)
    assert data["cases"][0]["label"] == EVIL  # intact once parsed


def test_timeline_data_decodes_to_the_recorded_times():
    case = _case("1F1B", p=4, m=8, comm=False)
    d = timeline_data(case)
    jobs = case["jobs"]
    base = case["step_start_ns"][0]
    decoded = []
    i = 0
    for lane, count in enumerate(d["nl"]):
        t = 0
        for _ in range(count):
            t += d["gap"][i]
            decoded.append((lane, t * d["tick"], d["dur"][i] * d["tick"]))
            i += 1
    expected = sorted((s, a - base, b - a) for s, a, b in zip(jobs["stream"], jobs["start_ns"], jobs["end_ns"]))
    assert sorted(decoded) == expected
    assert d["tick"] == 1000  # sim times are whole µs here: stored in µs
    # Cross-rank dependencies resolved to job indices, per recorded step.
    assert len(d["deps"]) == 3 * len(case["deps"]) * len(case["steps"])


def test_unknown_kinds_get_their_own_legend_entry():
    case = _case()
    case["jobs"]["kind"][0] = "lr"
    kinds = [k["name"] for k in kind_table([case])]
    assert kinds[-1] == "lr" and "F" in kinds
    assert timeline_data(case, kind_table([case]))["kind"].count(kinds.index("lr")) == 1


def test_chart_appears_with_several_m_per_schedule():
    html = render_index(results_document([_case("1F1B", m=4), _case("1F1B", m=8), _case("1F1B", m=16)]))
    assert 'id="charts"' in html and html.count("<polyline") >= 2


def test_a_flagged_case_is_a_hollow_dot_whose_tooltip_names_its_flags():
    # flagged cases were drawn exactly like trusted ones
    cases = [_case("1F1B", m=4), _case("1F1B", m=8), _case("1F1B", m=16)]
    cases[1]["flags"] = [{"kind": "unstable", "reason": "x"}, {"kind": "contended", "reason": "y"}, {"kind": "unstable", "reason": "z"}]
    html = render_index(results_document(cases))
    dots = re.findall(r"<circle [^>]*>(?:<title>[^<]*</title>)", html)
    assert len(dots) == 6  # 3 cases, step and bubble panels
    hollow = [d for d in dots if 'class="flagged"' in d]
    assert len(hollow) == 2 and all('fill="#fff"' in d and "m=8, " in d for d in hollow)
    assert all(d.endswith("; flagged unstable, contended: its figures may not repeat</title>") for d in hollow)
    assert "hollow dot: a flagged case" in html
    assert "hollow dot" not in render_index(results_document([_case("1F1B", m=4), _case("1F1B", m=8)]))


@pytest.mark.slow
def test_100k_jobs_page_stays_under_10_mb():
    # 1F1B, p=8, m=2084, 3 recorded steps: 8 * 2084 * 2 * 3 = 100,032 jobs.
    result = run_case(PipelineCase("1F1B", stages=8, microbatches=2084, cost=FixedCost.ms(F=1, B=2)), "sim", range(0, 3))
    case = case_to_dict(result)
    assert len(case["jobs"]["kind"]) == 100_032
    html = render_index(results_document([case]))
    size = len(html.encode("utf-8"))
    assert size < 10_000_000, f"{size / 1e6:.1f} MB"
    # Real device clocks give ns-resolution times (no common tick): still under 10 MB.
    jobs = case["jobs"]
    for i in range(len(jobs["kind"])):
        jobs["start_ns"][i] += 7 * (i % 997) + 1
        jobs["end_ns"][i] += 7 * (i % 997) + 3
    data = timeline_data(case)
    assert data["tick"] == 1
    size = len(render_index(results_document([case])).encode("utf-8"))
    assert size < 10_000_000, f"{size / 1e6:.1f} MB with ns times"


def _cells(html: str, k: int) -> list[str]:
    """The visible texts of the overview row of case ``k``."""
    row = re.search(rf'<tr data-case="{k}"[^>]*>(.*?)</tr>', html, re.S)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    return [re.sub(r"\s+", " ", re.sub(r"<br>", " ", re.sub(r"<(?!br)[^>]+>", "", c))).strip() for c in cells]


def test_chart_ticks_are_plain_numbers_in_ms_then_seconds():
    from harness.report.charts import chart_data

    slow = [_case("1F1B", m=m, cost=FixedCost.ms(F=100, B=200)) for m in (4, 8)]  # (m+3) x 300 ms: 2,100 and 3,300 ms
    chart = chart_data(slow)
    assert [t["label"] for t in chart["step"]["yticks"]] == ["0 ms", "1,000 ms", "2,000 ms", "3,000 ms", "4,000 ms"]
    assert [d["title"].rsplit(", ", 1)[1] for d in chart["step"]["lines"][0]["dots"]] == ["2,100.0 ms", "3,300.0 ms"]
    slower = [_case("1F1B", m=m, cost=FixedCost.ms(F=1000, B=2000)) for m in (4, 8)]  # 21 s and 33 s
    assert [t["label"] for t in chart_data(slower)["step"]["yticks"]] == ["0 s", "10 s", "20 s", "30 s", "40 s"]
    # Bubble 3/7 = 42.9% and 3/11 = 27.3%: ticks every 10%.
    assert [t["label"] for t in chart["bubble"]["yticks"]] == ["0%", "10%", "20%", "30%", "40%", "50%"]
    html = render_index(results_document(slow + slower))
    assert not re.search(r"\de[+-]\d", html.split('id="harness-data"')[0])  # no scientific notation on the page


def test_spread_says_min_max_below_five_steps_and_iqr_from_five():
    from harness.report.html import spread_text

    assert spread_text(3, 102_909_000, 103_269_000, 180_000) == {
        "main": "102.909–103.269", "sub": "min–max, n=3 steps",
        "title": "range over 3 recorded steps (an inter-quartile range needs at least 5)", "sort": 360_000,
        "detail": "min–max 102.909–103.269 ms over 3 steps"}
    five = spread_text(5, 1_000_000, 2_000_000, 250_000)
    assert five["main"] == "IQR 0.250" and five["sub"] == "n=5 steps"
    assert spread_text(1, 5, 5, 0)["main"] == "—"
    few = _case("1F1B", cost=FixedCost.ms(F=1, B=2))  # 2 recorded steps
    many = case_to_dict(run_case(PipelineCase("1F1B", stages=4, microbatches=8), "sim", range(0, 5), case_id="five"))
    html = render_index(results_document([few, many]))
    assert _cells(html, 0)[8] == "33.000–33.000 min–max, n=2 steps"
    assert _cells(html, 1)[8] == "IQR 0.000 n=5 steps"


def test_failed_case_is_marked_in_the_overview_and_its_section():
    cases = [_case("1F1B", case_id="ok"), _case("FThenB", case_id="bad"), _case("ZB-H1", case_id="skip"), _case("1F1B", m=4, case_id="plain")]
    cases[0]["outcome"], cases[1]["outcome"], cases[2]["outcome"] = "passed", "failed", "skipped"
    for c in cases:
        c["label"] = c["id"]
    html = render_index(results_document(cases))
    assert '<tr data-case="1" data-outcome="failed" class="failed">' in html
    assert '<tr data-case="0" data-outcome="passed">' in html and '<tr data-case="3">' in html
    assert _cells(html, 1)[0] == "FAILED bad" and _cells(html, 0)[0] == "ok" and _cells(html, 2)[0] == "skipped skip"
    assert "1 case(s) ran in a test that did not pass" in html
    section = html.split('id="case-1"')[1].split("</section>")[0]
    assert '<span class="badge bad-outcome">FAILED</span> <bdi>bad</bdi></h3>' in section
    assert "The test that ran this case failed (pytest outcome: failed)" in section
    assert "did not pass" not in html.split('id="case-0"')[1].split("</section>")[0]
    # An error outcome is marked too; without any bad outcome there is no banner.
    cases[1]["outcome"] = "error"
    assert _cells(render_index(results_document(cases)), 1)[0] == "ERROR bad"
    del cases[1]["outcome"]
    assert "did not pass" not in render_index(results_document(cases))


def test_span_bubble_is_shown_beside_the_bubble_where_present():
    zb = _case("ZB-H1", case_id="zb")
    zb["metrics"]["span_bubble_ratio"] = 0.0625
    old = _case("1F1B", case_id="old")
    old["metrics"].pop("span_bubble_ratio", None)
    html = render_index(results_document([zb, old]))
    header = re.findall(r"<th[^>]*>(.*?)</th>", html.split("</thead>")[0])
    assert header[9:13] == ["bubble", "theory", "Δ", "span bubble"]
    assert _cells(html, 0)[12] == "6.2%" and _cells(html, 1)[12] == "—"
    assert "Span bubble: per rank, idle time between that rank's first job start and last job end" in html
    assert "span bubble 6.2%" in html.split('id="case-0"')[1]


def test_chart_series_never_mix_cases_with_and_without_transfer_costs():
    from harness import FixedCost, PipelineCase, run_case
    from harness.report.charts import chart_data
    from harness.report.results import case_to_dict

    free = FixedCost.ms(F=1, B=2)
    costly = FixedCost(forward_ns=1_000_000, backward_ns=2_000_000, p2p_latency_ns=10_000)
    cases = [case_to_dict(run_case(PipelineCase("1F1B", 2, m, cost=c), "sim", case_id=f"{m}-{i}"))
             for i, c in enumerate((free, costly)) for m in (2, 4)]
    labels = [s["label"] for s in chart_data(cases)["series"]]
    assert labels == ["1F1B p=2, F=1 B=2 ms (sim, virtual)", "1F1B p=2, F=1 B=2 ms + p2p 10 µs (sim, virtual)"]


def test_the_step_behind_the_critical_path_and_decomposition_is_named_when_the_median_falls_between_two():
    # with 36 steps the page said "median step 240.221 ms" beside a 239.351 ms "median step's" chain
    from harness.report.html import _critical_text, _decomposition_text

    for steps, note in ((range(0, 2), " (the lower middle of 2 steps: the median falls between two)"), (range(0, 3), "")):
        case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2), "sim", steps))
        assert _critical_text(case) == (f"step 0{note}: 6 jobs, 9.000 ms (9.000 ms of it running): "
                                        "0F0 → 1F0 → 1B0 → 1F1 → 1B1 → 0B1")
        which = note.strip(" ()") + "; " if note else ""
        assert _decomposition_text(case) == ("step 9.000 ms = ideal 6.000 + imbalance 0.000 + recompute 0.000 + comm 0.000 + "
                                             f"schedule bubble 3.000 ms ({which}imbalance and recompute on rank 0, the busiest)")
