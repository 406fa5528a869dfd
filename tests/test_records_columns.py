"""Run records as numpy columns (harness/records.py, issue 13): the list and the columns hold the
same jobs, either is made from the other once, a changed list gives new columns, and the analysis
that reads columns (critical path, waiting, busy union) equals what it computed per job before."""

from __future__ import annotations

import pickle
import random
from dataclasses import replace

import pytest

import tests._reference_critical_path as reference
from harness.analysis import critical_path as cp
from harness.analysis.busy import busy_union
from harness.analysis.metrics import compute_metrics
from harness.analysis.theory import is_builtin_order
from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.records import KINDS, JobColumns, JobRecord, RunRecords
from harness.runner import run_case
from harness.schedule.model import Schedule
from harness.schedule.registry import build_schedule, built_as

STREAMS = ["rank0/compute", "rank1/compute", "rank0/comm↔1"]


def _jobs() -> list[JobRecord]:
    return [
        JobRecord(0, "rank0/compute", 0, "F", 0, 0, 1, 0, 10, 3),
        JobRecord(0, "rank0/comm↔1", 0, "SEND_F", 0, 0, 1, 10, 12),
        JobRecord(1, "rank1/compute", 1, "F", 0, 0, 1, 12, 22),
        JobRecord(1, "rank1/compute", 1, "B", 0, 0, 1, 22, 42),
        JobRecord(0, "rank0/compute", 0, "OPT", None, 0, 1, 60, 65),
        JobRecord(0, "rank0/other", 0, "lr", None, 0, 1, 65, 66),  # an import's kind, on a stream not listed
    ]


def test_columns_of_a_list_hold_every_field_with_codes_into_the_tables():
    rec = RunRecords("cpu", {}, 2, list(STREAMS), [1], [0], [66], _jobs(), [0])
    c = rec.columns
    assert len(c) == rec.num_jobs == 6
    assert c.rank.tolist() == [0, 0, 1, 1, 0, 0]
    assert [c.streams[i] for i in c.stream.tolist()] == [j.stream for j in _jobs()]
    assert c.streams == (*STREAMS, "rank0/other")  # the records' streams first, then the others in order
    assert c.kinds[: len(KINDS)] == KINDS and c.kinds[len(KINDS):] == ("lr",)
    assert c.kind_tokens().tolist() == ["F", "SEND_F", "F", "B", "OPT", "lr"]
    assert c.microbatch.tolist() == [0, 0, 0, 0, -1, -1] and c.microbatch_list() == [0, 0, 0, 0, None, None]
    assert (c.start_ns.tolist(), c.end_ns.tolist(), c.enqueue_ns.tolist()) == ([0, 10, 12, 22, 60, 65], [10, 12, 22, 42, 65, 66],
                                                                             [3, 0, 0, 0, 0, 0])
    assert c.kind_mask({"F", "lr"}).tolist() == [True, False, True, False, False, True]
    assert c.to_jobs() == _jobs()


def test_records_made_from_columns_make_the_list_once_on_first_read():
    cols = RunRecords("cpu", {}, 2, list(STREAMS), [1], [0], [66], _jobs(), [0]).columns
    rec = RunRecords("sim", {}, 2, list(STREAMS), [1], [0], [66], enqueue_ns=[0], columns=cols)
    assert rec.num_jobs == 6 and rec._jobs is None  # counted without making the list
    assert rec.jobs == _jobs()
    assert rec.jobs is rec.jobs
    assert rec.columns is cols  # reading the list does not remake the columns
    with pytest.raises(ValueError, match="read-only"):
        cols.start_ns[0] = 7  # the list made from them would no longer agree


def test_a_changed_list_gives_new_columns():
    rec = RunRecords("cpu", {}, 2, list(STREAMS), [1], [0], [66], _jobs()[:3], [0])
    first = rec.columns
    assert rec.columns is first
    rec.jobs.append(_jobs()[3])
    assert rec.columns.kind_tokens().tolist() == ["F", "SEND_F", "F", "B"]
    rec.jobs[0] = replace(rec.jobs[0], end_ns=9)  # as a faulty backend would
    assert rec.columns.end_ns.tolist()[0] == 9
    rec.jobs.sort(key=lambda j: -j.start_ns)
    assert rec.columns.start_ns.tolist() == [22, 12, 10, 0]
    del rec.jobs[0]
    assert len(rec.columns) == 3
    rec.jobs = [_jobs()[4]]
    assert rec.columns.kind_tokens().tolist() == ["OPT"]


def test_equality_pickle_and_replace():
    a = RunRecords("cpu", {"w": 1}, 2, list(STREAMS), [1], [0], [66], _jobs(), [0])
    b = RunRecords("cpu", {"w": 1}, 2, list(STREAMS), [1], [0], [66], enqueue_ns=[0], columns=a.columns)
    assert a == b
    assert a != a.replace(backend="sim")
    assert a.replace(backend="sim").jobs == a.jobs and a.replace(backend="sim").backend == "sim"
    by_columns = pickle.loads(pickle.dumps(b))  # never read as a list: pickled as columns
    assert by_columns._jobs is None and by_columns == a
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(ValueError, match="jobs or columns, not both"):
        RunRecords("cpu", {}, 2, [], jobs=[], columns=a.columns)


def test_replay_records_are_columns_until_a_list_is_asked_for():
    result = run_case(PipelineCase("1F1B", stages=4, microbatches=8, comm=True, cost=FixedCost.ms(F=1, B=2)), "sim", range(0, 2))
    rec = result.records
    assert rec._jobs is None  # the whole run and its analysis read columns
    assert isinstance(rec.columns, JobColumns) and rec.num_jobs == 2 * (4 * 8 * 2 + 3 * 8 * 4)
    assert compute_metrics(rec) == result.metrics
    labels = [j.label for j in rec.jobs if j.step == 1 and j.rank == 3 and j.stream.endswith("compute")]
    assert labels == ["3F0", "3B0", "3F1", "3B1", "3F2", "3B2", "3F3", "3B3", "3F4", "3B4", "3F5", "3B5", "3F6", "3B6", "3F7", "3B7"]


