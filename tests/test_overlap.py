"""Overlapped F&B groups (harness.plan.groups): DualPipeV's OVERLAP_F_B pairs run as one unit, from when
both inputs are in, for the group's time (F + B by default, max(F, B) at overlap_ratio=0)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.analysis.analytic import analyze
from harness.analysis.busy import busy_union
from harness.case import PipelineCase
from harness.errors import ScheduleError
from harness.model.cost import FixedCost
from harness.plan.build import build_plan
from harness.report.tracecheck import check_trace
from harness.runner import run_case
from harness.schedule.groups import groups_of, with_groups
from harness.schedule.model import Schedule
from harness.schedule.notation import dumps_csv, loads_csv
from harness.schedule.registry import build_schedule


def pairs_on_rank(p: int, m: int, r: int) -> int:
    """DualPipeV's overlapped pairs on rank r (PyTorch ScheduleDualPipeV): step 4 has m-2p+r+1
    iterations of two pairs, less the last rank's first; step 5 has p-r-1 pairs."""
    return 2 * (m - 2 * p + r + 1) - (r == p - 1) + (p - r - 1)


def test_dualpipev_emits_pytorchs_pairs() -> None:
    s = build_schedule("DualPipeV", 4, 8, 2)
    groups = groups_of(s)
    assert [pairs_on_rank(4, 8, r) for r in range(4)] == [5, 6, 7, 7]
    assert len(groups) == 25
    per_rank = [0] * 4
    for f, b in groups:
        assert f.kind.value == "F" and b.kind.value == "B"
        per_rank[s.rank_of(f.stage)] += 1
    assert per_rank == [5, 6, 7, 7]
    assert groups_of(build_schedule("DualPipeV", 4, 8, 2, overlap=False)) == ()


@pytest.mark.parametrize(("f", "b"), [(1_000_000, 2_000_000), (2_000_000, 3_000_000), (3_000_000, 2_000_000)])
def test_dualpipev_overlap_shortens_the_step_by_the_hand_computed_amount(f: int, b: int) -> None:
    # p=4, m=8: ranks 2 and 3 hold 7 pairs each; at overlap_ratio=0 each pair lasts max(F, B) instead of F + B,
    # so those ranks do 7 min(F, B) less, and their idle time is the same with and without overlap: the step is
    # 7 min(F, B) shorter.
    cost = FixedCost(forward_ns=f, backward_ns=b, overlap_ratio=0.0)
    with_o = run_case(PipelineCase("DualPipeV", stages=4, microbatches=8, cost=cost), backend="sim")
    without = run_case(PipelineCase("DualPipeV", stages=4, microbatches=8, cost=cost, options={"overlap": False}), backend="sim")
    saved = 7 * min(f, b)
    assert without.metrics.step_time_median_ns - with_o.metrics.step_time_median_ns == saved
    assert analyze(build_schedule("DualPipeV", 4, 8, 2), cost).makespan_ns == with_o.metrics.step_time_median_ns
    # rank 3 works 2m(F+B) without overlap, 7 min(F,B) less with it (busy counts the overlap once)
    assert without.metrics.steps[0].busy_ns[3] == 16 * (f + b)
    assert with_o.metrics.steps[0].busy_ns[3] == 16 * (f + b) - saved
    # by default (no overlap: a group lasts F + B) every rank is busy 2m(F+B), groups or not
    default = run_case(PipelineCase("DualPipeV", stages=4, microbatches=8, cost=FixedCost(forward_ns=f, backward_ns=b)), backend="sim")
    assert list(default.metrics.steps[0].busy_ns) == [16 * (f + b)] * 4


