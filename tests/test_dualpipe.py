"""Overlapped F&B groups start when every member's inputs are in and last F + B by default
(DualPipe's rule, PyTorch's OVERLAP_F_B duration); DualPipe in both directions; the DualPipe
README's figures. Against the transcription of deepseek-ai/DualPipe (tests/_reference_dualpipe.py).
Exact values on sim and the analytic timeline (ns)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from _reference_dualpipe import Compute, dualpipe_program, dualpipev_program, harness_groups, harness_jobs, simulate

from harness.analysis.analytic import analyze
from harness.analysis.critical_path import critical_path, waiting
from harness.case import PipelineCase
from harness.errors import ConfigError, ScheduleError
from harness.model.cost import FixedCost
from harness.plan.build import build_plan
from harness.plan.delays import edge_delays
from harness.plan.timeline import simulate as timeline_of
from harness.runner import run_case
from harness.schedule.groups import groups_of, with_groups
from harness.schedule.model import Job, JobKind, Schedule
from harness.schedule.notation import loads_csv
from harness.schedule.registry import build_schedule

JOBS = {"prefetch": False, "deferred_sends": False}
PROGRAMS = {"DualPipeV": dualpipev_program, "DualPipe": dualpipe_program}


def cost(f: int, i: int, w: int, g: int | None = None, c: int = 0, **kw: object) -> FixedCost:
    """F, I, W (B = I + W), an overlapped group of g ns (None: the default), transfers of c ns."""
    group = {} if g is None else {"overlap_ns": g}
    return FixedCost(forward_ns=f, backward_ns=i + w, backward_input_ns=i, backward_weight_ns=w, p2p_latency_ns=c,
                     **group, **kw)  # type: ignore[arg-type]


def harness_rows(name: str, p: int, m: int, f: int, i: int, w: int, g: int, c: int) -> tuple[int, list[int], list[int], list[list[int]]]:
    """Makespan, idle and busy per rank, and every job's start per rank (list order), on the analytic timeline."""
    plan = build_plan(build_schedule(name, p, m))
    cm = cost(f, i, w, g, c)
    a = analyze(plan, cm, comm_model="edge" if c else "free")
    tl = timeline_of(plan, cm, edge_delays(plan, cm) if c else None)
    starts: list[list[int]] = [[] for _ in range(p)]
    for j, r in enumerate(plan.rank):
        starts[r].append(tl.start[j])
    return a.makespan_ns, a.idle_ns, a.busy_ns, starts


def oracle_starts(program: list, res) -> list[list[int]]:
    """The transcription's starts per rank, a pair's start twice (its forward, then its backward)."""
    out = []
    for r, items in enumerate(program):
        row: list[int] = []
        for it, s in zip([it for it in items if isinstance(it, Compute)], res.starts[r]):
            row += [s, s] if it.kind == "FB" else [s]
        out.append(row)
    return out


# --- the builders are DeepSeek's order ---------------------------------------------------------
@pytest.mark.parametrize("name", ["DualPipeV", "DualPipe"])
def test_builders_list_dualpipes_order_and_pairs(name: str) -> None:
    for p in (2, 4, 6, 8):
        for m in range(2 * p, 4 * p + 1, 2 if name == "DualPipe" else 1):
            s = build_schedule(name, p, m)
            prog = PROGRAMS[name](p, m)
            assert [[str(j) for j in row if j is not None] for row in s.ranks] == harness_jobs(prog)
            assert [(str(a), str(b)) for a, b in groups_of(s)] == harness_groups(prog)


def test_dualpipe_runs_two_chains_on_the_v_placement() -> None:
    s = build_schedule("DualPipe", 4, 8)
    assert s.stage_to_rank == (0, 1, 2, 3, 3, 2, 1, 0)
    assert s.params["chains"] == ((0, 4, 0, 4), (4, 8, 4, 8))
    for bad in ((3, 6), (4, 7), (4, 6)):
        with pytest.raises(ConfigError, match="DualPipe needs an even p and an even m >= 2p"):
            build_schedule("DualPipe", *bad)
    # without its chains stage 4 would wait for stage 3 of micro-batches it never runs
    stripped = Schedule(s.name, s.num_microbatches, s.stage_to_rank, s.ranks, {})
    with pytest.raises(ScheduleError):
        build_plan(stripped)