def _plain_busy_union(rank, start, end, p):
    out = [0] * p
    by_rank: dict[int, list[tuple[int, int]]] = {}
    for r, a, b in zip(rank, start, end):
        by_rank.setdefault(r, []).append((a, b))
    for r, spans in by_rank.items():
        total, reach = 0, None
        for a, b in sorted(spans):
            if reach is None or a >= reach:
                total, reach = total + b - a, b
            elif b > reach:
                total, reach = total + b - reach, b
        out[r] = total
    return out


def test_busy_union_equals_the_plain_sweep():
    rng = random.Random(3)
    for _ in range(500):
        n, p = rng.randint(0, 14), rng.randint(1, 4)
        rank = [rng.randrange(p) for _ in range(n)]
        start = [rng.randint(-50, 300) for _ in range(n)]
        end = [a + rng.randint(0, 80) for a in start]
        assert busy_union(rank, start, end, p) == _plain_busy_union(rank, start, end, p)


CASES = [("1F1B", 1), ("ZB-H1", 1), ("Interleaved1F1B", 2), ("ZB-V", 2), ("DualPipeV", 2), ("GPipe", 1)]


@pytest.mark.parametrize("comm", [False, True])
@pytest.mark.parametrize(("name", "v"), CASES)
def test_critical_path_and_waiting_equal_the_per_job_version_on_perturbed_records(name, v, comm):
    cost = FixedCost.ms(F=1, B=2, W=1, p2p_latency_ns=100_000) if comm else FixedCost.ms(F=1, B=2, W=1)
    result = run_case(PipelineCase(name, stages=4, microbatches=8, chunks=v, cost=cost, comm=comm), "sim", range(0, 3))
    rng = random.Random(f"{name}{comm}")
    for trial in range(4):
        # as a timed backend records them: every job late and long by its own amount; the last trial loses three jobs
        jobs = [replace(j, start_ns=j.start_ns + rng.randint(0, 300_000), end_ns=j.end_ns + rng.randint(300_000, 900_000))
                for j in result.records.jobs]
        if trial == 3:
            jobs = jobs[: len(jobs) // 2] + jobs[len(jobs) // 2 + 3:]
        r = result.records
        rec = RunRecords("cpu", {}, r.num_ranks, r.streams, r.steps, r.step_start_ns, [e + 2_000_000 for e in r.step_end_ns], jobs,
                         r.enqueue_ns)
        for step in rec.steps:
            reference._LAST_VIEW.clear()
            assert cp.critical_path(rec, result.plan, step).to_dict() == reference.critical_path(rec, result.plan, step).to_dict()
            reference._LAST_VIEW.clear()
            assert [w.to_dict() for w in cp.waiting(rec, result.plan, step)] == [
                w.to_dict() for w in reference.waiting(rec, result.plan, step)]


def test_is_builtin_order_knows_the_builders_own_schedules_and_compares_the_others():
    built = build_schedule("1F1B", 4, 8)
    assert built_as(built) == ("1F1B", 4, 8, 1, False)
    assert is_builtin_order(built)
    copy = Schedule(built.name, built.num_microbatches, built.stage_to_rank, built.ranks)  # equal, not the builder's object
    assert built_as(copy) is None and is_builtin_order(copy)
    swapped = [list(row) for row in built.ranks]
    swapped[3][0], swapped[3][1] = swapped[3][1], swapped[3][0]  # 3B0 before 3F0 on the last rank
    assert not is_builtin_order(Schedule("1F1B", 8, built.stage_to_rank, swapped))
    assert built_as(build_schedule("1F1B", 4, 8, optimizer=True))[4] is True  # with options: compared, not trusted


def test_run_case_names_a_backend_that_is_not_a_name():
    from harness.errors import ConfigError

    with pytest.raises(ConfigError, match=r"backend must be a name such as 'sim', got None; valid backends: auto, sim, cpu"):
        run_case(PipelineCase("1F1B", stages=2, microbatches=2), None)  # type: ignore[arg-type]


def test_times_past_64_bits_are_refused_naming_the_job_or_the_step():
    from harness.errors import ConfigError, InputFormatError

    rec = RunRecords("cpu", {}, 2, list(STREAMS), [1], [0], [66], [*_jobs()[:2], replace(_jobs()[2], end_ns=10**20)], [0])
    with pytest.raises(InputFormatError, match=r"job 2 \(1F0 on rank1/compute, step 1\): end_ns is 100000000000000000000, not a whole"):
        _ = rec.columns
    with pytest.raises(ConfigError, match=r"the step lasts 10,818,000,000,000,000,000 ns: 1 recorded step\(s\) would pass 2\*\*63 ns"):
        run_case(PipelineCase("1F1B", stages=2, microbatches=600, cost=FixedCost.ms(F=9e9, B=9e9)), "sim")


def test_run_case_names_arguments_of_the_wrong_type():
    from harness.errors import ConfigError

    case = PipelineCase("1F1B", stages=2, microbatches=2)
    with pytest.raises(ConfigError, match=r"run_case takes a PipelineCase, got '1F1B' \(str\)"):
        run_case("1F1B", "sim")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"case '1F1B p=2 m=2': case_id must be text, got 5 \(int\)"):
        run_case(case, "sim", case_id=5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"case '1F1B p=2 m=2': device_options must be a dict of keyword arguments, got 'x'"):
        run_case(case, "sim", device_options="x")  # type: ignore[arg-type]