def test_example_figures_in_the_docs() -> None:
    # docs/schedules.md, "Overlapped F&B": 54 ms by default, 44 ms at overlap_ratio=0, 51 ms with overlap=False
    cost = FixedCost.ms(F=1, B=2)
    assert analyze(build_schedule("DualPipeV", 4, 8, 2), cost).makespan_ns == 54_000_000
    assert analyze(build_schedule("DualPipeV", 4, 8, 2), FixedCost.ms(F=1, B=2, overlap_ratio=0)).makespan_ns == 44_000_000
    assert analyze(build_schedule("DualPipeV", 4, 8, 2, overlap=False), cost).makespan_ns == 51_000_000
    text = (Path(__file__).resolve().parent.parent / "docs" / "schedules.md").read_text(encoding="utf-8")
    assert "DualPipeV takes 54 ms by default (G = 3 ms), 44 ms at `overlap_ratio=0`" in " ".join(text.split())
    assert "instead (51 ms there)" in " ".join(text.split())


def test_pair_runs_on_a_sibling_stream_and_the_trace_nests(tmp_path) -> None:
    from harness.report.render import write_report
    from harness.report.results import case_to_dict, results_document

    r = run_case(PipelineCase("DualPipeV", stages=4, microbatches=8), backend="sim")
    assert "rank0/overlap" in r.records.streams
    by_name = {(j.stage, j.kind, j.microbatch): j for j in r.records.jobs}
    f, b = groups_of(r.schedule)[0]
    jf, jb = by_name[(f.stage, "F", f.microbatch)], by_name[(b.stage, "B", b.microbatch)]
    assert jf.stream.endswith("/compute") and jb.stream.endswith("/overlap")
    assert jb.start_ns >= jf.start_ns and jb.start_ns < jf.end_ns  # concurrently
    write_report(tmp_path, results_document([case_to_dict(r)]))
    for trace in (tmp_path / "traces").iterdir():
        assert check_trace(json.loads(trace.read_text())) == []


def test_csv_keeps_the_groups_both_ways() -> None:
    s = build_schedule("DualPipeV", 2, 4, 2)
    text = dumps_csv(s)
    assert "(0F2;3B0)OVERLAP_F_B" in text or "OVERLAP_F_B" in text
    back = loads_csv(text)
    assert back.ranks == s.ranks
    assert groups_of(back) == groups_of(s)
    cost = FixedCost.ms(F=1, B=2)
    assert analyze(back, cost).makespan_ns == analyze(s, cost).makespan_ns


def test_a_schedule_file_keeps_the_groups(tmp_path) -> None:
    # A dumped DualPipeV read back as a file (a case's schedule=Path, or `show FILE`) used to lose its
    # groups and run them as plain jobs: 25 ms instead of 26 ms at p=2, m=4, F=1, B=2 ms (22 ms at overlap_ratio=0).
    from harness.schedule.notation import dump_csv, load_schedule_file

    s = build_schedule("DualPipeV", 2, 4, 2)
    dump_csv(s, tmp_path / "dpv.csv")
    back = load_schedule_file(tmp_path / "dpv.csv")
    assert back.params["source"] == str(tmp_path / "dpv.csv")
    assert groups_of(back) == groups_of(s)
    cost = FixedCost.ms(F=1, B=2)
    assert analyze(back, cost).makespan_ns == analyze(s, cost).makespan_ns == 26_000_000
    run = run_case(PipelineCase(tmp_path / "dpv.csv", cost=cost), backend="sim")
    assert run.metrics.step_time_median_ns == 26_000_000
    perfect = FixedCost.ms(F=1, B=2, overlap_ratio=0)
    assert analyze(back, perfect).makespan_ns == 22_000_000


