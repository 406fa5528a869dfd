"""Clock alignment arithmetic, merging per-rank records and the causality check, without MPI (hand-computed values)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness import FixedCost, PipelineCase
from harness.distributed.clock_sync import ClockAlignment, OffsetEstimate, align, best_exchange, injected_offset_ns
from harness.distributed.rank_merge import RankPart, check_causality, merge_part_files, merge_parts, read_part, write_part
from harness.errors import ConfigError, InputFormatError
from harness.plan.build import build_plan
from harness.records import JobRecord, RunRecords
from harness.run.device import create_device
from harness.run.executor import execute


def test_cristian_keeps_the_exchange_with_the_smallest_round_trip() -> None:
    est = best_exchange([(100, 1000, 140), (200, 1090, 220), (300, 1200, 360)])
    assert est == OffsetEstimate(offset_ns=880, bound_ns=10, at_ns=1090, rtt_ns=20, samples=3)  # 1090 - (200 + 220) / 2


def test_cristian_bound_rounds_up_an_odd_round_trip() -> None:
    assert best_exchange([(0, 50, 5)]) == OffsetEstimate(offset_ns=48, bound_ns=3, at_ns=50, rtt_ns=5, samples=1)


def test_cristian_refuses_no_exchange_and_time_running_backwards() -> None:
    with pytest.raises(ConfigError, match="at least one ping-pong exchange"):
        best_exchange([])
    with pytest.raises(ConfigError, match="an exchange ended \\(90 ns\\) before it started \\(100 ns\\)"):
        best_exchange([(100, 5, 90)])


def test_drift_is_applied_linearly_between_the_two_estimates() -> None:
    clock = align(OffsetEstimate(880, 10, 1090, 20, 3), OffsetEstimate(980, 25, 101_090, 50, 3), rank=1)
    assert clock.drift == pytest.approx(0.001)
    assert clock.offset_at(51_090) == 930
    assert clock.to_rank0(51_090) == 50_160
    assert clock.bound_ns == 25
    assert clock.to_dict()["drift_ppm"] == pytest.approx(1000.0)
    assert ClockAlignment.from_dict(clock.to_dict(), "here") == clock


def test_an_alignment_without_a_bound_is_refused() -> None:
    with pytest.raises(ConfigError, match="the clock estimate has no bound_ns; a merge without a known bound is refused"):
        ClockAlignment.from_dict({"rank": 1, "start": {"offset_ns": 1, "at_ns": 2}}, "rank 1")
    with pytest.raises(ConfigError, match="end clock estimate \\(5 ns\\) is before the start one \\(10 ns\\)"):
        align(OffsetEstimate(0, 1, 10, 2, 1), OffsetEstimate(0, 1, 5, 2, 1), rank=3)


def test_the_offset_hook_reads_rank_and_ns() -> None:
    assert injected_offset_ns(1, {"HARNESS_MPI_TEST_CLOCK_OFFSET": "1:250000000"}) == 250_000_000
    assert injected_offset_ns(0, {"HARNESS_MPI_TEST_CLOCK_OFFSET": "1:250000000"}) == 0
    assert injected_offset_ns(0, {}) == 0
    with pytest.raises(ConfigError, match="expected RANK:NS"):
        injected_offset_ns(0, {"HARNESS_MPI_TEST_CLOCK_OFFSET": "250ms"})


def _records(rank: int, jobs: list[tuple[str, int, str, int, int]], end: int) -> RunRecords:
    streams = sorted({s for s, *_ in jobs})
    return RunRecords(backend="cpu", device={"backend": "cpu", "workload": "sleep"}, num_ranks=2, streams=streams, steps=[1],
                      step_start_ns=[0], step_end_ns=[end], enqueue_ns=[7 + rank], warmup_steps=1,
                      jobs=[JobRecord(rank, s, stage, kind, mb, 0, 1, a, b) for s, stage, kind, mb, a, b in
                            [(s, st, k, 0, a, b) for s, st, k, a, b in jobs]])


def _parts(estimated_offset: int) -> list[RankPart]:
    # rank 1's clock is 4_000_000 ns ahead of rank 0's; its time base 0 is rank 0's 1_000_050
    r0 = _records(0, [("rank0/compute", 0, "F", 0, 100), ("rank0/comm↔1", 0, "SEND_F", 100, 110)], 110)
    r1 = _records(1, [("rank1/comm↔0", 1, "RECV_F", 0, 80), ("rank1/compute", 1, "F", 80, 180)], 180)
    est = OffsetEstimate(estimated_offset, 10, 5_000_000, 20, 8)
    return [RankPart(1, "host-b", r1, 5_000_050, ClockAlignment(1, est, None), {"backend": "cpu"}),
            RankPart(0, "host-a", r0, 1_000_000, None, {"backend": "cpu", "workload": "sleep"})]


def test_merge_shifts_every_rank_onto_rank0s_time_base() -> None:
    merged = merge_parts(_parts(4_000_000), host_anchor_ns=123)
    assert merged.backend == "mpi" and merged.num_ranks == 2
    assert [(j.label, j.rank, j.start_ns, j.end_ns) for j in merged.jobs] == [
        ("0F0", 0, 0, 100), ("1RECV_F0", 1, 50, 130), ("0SEND_F0", 0, 100, 110), ("1F0", 1, 130, 230)]
    assert merged.step_start_ns == [0] and merged.step_end_ns == [230] and merged.enqueue_ns == [8]
    assert merged.streams == ["rank0/comm↔1", "rank0/compute", "rank1/comm↔0", "rank1/compute"]
    assert merged.device["rank_labels"] == ["rank 0 (host-a)", "rank 1 (host-b)"]
    assert merged.device["clock_bound_ns"] == 10 and merged.device["host_anchor_ns"] == 123
    assert merged.device["ranks"][1]["clock"]["offset_ns"] == 4_000_000
    report = check_causality(merged)
    assert (report.pairs, report.violations, report.describe()) == (1, [], None)


def test_causality_reports_a_receive_that_ends_before_its_send_against_the_bound() -> None:
    merged = merge_parts(_parts(4_000_100))  # offset over-estimated by 100 ns: rank 1's jobs land 100 ns early
    report = check_causality(merged)
    assert report.violations == [{"send": "0SEND_F0", "recv": "1RECV_F0", "step": 1, "by_ns": 70, "bound_ns": 10, "within_bound": False}]
    assert report.describe() == ("causality: 1 of 1 receives end before their send starts on the merged time base (worst 1RECV_F0 of step 1, "
                                 "by 70 ns; clock bound 10 ns); 1 beyond the bound: the clock alignment is wrong for them")


def test_merge_refuses_missing_duplicate_and_unaligned_ranks() -> None:
    parts = _parts(4_000_000)
    with pytest.raises(ConfigError, match=re.escape("a 2-rank run needs one part per rank 0..1: rank(s) [0] missing")):
        merge_parts(parts[:1])
    with pytest.raises(ConfigError, match="rank 1 is given twice"):
        merge_parts([parts[0], parts[0], parts[1]])
    parts[0].clock = None
    with pytest.raises(ConfigError, match="rank 1 \\(host-b\\): no clock alignment to rank 0; a merge without a known bound is refused"):
        merge_parts(parts)


def test_part_files_written_by_separate_processes_merge_the_same(tmp_path: Path) -> None:
    paths = [write_part(tmp_path / f"rank{p.rank}.json", p) for p in _parts(4_000_000)]
    merged = merge_part_files(paths)
    direct = merge_parts(_parts(4_000_000))
    assert merged.jobs == direct.jobs and merged.step_end_ns == direct.step_end_ns
    assert merged.device["causality"] == {"pairs": 1, "violations": [], "bound_ns": 10}
    doc = json.loads(paths[0].read_text())
    doc["clock"] = None
    paths[0].write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=re.escape("rank1.json: rank 1 has no clock alignment to rank 0; a merge without a known bound is refused")):
        read_part(paths[0])
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(InputFormatError, match=re.escape("bad.json: not a rank part file")):
        read_part(tmp_path / "bad.json")


def test_executor_refuses_a_subset_of_ranks_without_a_transport() -> None:
    case = PipelineCase(schedule="1F1B", stages=2, microbatches=2, cost=FixedCost(forward_ns=10, backward_ns=20))
    plan = build_plan(case.compute_schedule())
    device = create_device("sim")
    with pytest.raises(ConfigError, match="running a subset of ranks needs a device with a cross-process transport \\(the mpi backend"):
        execute(plan, device, case.cost, range(0, 1), ranks=[0])


def test_hockney_fit_and_the_fixed_cost_that_takes_it() -> None:
    from harness.distributed.p2p import P2PSample, fit_hockney, with_measured_transfers

    samples = [P2PSample(1024, 1000 + 1024 / 2, 10), P2PSample(4096, 1000 + 4096 / 2, 10), P2PSample(16384, 1000 + 16384 / 2, 10)]
    latency, bandwidth = fit_hockney(samples)
    assert latency == pytest.approx(1000.0) and bandwidth == pytest.approx(2.0)
    cost = with_measured_transfers(FixedCost(forward_ns=10, backward_ns=20, activation_bytes=4096), samples)
    assert (cost.p2p_latency_ns, cost.p2p_gbytes_per_s) == (1000, pytest.approx(2.0))
    with pytest.raises(ConfigError, match="activation_bytes is 0"):
        with_measured_transfers(FixedCost(forward_ns=10, backward_ns=20), samples)
    with pytest.raises(ConfigError, match="at least two message sizes"):
        fit_hockney(samples[:1])
    with pytest.raises(ConfigError, match="do not grow with the message size"):
        fit_hockney([P2PSample(1024, 5000, 1), P2PSample(4096, 4000, 1)])
