"""The schedule grid's slots and the cost model's per-job durations on the review page."""

from __future__ import annotations

import pytest

from harness.case import PipelineCase
from harness.cost import FixedCost
from harness.report.cost_table import cost_durations, durations_text
from harness.report.grid import grid_slots
from harness.report.results import case_to_dict
from harness.runner import run_case
from harness.transformer import TransformerCost


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


def test_no_cost_model_no_durations():
    assert cost_durations({"cost": {"model": "paddle"}, "jobs": {}, "schedule": {"p": 1, "v": 1}}) is None
    assert cost_durations({"jobs": {}, "schedule": {"p": 1, "v": 1}}) is None
    assert durations_text(None) == ""