def test_a_stage_running_the_other_directions_micro_batch_is_refused() -> None:
    s = build_schedule("DualPipe", 2, 4)
    rows = [list(r) for r in s.ranks]
    rows[0][0] = Job(0, JobKind.F, 2)  # micro-batch 2 runs stages 2..3 (the second copy)
    bad = Schedule(s.name, s.num_microbatches, s.stage_to_rank, tuple(map(tuple, rows)), dict(s.params))
    with pytest.raises(ScheduleError, match=r"0F2 names micro-batch 2, but stage 0's chain runs micro-batches 0\.\.1"):
        build_plan(bad)


def test_a_dualpipe_csv_reads_back_with_its_chains() -> None:
    from harness.schedule.notation import dumps_csv

    s = build_schedule("DualPipe", 4, 8)
    back = loads_csv(dumps_csv(s), "dualpipe.csv")
    assert back.params["chains"] == s.params["chains"] and groups_of(back) == groups_of(s)
    c = cost(100, 100, 100, 250)
    assert analyze(back, c).makespan_ns == analyze(s, c).makespan_ns == 2400
    assert "chains" not in loads_csv(dumps_csv(build_schedule("DualPipeV", 4, 8)), "v.csv").params


# --- the issue's figures ------------------------------------------------------------------------
def test_issue_p2_m4_idle_150_on_both_ranks() -> None:
    c = cost(100, 100, 100, 250)
    a = analyze(build_schedule("DualPipeV", 2, 4), c, comm_model="free")
    assert (a.makespan_ns, a.busy_ns, a.idle_ns) == (2400, [2250, 2250], [150, 150])
    r = run_case(PipelineCase("DualPipeV", stages=2, microbatches=4, cost=c, comm_model="free"), backend="sim")
    assert r.metrics.step_time_median_ns == 2400 and list(r.metrics.steps[0].idle_ns) == [150, 150]


def test_issue_p8_m24_c50_worst_rank_4840() -> None:
    a = analyze(build_schedule("DualPipeV", 8, 24), cost(100, 140, 60, 200, c=50), comm_model="edge")
    assert a.makespan_ns == 16140
    assert a.idle_ns == [4240, 4340, 4440, 4540, 4640, 4740, 4840, 4840]


# --- per rank, the transcription ---------------------------------------------------------------------
GRID_COSTS = [(100, 100, 100), (100, 150, 80), (200, 100, 50), (50, 120, 90), (100, 60, 60)]


