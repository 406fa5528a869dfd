"""How long an overlapped F&B group lasts: ``F + B`` by default (no overlap, as PyTorch's runtime
runs OVERLAP_F_B), or the cost model's ``overlap_ns`` / ``overlap_ratio`` (``overlap_ratio=0``:
``max(F, B)``, perfect overlap); every job of the group lasts the group's time, from when every
member's input is in (harness.plan.groups). Timelines by hand on sim."""

from __future__ import annotations

import pytest

from harness.analysis.analytic import analyze
from harness.errors import ConfigError
from harness.model.checked import CheckedCost
from harness.model.cost import FixedCost
from harness.model.overlap import group_ns
from harness.model.transformer import TransformerCost
from harness.plan.build import build_plan
from harness.run.executor import _works
from harness.schedule import build_schedule
from harness.schedule.model import Job, JobKind
from harness.schedule.notation import loads_csv

from conftest import run_sim, timeline

#: One stage, two micro-batches: 0F1 and 0B0 (independent) overlapped.
ONE_RANK = "0F0,(0F1;0B0)OVERLAP_F_B,0B1\n"


@pytest.mark.parametrize(("fields", "table"), [
    # F = 10, B = 20; the group starts at 10 (0B0's input, 0F0, ends there) and both jobs span it.
    # default: F + B = 30 (no overlap)
    ({}, {"0F0": (0, 10), "0F1": (10, 40), "0B0": (10, 40), "0B1": (40, 60)}),
    ({"overlap_ratio": 1.0}, {"0F0": (0, 10), "0F1": (10, 40), "0B0": (10, 40), "0B1": (40, 60)}),
    # r = 0: max(F, B) = 20, perfect overlap
    ({"overlap_ratio": 0.0}, {"0F0": (0, 10), "0F1": (10, 30), "0B0": (10, 30), "0B1": (30, 50)}),
    # r = 0.5: 20 + 0.5 * 10 = 25
    ({"overlap_ratio": 0.5}, {"0F0": (0, 10), "0F1": (10, 35), "0B0": (10, 35), "0B1": (35, 55)}),
    # explicit 26 ns
    ({"overlap_ns": 26}, {"0F0": (0, 10), "0F1": (10, 36), "0B0": (10, 36), "0B1": (36, 56)}),
])
def test_group_duration_on_sim_by_hand(fields: dict, table: dict) -> None:
    s = loads_csv(ONE_RANK, "one.csv")
    cost = FixedCost(forward_ns=10, backward_ns=20, **fields)
    assert timeline(run_sim(s, cost)) == table
    a = analyze(build_plan(s), cost)
    assert a.makespan_ns == table["0B1"][1]
    assert a.busy_ns == [a.makespan_ns] and a.idle_ns == [0]  # busy once while the group runs, never idle


def test_backends_get_the_group_durations() -> None:
    """cpu and cuda run the Work durations the executor makes: every job of a group lasts the group."""
    plan = build_plan(loads_csv(ONE_RANK, "one.csv"))
    works = _works(plan, FixedCost(forward_ns=2_000_000, backward_ns=4_000_000, overlap_ns=5_200_000))
    assert {w.label: w.duration_ns for w in works} == {"0F0": 2_000_000, "0F1": 5_200_000, "0B0": 5_200_000, "0B1": 4_000_000}


def test_dualpipev_p4_m8_ratio_one_is_the_default_and_zero_is_max() -> None:
    sched = build_schedule("DualPipeV", 4, 8)
    base = FixedCost(forward_ns=10, backward_ns=20)
    default = analyze(build_plan(sched), base).makespan_ns
    assert analyze(build_plan(sched), FixedCost(forward_ns=10, backward_ns=20, overlap_ratio=1.0)).makespan_ns == default
    grouped = {str(j) for g in sched.params["overlap"] for j in g}  # type: ignore[union-attr]
    for cost, g in ((base, 30), (FixedCost(forward_ns=10, backward_ns=20, overlap_ratio=0.0), 20)):
        works = _works(build_plan(sched), cost)
        assert {w.duration_ns for w in works if w.label in grouped} == {g}  # F + B = 30 by default, max(F, B) = 20 at r = 0
        assert {w.duration_ns for w in works if w.label not in grouped and "F" in w.label} == {10}


def test_the_ratio_sets_the_groups_length_and_the_step_falls_with_it() -> None:
    # overlap_ratio=1 (the default, F + B) is not overlap=False: the pair starts when both inputs are in and
    # hands both outputs on at its end (harness.plan.groups's doc). The figures the docs give, and a step
    # monotone in the ratio: 54, 51.5, 49, 46.5, 44 ms.
    sched = build_schedule("DualPipeV", 4, 8)
    ms = 1_000_000
    serial = analyze(build_plan(build_schedule("DualPipeV", 4, 8, overlap=False)), FixedCost(forward_ns=ms, backward_ns=2 * ms))
    steps = [analyze(build_plan(sched), FixedCost(forward_ns=ms, backward_ns=2 * ms, overlap_ratio=r)).makespan_ns
             for r in (1.0, 0.75, 0.5, 0.25, 0.0)]
    assert serial.makespan_ns == 51 * ms and steps[0] == 54 * ms and steps[-1] == 44 * ms
    assert steps == sorted(steps, reverse=True) and len(set(steps)) == len(steps)


