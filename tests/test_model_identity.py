"""Model identity on the page (issue 26): every field that tells two cases' models apart is in their labels,
a field one case has and another lacks included; and dots that would overlap are set apart.
"""

from __future__ import annotations

import math

import pytest

from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.report.charts import sweep_chart
from harness.report.dots import DOT_GAP, set_apart
from harness.report.identity import model_key, model_labels
from harness.report.memory_chart import step_memory_chart
from harness.report.results import case_to_dict
from harness.runner import run_case

MEM = FixedCost.ms(F=1, B=2, mem_F=2**28, mem_static=2**30)


def _case(schedule: str = "1F1B", m: int = 8, case_id: str = "x", **kw) -> dict:
    v = kw.pop("chunks", 1)
    return case_to_dict(run_case(PipelineCase(schedule, stages=4, microbatches=m, chunks=v, **kw), "sim", range(0, 1), case_id=case_id))


def test_a_memory_limit_beside_none_reads_no_limit():
    with_limit, without = _case(cost=MEM, memory_limit_bytes=2**31, case_id="a"), _case(cost=MEM, case_id="b")
    assert model_key(with_limit) != model_key(without)
    assert model_labels([with_limit, without]) == ["F=1 B=2 ms · limit 2 GiB", "F=1 B=2 ms · no limit"]
    # the same two alone: nothing to tell apart, no field added
    assert model_labels([without, without]) == ["F=1 B=2 ms", "F=1 B=2 ms"]


def test_a_case_without_a_memory_model_is_not_said_to_have_no_limit():
    # a case that models no memory can have no limit: its absence tells nothing apart
    # (the memory model's own fields tell the two apart)
    labels = model_labels([_case(cost=MEM, memory_limit_bytes=2**31, case_id="a"), _case(case_id="b")])
    assert labels == ["F=1 B=2 ms · mem_F=268435456 · mem_I=null · mem_W=0 · mem_static=1073741824", "F=1 B=2 ms"]


def test_a_schedule_option_beside_its_default_is_named_on_both():
    plain = _case("Interleaved1F1B", chunks=2, case_id="a")
    grouped = _case("Interleaved1F1B", chunks=2, options={"microbatch_group_size_per_vp_stage": 8}, case_id="b")
    other = _case("1F1B", case_id="c")  # 1F1B has no such option: its label does not mention it
    assert grouped["metrics"]["step_time_median_ns"] == plain["metrics"]["step_time_median_ns"] == 57_000_000
    assert model_labels([plain, grouped, other]) == [
        "F=1 B=2 ms · microbatch_group_size_per_vp_stage=default", "F=1 B=2 ms · microbatch_group_size_per_vp_stage=8", "F=1 B=2 ms"]


def test_an_option_the_label_names_is_not_repeated_in_the_legend():
    plain = _case("Interleaved1F1B", chunks=2, m=8, case_id="a")
    grouped = _case("Interleaved1F1B", chunks=2, m=8, options={"microbatch_group_size_per_vp_stage": 8}, case_id="b")
    plain16 = _case("Interleaved1F1B", chunks=2, m=16, case_id="c")
    grouped16 = _case("Interleaved1F1B", chunks=2, m=16, options={"microbatch_group_size_per_vp_stage": 8}, case_id="d")
    labels = sorted(s["label"] for s in sweep_chart([plain, grouped, plain16, grouped16], "m")["series"])
    assert labels == ["Interleaved1F1B p=4 v=2, F=1 B=2 ms · microbatch_group_size_per_vp_stage=8 (sim, virtual)",
                      "Interleaved1F1B p=4 v=2, F=1 B=2 ms · microbatch_group_size_per_vp_stage=default (sim, virtual)"]


def test_send_receive_placement_absent_without_transfers_adds_nothing():
    # stream (with send/receive jobs, a placement) against edge (none): the comm model's column tells them apart
    stream = _case(cost=FixedCost.ms(F=1, B=2, p2p_latency_ns=10_000), case_id="a")
    none = _case(cost=FixedCost.ms(F=1, B=2, p2p_latency_ns=10_000), comm_model="edge", case_id="b")
    assert "comm_placement" in stream["schedule"]["params"] and "comm_placement" not in none["schedule"]["params"]
    assert model_labels([stream, none]) == ["F=1 B=2 ms + p2p 10 µs"] * 2


def test_set_apart_moves_only_dots_that_overlap():
    points = [(100.0, 50.0), (100.0, 50.0), (103.0, 50.0), (200.0, 50.0)]
    placed = set_apart(points, bands=[(80.0, 120.0)] * 3 + [(180.0, 220.0)], box=(0.0, 0.0, 300.0, 100.0))
    assert placed[0] == (100.0, 50.0) and placed[3] == (200.0, 50.0)  # nothing near: where they were
    assert placed[1] == (100.0 - DOT_GAP, 50.0) and placed[2] == (103.0 + DOT_GAP, 50.0)  # sideways, nearest free spot
    assert all(math.dist(a, b) >= DOT_GAP for i, a in enumerate(placed) for b in placed[i + 1:])


def test_set_apart_goes_up_or_down_when_the_band_is_full():
    placed = set_apart([(50.0, 50.0)] * 4, bands=[(45.0, 55.0)] * 4, box=(0.0, 0.0, 100.0, 100.0))
    assert all(45.0 <= x <= 55.0 for x, _ in placed)
    assert sorted(y for _, y in placed) == [50.0 - 2 * DOT_GAP, 50.0 - DOT_GAP, 50.0, 50.0 + DOT_GAP]
    with pytest.raises(ValueError, match="2 bands for 1 points"):
        set_apart([(0.0, 0.0)], bands=[(0.0, 1.0)] * 2)


def test_equal_dots_of_many_series_are_all_whole_on_the_sweep_chart():
    # eight models (memory limits) with the same figures at each m: sixteen dots on two spots, every one visible
    cases = [_case(m=m, cost=MEM, memory_limit_bytes=(8 + k) * 2**30, case_id=f"{k}-{m}") for k in range(8) for m in (4, 8)]
    chart = sweep_chart(cases, "m")
    assert len(chart["series"]) == 8
    for panel in ("step", "bubble"):
        dots = [(d["x"], d["y"]) for line in chart[panel]["lines"] for d in line["dots"]]
        assert len(dots) == 16
        assert min(math.dist(a, b) for i, a in enumerate(dots) for b in dots[i + 1:]) >= DOT_GAP


def test_equal_dots_on_the_memory_chart_are_all_whole():
    cases = [_case(cost=MEM, memory_limit_bytes=(8 + k) * 2**30, case_id=f"c{k}") for k in range(6)]
    chart = step_memory_chart(cases, model_labels(cases))
    dots = [(d["x"], d["y"]) for d in chart["dots"]]
    assert len(dots) == 6 and min(math.dist(a, b) for i, a in enumerate(dots) for b in dots[i + 1:]) >= DOT_GAP
    assert all("drawn beside it, at the same place: " in d["title"] for d in chart["dots"])