@pytest.mark.parametrize("name", ["DualPipeV", "DualPipe"])
@pytest.mark.parametrize("p", [2, 4, 6, 8])
def test_every_job_starts_as_in_the_transcription(name: str, p: int) -> None:
    # the job model (each job waits for its own inputs, a pair for both, outputs at the producer's end)
    for m in range(2 * p, 3 * p + 1, 2 if name == "DualPipe" else 1):
        prog = PROGRAMS[name](p, m)
        for (f, i, w), c in itertools.product(GRID_COSTS, (0, 50, 130)):
            for g in sorted({max(f, i + w), f + i + w, (max(f, i + w) + f + i + w) // 2}):
                ref = simulate(prog, f, i, w, g, c, **JOBS)
                span, idle, busy, starts = harness_rows(name, p, m, f, i, w, g, c)
                assert (span, idle, busy) == (ref.makespan, ref.idle, ref.busy), (name, p, m, f, i, w, g, c)
                assert starts == oracle_starts(prog, ref)


@pytest.mark.parametrize("name", ["DualPipeV", "DualPipe"])
def test_idle_equals_the_codes_without_comm_when_f_at_most_i(name: str) -> None:
    # dualpipev.py's batched waits (prefetched receives, deferred sends) change nothing there
    for p in (2, 4, 6):
        for m in range(2 * p, 3 * p + 1, 2):
            prog = PROGRAMS[name](p, m)
            for f, i, w in itertools.product((50, 100), (100, 150), (50, 100)):
                for g in (max(f, i + w), f + i + w):
                    code = simulate(prog, f, i, w, g)
                    span, idle, _, _ = harness_rows(name, p, m, f, i, w, g, 0)
                    assert (span, idle) == (code.makespan, code.idle)


def test_where_the_code_differs_the_harness_is_the_job_model() -> None:
    # documented gap (see NOTES): the code's batched waits add 100 ns here; the harness does not model them
    assert harness_rows("DualPipeV", 2, 4, 200, 100, 50, 200, 0)[:2] == (2650, [300, 300])
    assert simulate(dualpipev_program(2, 4), 200, 100, 50, 200).idle == [400, 400]
    assert harness_rows("DualPipeV", 8, 24, 100, 100, 100, 250, 50)[0] == 17200
    assert simulate(dualpipev_program(8, 24), 100, 100, 100, 250, c=50).makespan == 17300


# --- how a group runs (its duration by hand: tests/test_overlap_duration.py) ---------------------
def _table(s: Schedule, c: FixedCost) -> dict[str, tuple[int, int]]:
    plan = build_plan(s)
    tl = timeline_of(plan, c)
    return {str(job): (tl.start[j], tl.end[j]) for j, job in enumerate(plan.jobs)}


def _pair_on_rank0() -> Schedule:
    # rank 0 (stage 0): 0F0 (0F1;0B0) 0B1; rank 1 (stage 1): 1F0 1B0 1F1 1B1
    s = Schedule.from_text("pair", [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0", "1F1", "1B1"]], 2, [0, 1])
    return with_groups(s, [(s.ranks[0][1], s.ranks[0][2])])


def test_a_group_waits_for_its_backwards_input_and_hands_both_outputs_on_at_its_end() -> None:
    s = _pair_on_rank0()
    # F = 1 ms, B = 2 ms: 0F0 [0,1]; 1F0 [1,2]; 1B0 [2,4]; the pair waits for 1B0 (0F1 could start at 1): [4,7];
    # 1F1 waits for the pair's end: [7,8]; 1B1 [8,10]; 0B1 [10,12]
    ms = 1_000_000
    t = _table(s, FixedCost.ms(F=1, B=2))
    assert t == {"0F0": (0, ms), "0F1": (4 * ms, 7 * ms), "0B0": (4 * ms, 7 * ms), "0B1": (10 * ms, 12 * ms),
                 "1F0": (ms, 2 * ms), "1B0": (2 * ms, 4 * ms), "1F1": (7 * ms, 8 * ms), "1B1": (8 * ms, 10 * ms)}
    assert analyze(s, FixedCost.ms(F=1, B=2, overlap_ratio=0.0), comm_model="free").makespan_ns == 11 * ms


def test_edge_delays_are_the_producers_so_a_group_waits_for_each_input_its_own_transfer() -> None:
    class TwoWay(FixedCost):
        def duration_ns(self, job: Job, num_stages: int) -> int:
            if job.kind is JobKind.SEND_B:
                return 50
            return super().duration_ns(job, num_stages)

    s = _pair_on_rank0()
    c = TwoWay(forward_ns=100, backward_ns=200, p2p_latency_ns=10)
    plan = build_plan(s)
    tl = timeline_of(plan, c, edge_delays(plan, c))
    got = {str(job): (tl.start[j], tl.end[j]) for j, job in enumerate(plan.jobs)}
    # 0F0 [0,100]; 1F0 at 100+10; 1B0 [210,410]; the pair at 410+50 (0B0's transfer, not 0F1's): [460,760];
    # 1F1 at 760+10; 1B1 [870,1070]; 0B1 at 1070+50
    assert got == {"0F0": (0, 100), "0F1": (460, 760), "0B0": (460, 760), "0B1": (1120, 1320),
                   "1F0": (110, 210), "1B0": (210, 410), "1F1": (770, 870), "1B1": (870, 1070)}


@pytest.mark.parametrize("name", ["DualPipeV", "DualPipe"])
def test_critical_path_waiting_and_decomposition_add_up(name: str) -> None:
    for fields in ({}, {"overlap_ratio": 0.0}, {"overlap_ns": 250_000}):
        c = FixedCost(forward_ns=100_000, backward_ns=200_000, backward_input_ns=100_000, backward_weight_ns=100_000, **fields)
        r = run_case(PipelineCase(name, stages=4, microbatches=8, cost=c), backend="sim")
        step = r.metrics.step_time_median_ns
        cp = critical_path(r.records, r.plan)
        assert cp.length_ns == step and cp.busy_ns + sum(cp.gaps_ns) == cp.length_ns
        assert [x.idle_ns for x in waiting(r.records, r.plan)] == list(r.metrics.steps[0].idle_ns)
        d = r.decomposition
        assert d.ideal_ns + d.imbalance_ns + d.recompute_ns + d.comm_ns + d.schedule_ns == step and d.schedule_ns >= 0


@pytest.mark.parametrize("name", ["DualPipeV", "DualPipe"])
@pytest.mark.parametrize("comm_model", ["free", "edge", "stream"])
def test_every_comm_model_runs_the_pairs(name: str, comm_model: str) -> None:
    c = cost(100, 100, 100, 250, c=50)
    a = analyze(build_schedule(name, 4, 8), c, comm_model=comm_model)
    r = run_case(PipelineCase(name, stages=4, microbatches=8, cost=c, comm_model=comm_model), backend="sim")
    assert r.metrics.step_time_median_ns == a.makespan_ns


# --- the DualPipe README's table (deepseek-ai/DualPipe README, "Pipeline Bubbles and Memory Usage") ----
# "Bubble" there is a time: here the worst rank's idle in the step, transfers free; B is the full backward.
@pytest.mark.parametrize(("p", "m"), [(4, 8), (8, 16)])
def test_readme_1f1b_and_zb1p(p: int, m: int) -> None:
    for f, i, w in [(100, 100, 100), (100, 100, 50), (300, 300, 200)]:
        a = analyze(build_schedule("1F1B", p, m), FixedCost(forward_ns=f, backward_ns=i + w), comm_model="free")
        assert a.idle_ns == [(p - 1) * (f + i + w)] * p  # (PP-1)(F+B)
        z = analyze(build_schedule("ZB-H1", p, m), cost(f, i, w), comm_model="free")
        assert z.idle_ns == [(p - 1) * (f + i + w - 2 * w)] * p  # (PP-1)(F+B-2W)


REGIME = [(f, f, w) for f in (50, 100) for w in (25, 50, 100) if w <= f]  # F = I, W <= F


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (4, 11), (8, 16)])
def test_readme_dualpipev_bubble_where_f_equals_i(p: int, m: int) -> None:
    for f, i, w in REGIME:
        for g in sorted({max(f, i + w), f + i + w}):
            a = analyze(build_schedule("DualPipeV", p, m), cost(f, i, w, g), comm_model="free")
            assert max(a.idle_ns) == (2 * p // 2 - 1) * (g + (i + w) - 3 * w)  # PP = 2p stages


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (4, 10), (8, 16)])
def test_readme_dualpipe_bubble_where_f_equals_i(p: int, m: int) -> None:
    for f, i, w in REGIME:
        for g in sorted({max(f, i + w), f + i + w}):
            a = analyze(build_schedule("DualPipe", p, m), cost(f, i, w, g), comm_model="free")
            assert max(a.idle_ns) == (p // 2 - 1) * (g + (i + w) - 3 * w)  # PP = p stages


@pytest.mark.parametrize(("name", "p", "m", "held"), [
    ("DualPipeV", 4, 8, 9), ("DualPipeV", 8, 16, 17),  # PP + 1 = 2p + 1 chunks of 1/(2p) of the model
    ("DualPipe", 4, 8, 5), ("DualPipe", 8, 16, 9),  # PP + 1 = p + 1 stages of 1/p of the model
])
def test_readme_activations_pp_plus_1_and_parameters_2x(name: str, p: int, m: int, held: int) -> None:
    c = cost(100, 100, 100, 250, mem_F=10, mem_I=0, mem_W=-10, mem_static=7)
    assert analyze(build_schedule(name, p, m), c).peak_inflight == [held] * p
    r = run_case(PipelineCase(name, stages=p, microbatches=m, cost=c), backend="sim")
    assert r.memory.peak_activation_bytes == [held * 10] * p
    assert r.memory.peak_bytes == [2 * 7 + held * 10] * p  # two stages' parameters per device: 2x 1F1B's one


def test_theory_gives_the_readme_bubble_only_in_its_regime() -> None:
    from harness.analysis import theory

    for name, p, m in [("DualPipeV", 4, 8), ("DualPipeV", 8, 16), ("DualPipe", 4, 8), ("DualPipe", 8, 16)]:
        for f, i, w in REGIME:
            g = f + i + w
            a = analyze(build_schedule(name, p, m), cost(f, i, w, g), comm_model="free")
            assert theory.dualpipe_bubble_time(name, p, m, f, i, w, g) == max(a.idle_ns)
    assert theory.dualpipe_bubble_time("DualPipeV", 4, 8, 100, 150, 100, 250) is None  # F != I
    assert theory.dualpipe_bubble_time("DualPipeV", 4, 8, 100, 100, 150, 350) is None  # W > F
    assert theory.dualpipe_bubble_time("1F1B", 4, 8, 100, 100, 100, 250) is None
    assert [theory.peak_inflight("DualPipe", 4, 8, r) for r in range(4)] == [5] * 4


# --- the two directions everywhere a neighbour is read ------------------------------------------
def test_overlap_false_lists_the_pairs_as_plain_jobs() -> None:
    # F = 1 ms, B = 2 ms: DualPipe p=4, m=8 takes 26 ms with its groups (F + B each), 25 ms as plain jobs,
    # 22 ms at overlap_ratio=0 (max(F, B)); DualPipeV 54, 51 and 44 ms (docs/schedules.md)
    plain = build_schedule("DualPipe", 4, 8, overlap=False)
    assert groups_of(plain) == () and plain.params["chains"] == ((0, 4, 0, 4), (4, 8, 4, 8))
    ms = 1_000_000
    assert [analyze(s, c).makespan_ns for s, c in ((build_schedule("DualPipe", 4, 8), FixedCost.ms(F=1, B=2)),
                                                    (plain, FixedCost.ms(F=1, B=2)),
                                                    (build_schedule("DualPipe", 4, 8), FixedCost.ms(F=1, B=2, overlap_ratio=0)))] \
        == [26 * ms, 25 * ms, 22 * ms]


@pytest.mark.parametrize("name", ["DualPipeV", "DualPipe"])
def test_a_groups_receives_are_posted_before_its_first_job(name: str) -> None:
    from harness.schedule.passes import add_communication

    s = add_communication(build_schedule(name, 4, 8))
    first = {g[0]: g for g in groups_of(s)}
    want_before = 0
    for row in s.ranks:
        jobs = [j for j in row if j is not None]
        for at, job in enumerate(jobs):
            if job not in first:
                continue
            f, b = first[job]
            between = jobs[at : jobs.index(b)]
            assert not any(j.kind in (JobKind.RECV_F, JobKind.RECV_B) for j in between)  # none between the members
            for member, recv in ((f, JobKind.RECV_F), (b, JobKind.RECV_B)):
                wanted = Job(member.stage, recv, member.microbatch)
                if wanted in jobs:  # the member's input comes from another rank: its receive is just before the group
                    assert jobs.index(wanted) < at and all(j.kind.is_comm for j in jobs[jobs.index(wanted) : at])
                    want_before += 1
    assert want_before > len(first)  # both members' receives were there to check, for most groups
    c = cost(100, 100, 100, 250, c=50)
    assert analyze(s, c, comm_model="stream").makespan_ns == run_case(
        PipelineCase(name, stages=4, microbatches=8, cost=c, comm_model="stream"), backend="sim").metrics.step_time_median_ns


@pytest.mark.parametrize("placement", ["just-in-time", "eager", "deferred"])
def test_every_comm_placement_places_dualpipe_as_two_pipelines(placement: str) -> None:
    from harness.schedule.placement import add_send_recv

    p, m = 4, 8
    s = add_send_recv(build_schedule("DualPipe", p, m), placement)
    sends = {(j.stage, j.kind, j.microbatch) for _, _, j in s.jobs() if j.kind in (JobKind.SEND_F, JobKind.SEND_B)}
    recvs = {(j.stage, j.kind, j.microbatch) for _, _, j in s.jobs() if j.kind in (JobKind.RECV_F, JobKind.RECV_B)}
    # a SEND_F of stage k meets the RECV_F of k+1, a SEND_B of k the RECV_B of k-1; each direction has p-1 links
    assert {(k + 1, JobKind.RECV_F, mb) if kind is JobKind.SEND_F else (k - 1, JobKind.RECV_B, mb) for k, kind, mb in sends} == recvs
    assert len(sends) == 2 * (p - 1) * 2 * (m // 2)
    assert not {k for k, kind, _ in sends if kind is JobKind.SEND_F} & {p - 1, 2 * p - 1}  # a chain's last stage sends no activation
    assert not {k for k, kind, _ in sends if kind is JobKind.SEND_B} & {0, p}  # nor its first a gradient
    c = cost(100, 100, 100, 250, c=50)
    r = run_case(PipelineCase("DualPipe", stages=p, microbatches=m, cost=c, comm_model="stream", comm_placement=placement), backend="sim")
    assert r.metrics.step_time_median_ns == analyze(build_plan(s), c, comm_model="stream").makespan_ns


def test_mpi_transfers_meet_their_peers_within_each_direction() -> None:
    from harness.distributed.mpi import transfers_of
    from harness.schedule.passes import add_communication

    plan = build_plan(add_communication(build_schedule("DualPipe", 4, 8)))
    t = transfers_of(plan, FixedCost(forward_ns=1, backward_ns=2, activation_bytes=64))
    rank = {str(j): r for j, r in zip(plan.jobs, plan.rank)}
    sends = {(rank[k], v.peer, v.tag) for k, v in t.items() if v.send}
    recvs = {(v.peer, rank[k], v.tag) for k, v in t.items() if not v.send}  # (sender, receiver, tag) as the sender sees it
    assert sends == recvs and len(sends) == len(t) // 2 == 48  # 2 directions x 3 links x (F, B) x 4 micro-batches
    assert all(abs(a - b) == 1 for a, b, _ in sends)  # neighbours only: nothing passes between the directions


def test_a_cost_model_of_one_chain_is_refused_with_the_reason() -> None:
    from harness.model.transformer import TransformerCost

    gpt = TransformerCost(hidden_size=256, seq_len=128, micro_batch_size=1, num_layers=8, tflops=10, vocab_size=1000)
    with pytest.raises(ConfigError, match=r"case 'DualPipe p=4 m=8.*TransformerCost cannot time schedule 'DualPipe': it runs several "
                                          r"chains \(stages 0\.\.3 and 4\.\.7, each a pipeline of its own micro-batches"):
        run_case(PipelineCase("DualPipe", stages=4, microbatches=8, cost=gpt), backend="sim")
    with pytest.raises(ConfigError, match="or DualPipeV \\(one chain on the same V placement\\) for a TransformerCost"):
        analyze(build_schedule("DualPipe", 4, 8), gpt)
    assert analyze(build_schedule("DualPipeV", 4, 8), gpt).makespan_ns > 0  # one chain: fine


def test_a_file_of_disjoint_micro_batch_ranges_that_form_no_chains_is_refused() -> None:
    # stage 0 runs micro-batches 2-3, stage 1 runs 0-1: disjoint ranges, but not in stage order
    with pytest.raises(ScheduleError, match=r"^swapped\.csv: the stages run disjoint micro-batch ranges \(stage 0: micro-batches 2\.\.3; "
                                            r"stage 1: micro-batches 0\.\.1\), which is neither one pipeline"):
        loads_csv("0F2,0F3,0B2,0B3\n1F0,1F1,1B0,1B1\n", "swapped.csv")
    # one range on stages 0 and 2, another on stage 1: not runs of consecutive stages
    with pytest.raises(ScheduleError, match=r"stage 0: micro-batches 0\.\.1; stage 1: micro-batches 2\.\.3; stage 2: micro-batches 0\.\.1"):
        loads_csv("0F0,0F1,0B0,0B1\n1F2,1F3,1B2,1B3\n2F0,2F1,2B0,2B1\n", "odd.csv")
    # a one-chain file with a forward missing is no chain file: the counts check names the job
    with pytest.raises(ScheduleError, match=r"missing jobs: 1F1"):
        loads_csv("0F0,0F1,0B0,0B1\n1F0,1B0,1B1\n", "short.csv")
    # two chains read from a hand-written file: stages 0-1 run micro-batches 0-1, stages 2-3 run 2-3
    two = loads_csv("0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n2F2,2F3,2B2,2B3\n3F2,3F3,3B2,3B3\n", "two.csv")
    assert two.params["chains"] == ((0, 2, 0, 2), (2, 4, 2, 4))
    assert analyze(two, FixedCost(forward_ns=10, backward_ns=20)).makespan_ns == 90  # each chain a 2-stage 1F1B of m=2: 3 x 30


def test_dualpipe_runs_on_the_cpu_backend_in_order() -> None:
    r = run_case(PipelineCase("DualPipe", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2)), backend="cpu", steps=range(1, 2))
    jobs = {(j.stage, j.kind, j.microbatch): j for j in r.records.jobs if j.step == 1}
    # 4 stages x 2 micro-batches (each stage its direction's): a forward and a backward (B, or I and W) each
    assert sorted((k, mb) for k, kind, mb in jobs if kind == "F") == [(k, mb) for k in range(4) for mb in ((0, 1) if k < 2 else (2, 3))]
    assert sorted((k, mb) for k, kind, mb in jobs if kind in ("B", "I")) == sorted((k, mb) for k, kind, mb in jobs if kind == "F")
    for f, b in groups_of(r.schedule):  # the backward starts with the forward (a start dependency) on the sibling stream
        jf, jb = jobs[(f.stage, "F", f.microbatch)], jobs[(b.stage, "B", b.microbatch)]
        assert jb.start_ns >= jf.start_ns and jb.stream.endswith("/overlap")

    def backward(k: int, mb: int) -> Any:
        return jobs.get((k, "B", mb)) or jobs[(k, "I", mb)]

    for (k, kind, mb), j in jobs.items():  # every input is in before its consumer starts (no transfer jobs: free)
        if kind == "F" and k not in (0, 2):  # stages 0 and 2 start their chains
            assert j.start_ns >= jobs[(k - 1, "F", mb)].end_ns
        if kind in ("B", "I") and k not in (1, 3):  # stages 1 and 3 end them
            assert j.start_ns >= backward(k + 1, mb).end_ns


# --- the docs say what the published formulas assume ----------------------------------------------------
def test_the_docs_state_the_readme_formulas_regime_and_the_codes_gaps() -> None:
    from pathlib import Path

    text = " ".join((Path(__file__).resolve().parent.parent / "docs" / "schedules.md").read_text(encoding="utf-8").split())
    assert "exactly when **T_F = T_I** and T_W ≤ T_F" in text
    # the example outside the regime the docs give: p = 4, m = 8, F = 100, I = 150, W = 50, F&B = 250 ns: 800 ns, not 900
    assert "(p = 4, m = 8, F = 100, I = 150, W = 50, F&B = 250 ns: worst rank 800 ns, the formula 900)" in text
    a = analyze(build_schedule("DualPipeV", 4, 8), cost(100, 150, 50, 250), comm_model="free")
    assert max(a.idle_ns) == 800 and (8 // 2 - 1) * (250 + 200 - 3 * 50) == 900
    # the gaps to DeepSeek's code, as the docs quote them
    assert "p = 2, m = 4, F = 200, I = 100, W = 50, F&B = 200 ns: 2,750 ns, 400 ns idle per rank, against the harness's 2,650 and 300" in text
    assert "p = 8, m = 24, F = I = W = 100, F&B = 250 ns, c = 50 ns: 17,300 ns against 17,200" in text
    assert harness_rows("DualPipeV", 2, 4, 200, 100, 50, 200, 0)[:2] == (2650, [300, 300])
    code = simulate(dualpipev_program(2, 4), 200, 100, 50, 200)
    assert (code.makespan, code.idle) == (2750, [400, 400])
    assert harness_rows("DualPipeV", 8, 24, 100, 100, 100, 250, 50)[0] == 17200
    assert simulate(dualpipev_program(8, 24), 100, 100, 100, 250, c=50).makespan == 17300
    # the issue's example, before and after
    assert "p = 2, m = 4, F = I = W = 100 ns, F&B = 250 ns: idle 150 and 150 ns (0 and 150 before," in text


def test_import_paddle_refuses_dualpipe_with_the_reason() -> None:
    from harness.imports.paddle import builtin_schedule_name

    with pytest.raises(ConfigError, match=r"^--schedule 'dualpipe': DualPipe runs two directions \(each stage half the micro-batches"):
        builtin_schedule_name("dualpipe")
    assert builtin_schedule_name("dualpipe-v") == "DualPipeV"


def test_a_group_whose_input_waits_for_the_group_itself_is_refused() -> None:
    # rank 0: 0F0 (0F1;0B0) 0B1; rank 1: 1F0 1F1 1B0 1B1. As plain jobs this runs; as a group, 0B0's input 1B0 comes
    # after 1F1 on rank 1, which needs 0F1, the group's own output: the group would wait for itself.
    s = Schedule.from_text("cycle", [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1F1", "1B0", "1B1"]], 2, [0, 1])
    assert analyze(s, FixedCost(forward_ns=10, backward_ns=20)).makespan_ns == 90
    g = with_groups(s, [(s.ranks[0][1], s.ranks[0][2])])
    with pytest.raises(ScheduleError, match=r"^schedule 'cycle': an overlapped group waits, through other jobs, for one of its own "
                                            r"members \(its inputs can never all be in before it starts"):
        build_plan(g)


def test_a_group_that_lists_its_weight_pass_first_gets_its_forwards_receive_before_it() -> None:
    # (1W0;1F1): a W may pair with an F (the check's own words); 1F1's input comes from rank 0, so its receive goes
    # before the group's first job, 1W0, which starts the group
    from harness.schedule.passes import add_communication

    s = loads_csv("0F0,0F1,0I0,0W0,0I1,0W1\n1F0,1I0,(1W0;1F1)OVERLAP_F_B,1I1,1W1\n", "wf.csv")
    assert [tuple(map(str, g)) for g in groups_of(s)] == [("1W0", "1F1")]
    lowered = add_communication(s)
    assert [str(j) for j in lowered.ranks[1]] == ["1RECV_F0", "1F0", "1I0", "1SEND_B0", "1RECV_F1", "1W0", "1F1", "1I1", "1SEND_B1", "1W1"]
    c = FixedCost(forward_ns=10, backward_ns=20, p2p_latency_ns=5)
    t = _table(lowered, c)
    # rank 0: 0F0 [0,10], 0F1 [10,20]; rank 1: 1RECV_F0 [10,15], 1F0 [15,25], 1I0 [25,35]; on rank 1's comm stream
    # (FIFO) 1SEND_B0 [35,40] comes before 1RECV_F1 [40,45]: the group starts at 45 and lasts W + F = 20: [45,65];
    # 1I1 [65,75], 1W1 [75,85]
    assert t["1RECV_F1"] == (40, 45) and t["1W0"] == t["1F1"] == (45, 65) and t["1I1"] == (65, 75) and t["1W1"] == (75, 85)
    assert analyze(lowered, c).makespan_ns == run_case(PipelineCase(lowered, cost=c), backend="sim").metrics.step_time_median_ns
