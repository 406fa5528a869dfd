"""The HTML review page: content, escaping, compact data, size at 100,000 jobs."""

from __future__ import annotations

import json
import re

import pytest

from harness.case import PipelineCase
from harness.cost import FixedCost
from harness.report.html import kind_table, render_index, timeline_data
from harness.report.results import case_to_dict, results_document
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
    rows = re.findall(r'<tr data-case="(\d+)">', html)
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
