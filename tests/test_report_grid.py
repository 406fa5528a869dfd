"""The schedule grid's slots and the cost model's per-job durations on the review page."""

from __future__ import annotations

import pytest

from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.model.transformer import TransformerCost
from harness.report.cost_table import cost_durations, durations_text
from harness.report.grid import grid_slots
from harness.report.results import case_to_dict
from harness.runner import run_case


def _cells(case, slots, step=0):
    j = case["jobs"]
    return {(j["rank"][i], slots[i]): f"{j['stage'][i]}{j['kind'][i]}{j['microbatch'][i]}"
            for i in range(len(slots)) if j["step"][i] == step and j["kind"][i] in ("F", "B", "I", "W")}


def test_1f1b_p2_m3_grid_is_the_hand_computed_one():
    # Rank 0 runs F0 F1 B0 F2 B1 B2, rank 1 F0 B0 F1 B1 F2 B2 (1F1B, warm-up p-1-r).
    # A job takes the slot after its stream predecessor and every dependency:
    # 1F0 waits for 0F0 (slot 1), 0B0 for 1B0 (slot 3), 0B2 for 1B2 (slot 7).
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=3), "sim", range(0, 1)))
    cells = _cells(case, grid_slots(case))
    row0 = [cells.get((0, s), ".") for s in range(8)]
    row1 = [cells.get((1, s), ".") for s in range(8)]
    assert row0 == ["0F0", "0F1", ".", "0B0", "0F2", "0B1", ".", "0B2"]
    assert row1 == [".", "1F0", "1B0", "1F1", "1B1", "1F2", "1B2", "."]


def test_transfers_take_no_slot_and_every_step_counts_from_zero():
    plain = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=3), "sim", range(0, 1)))
    comm = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=3, comm=True), "sim", range(0, 2)))
    slots = grid_slots(comm)
    assert _cells(comm, slots, 0) == _cells(plain, grid_slots(plain))
    assert _cells(comm, slots, 1) == _cells(comm, slots, 0)
    j = comm["jobs"]
    sends = [slots[i] for i in range(len(slots)) if j["kind"][i] == "SEND_F" and j["step"][i] == 0]
    assert sends == [1, 2, 5]  # after 0F0, 0F1, 0F2 end (slots 0, 1, 4)


def test_zero_bubble_grid_has_every_job_once_per_slot():
    case = case_to_dict(run_case(PipelineCase("ZB-H1", stages=4, microbatches=8), "sim", range(0, 1)))
    slots = grid_slots(case)
    j = case["jobs"]
    seen = [(j["rank"][i], slots[i]) for i in range(len(slots)) if j["kind"][i] not in ("SEND_F", "RECV_F", "SEND_B", "RECV_B")]
    assert len(seen) == len(set(seen)) == 4 * 8 * 3  # F, I, W per stage and micro-batch, no two in one cell


def test_a_cycle_is_refused_naming_the_case_and_a_job():
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2), "sim", range(0, 1)))
    case["deps"] = [*case["deps"], ["1B1", "0F1", "end"]]  # 0F1 runs before 1B1 needs it: a cycle
    with pytest.raises(ValueError, match=r"case '1F1B p=2 m=2'.*cycle through"):
        grid_slots(case)


def test_cost_durations_from_a_fixed_per_stage_model():
    cost = FixedCost.ms(F=[1, 1.5], B=[2, 3])
    case = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=cost), "sim", range(0, 1)))
    table = cost_durations(case)
    assert table == {"0,B": 2_000_000, "0,F": 1_000_000, "1,B": 3_000_000, "1,F": 1_500_000}
    assert durations_text(table) == "F 1–1.5 · B 2–3 ms"
    # On sim every job lasts its cost-model duration.
    j = case["jobs"]
    assert all(j["end_ns"][i] - j["start_ns"][i] == table[f"{j['stage'][i]},{j['kind'][i]}"] for i in range(len(j["kind"])))


def test_cost_durations_from_a_transformer_model_match_the_run():
    tiny = TransformerCost(hidden_size=64, seq_len=16, micro_batch_size=1, num_layers=2, tflops=1.0)
    case = case_to_dict(run_case(PipelineCase("ZB-H1", stages=2, microbatches=2, cost=tiny), "sim", range(0, 1)))
    table = cost_durations(case)
    j = case["jobs"]
    assert table is not None and set(table) == {f"{s},{k}" for s in (0, 1) for k in ("F", "I", "W")}
    assert all(j["end_ns"][i] - j["start_ns"][i] == table[f"{j['stage'][i]},{j['kind'][i]}"] for i in range(len(j["kind"])))


def test_durations_text_folds_equal_transfers_into_one_entry():
    t = {"0,F": 1_000_000, "0,B": 2_000_000, "0,SEND_F": 177_800, "0,RECV_F": 177_800, "0,SEND_B": 177_800,
         "0,RECV_B": 177_800}
    assert durations_text(t) == "F 1 · B 2 · transfer 0.1778 ms"
    t["0,RECV_B"] = 200_000  # one differs: each kind on its own
    assert durations_text(t) == "F 1 · B 2 · SEND_F 0.1778 · RECV_F 0.1778 · SEND_B 0.1778 · RECV_B 0.2 ms"
    free = {"0,F": 1_000_000, **{f"0,{k}": 0 for k in ("SEND_F", "RECV_F", "SEND_B", "RECV_B")}}
    assert durations_text(free) == "F 1 ms"


