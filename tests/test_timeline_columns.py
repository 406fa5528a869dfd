"""The page's timeline data from columns (issue 13): value for value what the per-job version
wrote (frozen in tests/_reference_timeline.py) on every schedule, each comm model, imports,
overlapping jobs, colliding job texts, a grid cycle and an empty case; the page's JSON text is
``json.dumps``' byte for byte; the grid from one pass over its edges equals the Kahn pass."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from _reference_timeline import timeline_data as reference_timeline
from jinja2.utils import htmlsafe_json_dumps

from harness.case import PipelineCase
from harness.imports.paddle import import_paddle_logs
from harness.model.cost import FixedCost
from harness.model.transformer import TransformerCost
from harness.report.colours import kind_table
from harness.report.grid import place_in_order, place_slots
from harness.report.html import render_index
from harness.report.jobtable import JobTable
from harness.report.results import case_to_dict, results_document
from harness.report.timeline import page_json, timeline_columns, timeline_data
from harness.runner import run_case
from harness.schedule.registry import builder_info, schedule_names

COMPACT = {"sort_keys": False, "separators": (",", ":"), "allow_nan": False}


def _case(schedule: str, comm_model: str | None = None, p: int = 4, m: int = 8, steps: range = range(1, 3), **kw) -> dict:
    v = 2 if builder_info(schedule).takes_chunks else 1
    pc = PipelineCase(schedule, stages=p, microbatches=m, chunks=v, comm_model=comm_model, **kw)
    return case_to_dict(run_case(pc, "sim", steps))


def _same(case: dict) -> dict:
    kinds = kind_table([case])
    want = reference_timeline(case, kinds)
    got = timeline_data(case, kinds)
    assert got == want
    assert json.dumps(got, **COMPACT) == json.dumps(want, **COMPACT)  # ints stay ints, key order kept
    assert page_json(timeline_columns(case, kinds, JobTable.from_case(case)), **COMPACT) == json.dumps(want, **COMPACT)
    return got


@pytest.mark.parametrize("comm_model", ["free", "edge", "stream"])
@pytest.mark.parametrize("schedule", schedule_names())
def test_every_schedule_gives_the_same_page_data_as_before(schedule, comm_model):
    got = _same(_case(schedule, comm_model=comm_model))
    assert got["slot"] is not None and len(got["deps"]) % 3 == 0 and got["deps"]


def test_recompute_memory_and_one_step_give_the_same_page_data():
    c = TransformerCost(hidden_size=256, seq_len=128, micro_batch_size=1, num_layers=4, tflops=1, recompute="full")
    case = case_to_dict(run_case(PipelineCase("1F1B", 2, 3, cost=c), "sim"))
    assert case.get("memory") and case.get("critical_path")
    got = _same(case)
    assert got["cp"] and got["mem"]


def test_a_paddle_import_with_overlaps_odd_kinds_and_a_stream_without_rank(tmp_path):
    def line(t, mb, a, b):
        return f"Profiler Info: Job ({mb}), type = {t}, micro_batch_id = {mb}, job_start_time = {a:.6f}, job_end_time = {b:.6f}"

    (tmp_path / "workerlog.0").write_text("\n".join([
        line("lr", 0, 999, 999.5), line("forward", 0, 1000, 1004), line("forward", 1, 1001, 1002),
        line("frobnicate%d", 0, 1004, 1005), line("backward", 0, 1006, 1008), line("optimizer", 0, 1008, 1009)]) + "\n")
    (tmp_path / "workerlog.1").write_text("\n".join([line("forward", 0, 1004.5, 1005.5), line("backward", 0, 1005.5, 1006)]) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = import_paddle_logs(tmp_path)
    assert case["overlaps"]
    got = _same(case)
    assert got["ov"]


def test_colliding_job_texts_take_the_last_job_of_the_text_as_before():
    case = _case("1F1B", p=2, m=2, steps=range(0, 1))
    jobs = case["jobs"]
    at = {(jobs["stage"][i], jobs["kind"][i], jobs["microbatch"][i]): i for i in range(len(jobs["kind"]))}
    # An imported kind ending in a digit: stage 0, kind "F1", micro-batch 0 reads "0F10", as stage 0, F, micro-batch 10 does.
    b, f = at[(0, "B", 0)], at[(0, "F", 1)]
    jobs["kind"][b], jobs["microbatch"][f] = "F1", 10
    case["backend"] = "paddle-log"
    case["deps"] = [*case["deps"], ["0F10", "1F0", "end"], ["1F0", "0F10", "end"]]
    table = JobTable.from_case(case)
    assert len(set(table.labels)) == len(table.labels) - 1  # two labels, one text
    _same(case)


def test_a_grid_cycle_and_an_out_of_time_order_run_give_the_same_data():
    case = _case("1F1B", p=2, m=2, steps=range(0, 1))
    case["deps"] = [*case["deps"], ["1B1", "0F1", "end"]]  # a cycle: no grid, said so
    got = _same(case)
    assert got["slot"] is None and "cycle" in got["gridError"]
    swapped = _case("1F1B", p=2, m=3, steps=range(0, 2))
    j = swapped["jobs"]
    a = next(i for i in range(len(j["kind"])) if (j["stage"][i], j["kind"][i], j["microbatch"][i], j["step"][i]) == (1, "F", 0, 0))
    j["start_ns"][a], j["end_ns"][a] = 0, 1  # 1F0 stamped before 0F0 ends: the times are no topological order
    assert _same(swapped)["slot"] is not None


def test_an_empty_case_gives_the_same_page_data():
    case = _case("1F1B", p=2, m=2, steps=range(0, 1))
    case["jobs"] = {k: [] for k in case["jobs"]}
    case.pop("critical_path", None)
    _same(case)


def test_place_in_order_matches_kahn_and_refuses_a_backward_edge():
    comm = np.array([False, True, False, False])
    chained = np.array([False, True, False, True])  # stream A: 0 -> 1, stream B: 2 -> 3
    deps = np.array([[1, 3, 0], [0, 2, 1]], dtype=np.int64)  # 1 ends before 3; 2 starts with 0
    start = np.array([0, 5, 0, 7])
    got = place_in_order(comm, chained, deps, start)
    assert got == place_slots(comm.tolist(), [[0, 1], [2, 3]], deps.reshape(-1).tolist()) == [0, 1, 0, 1]
    tied = place_in_order(comm, chained, deps, np.zeros(4, np.int64))  # all at once: the edges order them
    assert tied == [0, 1, 0, 1]
    assert place_in_order(comm, chained, deps, np.array([0, 5, 0, 4])) is None  # 3 starts before 1: 1 -> 3 backward
    assert place_in_order(comm, chained, deps, np.array([0, 5, 0, 7]) + (1 << 60)) == [0, 1, 0, 1]  # past one int64 key: lexsort


def test_the_page_embeds_the_same_json_as_json_dumps_of_the_lists():
    doc = results_document([_case("Interleaved1F1B", comm_model="stream"), _case("ZB-H1", cost=FixedCost.ms(F=1, B=2, W=1))])
    html = render_index(doc)
    kinds = kind_table(doc["cases"])
    want = htmlsafe_json_dumps([reference_timeline(c, kinds) for c in doc["cases"]], **COMPACT)
    assert str(want)[1:-1] in html  # the cases' data inside the payload, as json.dumps wrote it


def _paddle_case(tmp_path) -> dict:
    def line(t, mb, a, b):
        return f"Profiler Info: Job ({mb}), type = {t}, micro_batch_id = {mb}, job_start_time = {a:.6f}, job_end_time = {b:.6f}"

    (tmp_path / "workerlog.0").write_text("\n".join([line("forward", 0, 1000, 1004), line("forward", 1, 1001, 1002),
                                                     line("backward", 0, 1006, 1008), line("optimizer", 0, 1008, 1009)]) + "\n")
    (tmp_path / "workerlog.1").write_text("\n".join([line("forward", 0, 1004.5, 1005.5), line("backward", 0, 1005.5, 1006)]) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return import_paddle_logs(tmp_path)


def test_the_whole_page_is_the_same_bytes_as_before(tmp_path, monkeypatch):
    import _reference_timeline as ref

    import harness.report.html as html_mod

    c = TransformerCost(hidden_size=256, seq_len=128, micro_batch_size=1, num_layers=4, tflops=1, recompute="full")
    cases = [_case("DualPipeV", comm_model="stream"), _case("1F1B", comm_model="edge"), _case("ZB-H1", cost=FixedCost.ms(F=1, B=2, W=1)),
             case_to_dict(run_case(PipelineCase("1F1B", 2, 3, cost=c), "sim")), _paddle_case(tmp_path)]
    assert any(ref.overlap_stretch(x) for x in cases)  # DualPipeV's F&B groups: tooltips of the stretch
    doc = results_document(cases)
    tables = [JobTable.from_case(x) for x in doc["cases"]]
    new, new_with_tables = render_index(doc), render_index(doc, tables=tables)
    monkeypatch.setattr(html_mod, "timeline_columns", lambda case, kinds, table=None: ref.timeline_data(case, kinds))
    monkeypatch.setattr(html_mod, "_stage_bars", lambda case, table=None: ref._stage_bars(case))
    monkeypatch.setattr(html_mod, "page_json", json.dumps)
    old = render_index(doc)
    assert new == old and new_with_tables == old