def test_fixed_cost_ms_passes_the_new_fields_through() -> None:
    cost = FixedCost.ms(F=1, B=2, overlap_ratio=0.5, reduce_grad_ns=7)
    assert cost.overlapped_group_ns((Job(0, JobKind.F, 1), Job(0, JobKind.B, 0)), (1_000_000, 2_000_000), 1) == 2_500_000
    assert cost.duration_ns(Job(0, JobKind.REDUCE_GRAD, None), 1) == 7


def test_transformer_cost_takes_the_same_fields() -> None:
    t = TransformerCost(hidden_size=128, seq_len=64, micro_batch_size=1, num_layers=4, tflops=10, overlap_ratio=1.0)
    assert t.overlapped_group_ns((Job(0, JobKind.F, 1), Job(0, JobKind.B, 0)), (7, 11), 1) == 18
    assert "overlap_ratio" in t.describe() and "overlap_ns" not in t.describe()
    assert "overlap_ratio" not in FixedCost(forward_ns=1, backward_ns=2).describe()


@pytest.mark.parametrize(("fields", "message"), [
    ({"overlap_ns": 5, "overlap_ratio": 0.5}, "give overlap_ns or overlap_ratio, not both"),
    ({"overlap_ratio": 1.5}, "overlap_ratio must be a number in [0, 1]"),
    ({"overlap_ratio": True}, "overlap_ratio must be a number in [0, 1]"),
    ({"overlap_ns": -1}, "overlap_ns"),
])
def test_bad_fields_are_refused(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        FixedCost(forward_ns=10, backward_ns=20, **fields)


def test_a_group_shorter_than_its_longest_job_is_refused_with_the_group() -> None:
    s = loads_csv(ONE_RANK, "one.csv")
    with pytest.raises(ConfigError) as err:
        run_sim(s, FixedCost(forward_ns=10, backward_ns=20, overlap_ns=15))
    assert str(err.value) == (
        "cost model FixedCost: overlapped_group_ns((0F1;0B0)OVERLAP_F_B) gave 15 ns, but the group's jobs last 10, 20 ns: "
        "an overlapped group lasts at least its longest job")


def test_a_custom_model_answers_through_checked_cost() -> None:
    class Slow(FixedCost):
        def overlapped_group_ns(self, jobs: tuple[Job, ...], durations_ns: tuple[int, ...], num_stages: int) -> int:
            return sum(durations_ns) + 2

    cost = CheckedCost(Slow(forward_ns=10, backward_ns=20))
    assert group_ns(cost, (Job(0, JobKind.F, 1), Job(0, JobKind.B, 0)), (10, 20), 1) == 32
    assert timeline(run_sim(loads_csv(ONE_RANK, "one.csv"), cost))["0B0"] == (10, 42)  # type: ignore[arg-type]


def test_fields_the_schedule_does_not_use_get_a_note() -> None:
    from harness.case import PipelineCase
    from harness.runner import run_case

    r = run_case(PipelineCase("1F1B", stages=2, microbatches=4,
                              cost=FixedCost.ms(F=1, B=2, overlap_ns=5, reduce_grad_ns=7)), backend="sim")
    assert "overlap_ns is set, but 1F1B has no overlapped F&B groups (OVERLAP_F_B): it changes nothing" in r.warnings
    assert "reduce_grad_ns is set, but 1F1B has no REDUCE_GRAD job: it changes nothing" in r.warnings
    used = run_case(PipelineCase("DualPipeV", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2, overlap_ratio=0.5)),
                    backend="sim")
    assert not [w for w in used.warnings if "changes nothing" in w]


def test_a_group_time_that_differs_by_micro_batch_is_refused_naming_both_groups() -> None:
    # two groups of one shape (stage 0's F with its B) and equal member durations: asked for the first and the last
    two = "0F0,(0F1;0B0)OVERLAP_F_B,(0F2;0B1)OVERLAP_F_B,0B2\n"

    class ByMicroBatch(FixedCost):
        def overlapped_group_ns(self, jobs: tuple[Job, ...], durations_ns: tuple[int, ...], num_stages: int) -> int:
            return sum(durations_ns) + jobs[0].microbatch

    with pytest.raises(ConfigError) as err:
        analyze(build_plan(loads_csv(two, "two.csv")), ByMicroBatch(forward_ns=10, backward_ns=20))
    assert str(err.value) == (
        "cost model ByMicroBatch: group (0F2;0B1)OVERLAP_F_B lasts 32 ns but (0F1;0B0)OVERLAP_F_B lasts 31 ns; an overlapped "
        "group's time may differ by its jobs' stages, kinds and durations, not by micro-batch")
    # the same model without the micro-batch: both groups last F + B + 1, from one answer
    class Plain(FixedCost):
        def overlapped_group_ns(self, jobs: tuple[Job, ...], durations_ns: tuple[int, ...], num_stages: int) -> int:
            return sum(durations_ns) + 1

    assert timeline(run_sim(loads_csv(two, "two.csv"), Plain(forward_ns=10, backward_ns=20))) == {
        "0F0": (0, 10), "0F1": (10, 41), "0B0": (10, 41), "0F2": (41, 72), "0B1": (41, 72), "0B2": (72, 92)}