def test_no_cost_model_no_durations():
    assert cost_durations({"cost": {"model": "paddle"}, "jobs": {}, "schedule": {"p": 1, "v": 1}}) is None
    assert cost_durations({"jobs": {}, "schedule": {"p": 1, "v": 1}}) is None
    assert durations_text(None) == ""


def test_sweep_charts_cover_every_swept_dimension_with_error_bars_and_theory():
    from harness.report.charts import sweep_chart, sweep_charts

    cost = FixedCost.ms(F=1, B=2)
    cases = [case_to_dict(run_case(PipelineCase(s, stages=p, microbatches=m, cost=cost), "sim", range(0, 2), case_id=f"{s}-{p}-{m}"))
             for s in ("1F1B", "ZB-H1") for p in (2, 4) for m in (4, 8)]
    assert [c["dim"] for c in sweep_charts(cases)] == ["m", "p", "schedule"]  # v is not swept
    by_p = sweep_chart(cases, "p")
    assert [s["label"] for s in by_p["series"]] == ["1F1B m=4, F=1 B=2 ms (sim, virtual)", "1F1B m=8, F=1 B=2 ms (sim, virtual)",
                                                   "ZB-H1 m=4, F=1 B=2 ms (sim, virtual)", "ZB-H1 m=8, F=1 B=2 ms (sim, virtual)"]
    assert [t["label"] for t in by_p["xticks"]] == ["2", "4"]
    # 1F1B p=4 m=4 on sim: (m + p - 1) x 3 ms = 21 ms; theory bubble (p-1)/(m+p-1) = 3/7 dashed beside it.
    dot = by_p["step"]["lines"][0]["dots"][1]["title"]
    # the case, then its series, each isolated (U+2068 ... U+2069: a right-to-left override in a name stays inside it)
    assert dot == "\u20681F1B p=4 m=4\u2069 (\u20681F1B m=4, F=1 B=2 ms (sim, virtual)\u2069): p=4, 21.00 ms"
    # a second case at the same p is drawn too, beside the first (it was hidden behind it); each names the other
    twice = sweep_chart([*cases, {**cases[2], "id": "again", "label": "again"}], "p")  # cases[2]: 1F1B p=4 m=4
    dots = twice["step"]["lines"][0]["dots"]
    assert len(dots) == 3 and dots[1]["y"] == dots[2]["y"] and dots[2]["x"] - dots[1]["x"] > 2
    assert dots[1]["title"].endswith("21.00 ms; drawn beside it, at the same p: \u2068again\u2069")
    assert dots[2]["title"].startswith("\u2068again\u2069 (") and "at the same p: \u20681F1B p=4 m=4\u2069" in dots[2]["title"]
    assert by_p["bubble"]["lines"][0]["theory"] and by_p["step"]["lines"][0]["bars"] == []  # sim: no spread, no bar
    by_s = sweep_chart(cases, "schedule")
    assert [t["label"] for t in by_s["xticks"]] == ["1F1B", "ZB-H1"] and len(by_s["series"]) == 4
    with pytest.raises(ValueError, match="unknown dimension 'x'"):
        sweep_chart(cases, "x")


def test_delta_is_red_only_above_the_stated_threshold_and_the_default_pair_shares_model_and_p():
    from harness.report.html import BUBBLE_DELTA_PP, render_index
    from harness.report.results import results_document

    a = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=2, B=4)), "sim", range(0, 1), case_id="a"))
    b = case_to_dict(run_case(PipelineCase("1F1B", stages=4, microbatches=4), "sim", range(0, 1), case_id="b"))
    c = case_to_dict(run_case(PipelineCase("ZB-H1", stages=4, microbatches=4), "sim", range(0, 1), case_id="c"))
    for case, delta in ((a, 0.0054), (b, 0.0056)):  # shown +0.5 pp (not red) and +0.6 pp (red)
        case["theory"]["bubble_ratio"] = case["metrics"]["bubble_ratio"] - delta
    html = render_index(results_document([a, b, c]))
    assert BUBBLE_DELTA_PP == 0.5
    assert html.count(' class="bad" title="more than 0.5 pp above theory">+0.6 pp</td>') == 1
    assert '">+0.5 pp</td>' in html and 'class="good"' not in html
    assert '<option value="1" selected>1F1B p=4 m=4</option>' in html and '<option value="2" selected>ZB-H1 p=4 m=4</option>' in html
    assert "the first two cases with the same model and p (p=4)" in html


def test_the_page_data_has_the_same_slots_and_says_why_there_is_no_grid():
    from harness.report.timeline import timeline_data

    case = case_to_dict(run_case(PipelineCase("Interleaved1F1B", stages=2, microbatches=4, chunks=2, comm=True), "sim", range(0, 2)))
    data, slots = timeline_data(case), grid_slots(case)
    j = case["jobs"]
    order = sorted(range(len(slots)), key=lambda i: (j["stream"][i], j["start_ns"][i], j["end_ns"][i]))
    assert data["slot"] == [slots[i] for i in order] and data["gridError"] is None
    bad = case_to_dict(run_case(PipelineCase("1F1B", stages=2, microbatches=2), "sim", range(0, 1)))
    bad["deps"] = [*bad["deps"], ["1B1", "0F1", "end"]]
    data = timeline_data(bad)
    assert data["slot"] is None
    assert data["gridError"].startswith("the recorded stream order and the dependencies form a cycle through ")
    assert data["gridError"].endswith(" of step 0")