def test_hand_made_group_two_ranks() -> None:
    # rank 0: 0F0 0F1 0B0 0B1 (stage 0); rank 1: 1F0 (1F1;1B0) 1B1; F=1, B=2 ms.
    # rank 1: F0 [1,2]; the group's inputs (0F1's output, 1F0) are in at 2: by default it lasts F + B, [2,5]; B1 [5,7].
    s = Schedule.from_text("pair", [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1F1", "1B0", "1B1"]], 2, [0, 1])
    g = with_groups(s, [(s.ranks[1][1], s.ranks[1][2])])
    cost = FixedCost.ms(F=1, B=2)
    # rank 0: B0 waits for the group's end, [5,7], B1 [7,9]: as without the group
    assert analyze(g, cost, comm_model="free").makespan_ns == 9_000_000
    assert analyze(s, cost, comm_model="free").makespan_ns == 9_000_000  # F0 [1,2] F1 [2,3] B0 [3,5] B1 [5,7]; rank 0 B0 [5,7] B1 [7,9]
    # at overlap_ratio=0 the group lasts max(F, B): [2,4]; rank 1 B1 [4,6]; rank 0 B0 [4,6], B1 [6,8]
    assert analyze(g, FixedCost.ms(F=1, B=2, overlap_ratio=0), comm_model="free").makespan_ns == 8_000_000


def test_malformed_groups_are_refused() -> None:
    s = Schedule.from_text("pair", [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1F1", "1B0", "1B1"]], 2, [0, 1])
    r1 = s.ranks[1]
    t = Schedule.from_text("dep", [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0", "1F1", "1B1"]], 2, [0, 1])
    with pytest.raises(ScheduleError, match="1B0 needs 1F0, so they cannot run at the same time"):
        build_plan(with_groups(t, [(t.ranks[1][0], t.ranks[1][1])]))
    with pytest.raises(ScheduleError, match="one after the other"):
        build_plan(with_groups(s, [(r1[0], r1[2])]))
    with pytest.raises(ScheduleError, match="different ranks"):
        build_plan(with_groups(s, [(s.ranks[0][0], r1[0])]))


def test_busy_union() -> None:
    assert busy_union([0, 0, 0, 1], [0, 5, 6, 0], [10, 8, 12, 3], 2) == [12, 3]


def test_decomposition_and_critical_path_count_an_overlapped_pair_once() -> None:
    # A fresh user's find: DualPipeV p=4, m=8, F=1, B=2 ms, pairs of max(F, B), read "step 44.000 ms = ideal 48.000
    # + ... + schedule bubble -4.000 ms" and "critical path 44.000 ms (48.000 ms of it running)": the pairs counted twice.
    from harness.analysis.critical_path import critical_path

    r = run_case(PipelineCase("DualPipeV", stages=4, microbatches=8, cost=FixedCost.ms(F=1, B=2, overlap_ratio=0)), backend="sim")
    d = r.decomposition
    step = r.metrics.step_time_median_ns
    assert step == 44_000_000
    # work per rank = busy time (the pairs once): rank 3 does 16 (F + B) = 48 ms of jobs, 7 min(F, B) less overlapped
    assert d.work_ns == list(r.metrics.steps[0].busy_ns)
    assert d.work_ns[3] == 48_000_000 - 7_000_000
    assert d.ideal_ns <= step and d.schedule_ns >= 0
    assert d.ideal_ns + d.imbalance_ns + d.recompute_ns + d.comm_ns + d.schedule_ns == step
    busiest = max(range(4), key=lambda q: r.metrics.steps[0].busy_ns[q])
    assert d.busiest_rank == busiest
    cp = critical_path(r.records, r.plan)
    assert cp.length_ns == step
    assert cp.busy_ns <= cp.length_ns and cp.busy_ns + sum(cp.gaps_ns) == cp.length_ns


def test_a_group_must_pair_one_forward_with_one_backward() -> None:
    # A fresh user's find: (0F1;0F2) ran two forwards concurrently, (0F1;0B0;0F2) made a third stream.
    for cell in ("(0F1;0F2)OVERLAP_F_B", "(0F1;0B0;0F2)OVERLAP_F_B"):
        row = "0F0," + cell + ",0B1,0B2\n" if "0B0" in cell else "0F0," + cell + ",0B0,0B1,0B2\n"
        with pytest.raises(ScheduleError, match=re.escape(f"overlapped group {cell} must pair one forward with one backward "
                                                          "(F with B, I or W), as PyTorch's OVERLAP_F_B does")):
            build_plan(loads_csv(row, "bad.csv"))
