"""Schedules and plans held as columns (numpy arrays) agree with their per-job views.

Builders with numpy fast paths and the comm pass hand out schedules whose rows
are made on first access; plans hold their jobs and graph as arrays and make
the tuples on first access. These tests pin the two representations to each
other and to the job-by-job reference paths.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from _sched_helpers import build_any

from harness.analysis.analytic import analyze
from harness.analysis.metrics import compute_metrics
from harness.errors import ConfigError, ScheduleError
from harness.plan import groups as overlap
from harness.plan.build import build_plan
from harness.plan.reference import _build_plan_checked
from harness.schedule import build_schedule, schedule_names
from harness.schedule.model import Job, JobKind, Schedule, loop_placement
from harness.schedule.notation import loads_csv
from harness.schedule.passes import _add_communication_loop, add_communication
from tests._sched_helpers import chunks_for, cost

KINDS = tuple(JobKind)


def _eager(s: Schedule) -> Schedule:
    """The same schedule built from its rows (no cached arrays)."""
    return Schedule(s.name, s.num_microbatches, s.stage_to_rank, s.ranks, dict(s.params))


def test_builder_rows_are_made_on_first_access() -> None:
    s = build_schedule("Interleaved1F1B", 4, 8, 2)
    assert "ranks" not in s.__dict__
    assert (s.num_ranks, s.num_jobs, s.has_comm, s.chunks_per_rank) == (4, 4 * 2 * 2 * 8, False, 2)
    assert "ranks" not in s.__dict__
    assert [str(j) for j in s.ranks[3][:6]] == ["3F0", "3F1", "3F2", "3F3", "7F0", "7B0"]
    assert s.ranks is s.ranks  # made once
    assert s == _eager(s)
    assert s.to_text() == _eager(s).to_text()


@pytest.mark.parametrize("make", [copy.copy, copy.deepcopy, lambda s: pickle.loads(pickle.dumps(s))])
def test_lazy_schedules_copy_and_pickle(make) -> None:  # type: ignore[no-untyped-def]
    s = add_communication(build_schedule("ZB-H1", 3, 5, optimizer=True))
    t = make(s)
    assert t == s
    assert t.ranks[2][-1] == Job(2, JobKind.OPT, None)


def test_missing_attributes_still_raise() -> None:
    s = build_schedule("Interleaved1F1B", 2, 4, 2)
    with pytest.raises(AttributeError, match="no attribute 'rows'"):
        s.rows  # type: ignore[attr-defined]  # noqa: B018


@pytest.mark.parametrize("name", sorted(schedule_names()))
@pytest.mark.parametrize("optimizer", [False, True])
def test_comm_pass_on_arrays_matches_job_by_job(name: str, optimizer: bool) -> None:
    p = 4 if name == "DualPipe" else 3  # (DualPipe needs an even p)
    s = build_any(name, p, 2 * p, chunks_for(name, 2), optimizer=optimizer)
    lowered = add_communication(s)
    assert lowered.ranks == _add_communication_loop(_eager(s))
    assert lowered.has_comm and lowered.num_jobs == sum(map(len, lowered.ranks))


@pytest.mark.parametrize("name", sorted(schedule_names()))
@pytest.mark.parametrize("comm", [False, True])
def test_plan_columns_match_job_views(name: str, comm: bool) -> None:
    s = build_any(name, 4, 8, chunks_for(name, 2), optimizer=True)
    if comm:
        s = add_communication(s)
    plan = build_plan(s)
    a = plan.arrays
    grid = list(s.jobs())
    assert [str(j) for j in plan.jobs] == [str(j) for _, _, j in grid]
    assert a.stage.tolist() == [j.stage for j in plan.jobs]
    assert [KINDS[k] for k in a.kind.tolist()] == [j.kind for j in plan.jobs]
    assert a.microbatch.tolist() == [-1 if j.microbatch is None else j.microbatch for j in plan.jobs]
    assert list(zip(a.rank.tolist(), a.step.tolist())) == [(r, step) for r, step, _ in grid]
    assert a.chunk.tolist() == [s.chunk_of(j.stage) for j in plan.jobs]
    for j in range(plan.num_jobs):
        assert plan.deps[j] == tuple(a.deps_idx[a.deps_ptr[j] : a.deps_ptr[j + 1]].tolist())
        assert plan.start_deps[j] == tuple(a.start_idx[a.start_ptr[j] : a.start_ptr[j + 1]].tolist())
    ref = overlap.apply(_build_plan_checked(s))  # DualPipeV's overlapped pairs, as build_plan applies them
    for field in ("stage", "kind", "microbatch", "rank", "step", "stream", "chunk", "deps_ptr", "deps_idx", "start_ptr", "start_idx"):
        assert np.array_equal(getattr(a, field), getattr(ref.arrays, field)), field
    assert plan.streams_used() == sorted(set(plan.stream))


def test_plan_steps_keep_idle_slots() -> None:
    F, B = JobKind.F, JobKind.B  # noqa: N806
    s = Schedule(
        "idle",
        2,
        loop_placement(2),
        (
            (Job(0, F, 0), Job(0, F, 1), None, None, Job(0, B, 0), Job(0, B, 1)),
            (None, Job(1, F, 0), Job(1, B, 0), Job(1, F, 1), Job(1, B, 1)),
        ),
    )
    plan = build_plan(s)
    assert plan.rank == (0, 0, 0, 0, 1, 1, 1, 1)
    assert plan.step == (0, 1, 4, 5, 1, 2, 3, 4)
    assert plan.arrays.step.tolist() == list(plan.step)


@pytest.mark.parametrize("name", sorted(schedule_names()))
@pytest.mark.parametrize("comm", [False, True])
def test_analyze_peaks_and_spans_match_measured_metrics(name: str, comm: bool) -> None:
    # analyze (numpy over columns) against harness.analysis.metrics over sim-device records
    # (job by job): per-stage peaks and span bubbles too, with unequal F/I/W.
    from harness.run.device.sim import SimDevice
    from harness.run.executor import execute

    c = cost(1500, 1000, 700, p2p_latency_ns=300, activation_bytes=1 << 20, p2p_gbytes_per_s=50)
    s = build_any(name, 4, 8, chunks_for(name, 2))
    if comm:
        s = add_communication(s)
    plan = build_plan(s)
    a = analyze(plan, c)
    mt = compute_metrics(execute(plan, SimDevice(), c, range(1, 2)))
    assert a.peak_inflight == mt.peak_inflight
    assert a.peak_inflight_per_stage == mt.peak_inflight_per_stage
    spans = [a.span_bubble_ns[r] for r in range(4)]
    busy = a.busy_ns
    assert sum(spans) / (sum(spans) + sum(busy)) == pytest.approx(mt.span_bubble_ratio)


def test_job_arrays_are_read_only() -> None:
    s = build_schedule("ZB-H1", 2, 2)
    plan = build_plan(s)
    for column in plan.arrays:
        with pytest.raises(ValueError, match="read-only"):
            column[0] = 1
    assert [str(j) for j in s.ranks[0][:2]] == ["0F0", "0F1"]
    checked = _build_plan_checked(s)
    with pytest.raises(ValueError, match="read-only"):
        checked.arrays.deps_idx[:1] = 0


def test_an_error_inside_a_property_is_not_masked() -> None:
    # A kind that is not a JobKind fails inside has_comm: that error shows, not "no attribute 'has_comm'".
    # (The constructor refuses such a job; the unchecked one builders use does not.)
    rows = ((Job(0, "F", 0), Job(0, "B", 0)),)  # type: ignore[arg-type]
    with pytest.raises(ScheduleError, match=r"^schedule 'x': rank 0, step 0: Job\(0, 'F', 0\) has kind 'F', not a JobKind"):
        Schedule("x", 1, (0,), rows)
    s = Schedule._of_checked_jobs("x", 1, (0,), rows, {})
    with pytest.raises(AttributeError, match="'str' object has no attribute 'is_comm'"):
        s.has_comm  # noqa: B018


def test_rows_are_made_once_when_threads_race() -> None:
    import threading

    s = add_communication(build_schedule("Interleaved1F1B", 8, 64, 2))
    seen: list[object] = []
    start = threading.Barrier(4)

    def read() -> None:
        start.wait()
        seen.append(s.ranks)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 4 and all(rows is seen[0] for rows in seen)
    assert s.num_jobs == sum(map(len, seen[0]))  # type: ignore[call-overload]


def test_many_ranks_few_jobs_use_sorted_stream_keys() -> None:
    # p = 1200, m = 1: the (p+1)^2 stream-key table would dwarf the ~7k jobs; both ways agree.
    s = add_communication(build_schedule("1F1B", 1200, 1))
    plan, ref = build_plan(s), _build_plan_checked(s)
    assert np.array_equal(plan.arrays.stream, ref.arrays.stream)
    assert plan.stream_names == ref.stream_names and len(plan.stream_names) == 1200 + 2 * 1199
    assert plan.stream_names[:3] == ("rank0/compute", "rank0/comm↔1", "rank1/compute")


@pytest.mark.parametrize("make", [copy.deepcopy, lambda x: pickle.loads(pickle.dumps(x))])
def test_copies_keep_the_arrays_read_only(make) -> None:  # type: ignore[no-untyped-def]
    s = add_communication(build_schedule("Interleaved1F1B", 2, 4, 2))
    plan = build_plan(s)
    for column in [*make(plan).arrays, *make(s)._arrays[:3]]:
        assert not column.flags.writeable


def test_a_huge_microbatch_id_is_reported_at_once() -> None:
    # 0F9000000 makes m = 9,000,001 (18 M jobs, under MAX_JOBS): the missing jobs are counted, not listed one by one.
    with pytest.raises(ScheduleError) as info:
        loads_csv("0F9000000,0B0\n", name="huge.csv")
    first = str(info.value).splitlines()[:2]
    assert first[0].startswith("schedule 'huge.csv' is invalid: 18000000 missing job(s)")
    assert first[1] == "missing jobs: 0F0, 0F1, 0B1, 0F2, 0B2, 0F3, 0B3, 0F4, 0B4, 0F5, 0B5, 0F6 (and 17999988 more)"
    # Past MAX_JOBS the id itself is named, with its cell.
    with pytest.raises(ScheduleError, match=r"^huge\.csv: row 1 \(rank 0\), step 0: 0F99999999999999999999 names micro-batch "
                                            r"99999999999999999999, so the file would need 100,000,000,000,000,000,000 micro-batches"):
        loads_csv("0F99999999999999999999,0B0\n", name="huge.csv")


def test_analyze_refuses_a_step_beyond_int64_ns() -> None:
    class Ages:  # a cost model in the wrong units: 2**61 ns per job
        def duration_ns(self, job: Job, num_stages: int) -> int:
            return 1 << 61

        def flops(self, job: Job, num_stages: int) -> float:
            return 0.0

        def nbytes(self, job: Job, num_stages: int) -> int:
            return 0

        def is_uniform(self, num_stages: int) -> bool:
            return True

        def describe(self) -> dict[str, object]:
            return {}

    with pytest.raises(ConfigError, match=r"durations must be below 2\*\*53 ns \(about 104 days\): a unit mistake\?"):
        analyze(build_schedule("1F1B", 2, 2), Ages())  # one job's answer, checked as a run checks it
    Ages.duration_ns = lambda self, job, num_stages: (1 << 53) - 1  # each allowed; 600 in a row pass 2**62 ns
    with pytest.raises(ConfigError, match=r"the simulated step lasts \d+ ns \(over 146 years\); check the cost model's units"):
        analyze(build_schedule("FThenB", 1, 300), Ages())


@pytest.mark.parametrize("make", [copy.deepcopy, lambda x: pickle.loads(pickle.dumps(x))])
def test_copies_carry_the_columns_not_the_views_made_from_them(make) -> None:  # type: ignore[no-untyped-def]
    s = add_communication(build_schedule("Interleaved1F1B", 4, 8, 2))
    plan = build_plan(s)
    size = len(pickle.dumps(plan))
    views = (plan.jobs, plan.rank, plan.step, plan.stream, plan.chunk, plan.deps, plan.start_deps, s.ranks)
    assert len(pickle.dumps(plan)) == size  # the views made above are not carried
    copied = make(plan)
    assert "jobs" not in copied.__dict__ and "ranks" not in copied.schedule.__dict__
    assert (copied.jobs, copied.rank, copied.step, copied.stream, copied.chunk, copied.deps, copied.start_deps,
            copied.schedule.ranks) == views  # made again, equal
    # A schedule built from rows keeps its rows: they are its data (idle slots included).
    rows = loads_csv("0F0,,0B0\n,1F0,1B0\n", name="idle.csv")
    assert make(rows).ranks == rows.ranks and make(rows).ranks[0][1] is None
