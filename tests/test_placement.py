"""Send/receive placement (harness.schedule.placement) against PyTorch's own expected lowerings.

Inputs and expected outputs are those of PyTorch's ``test/distributed/pipelining/test_schedule.py``:
``TestScheduleLowering.test_send_recv`` (``simple_2_rank_2_stage``, ``v_2_rank_4_stage``) and
``test_defer_recv_ops`` (``simple_2_rank_2_stage_no_overlap``, ``v_2_rank_4_stage_no_overlap``,
``simple_2_rank_2_stage_iw_split``, ``v_2_rank_4_stage_overlap_f_b``), and the golden files
``test/distributed/pipelining/artifacts/zb1p_2rank_2stagep_compute.csv`` ->
``zb1p_2rank_2stagep_comms.csv`` (copied under tests/data/pytorch/). PyTorch's action ``B`` is
FULL_BACKWARD; these passes only move text, so the inputs are taken as written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.case import PipelineCase
from harness.errors import ConfigError
from harness.model.cost import FixedCost
from harness.runner import run_case
from harness.schedule.groups import with_groups
from harness.schedule.model import Job, Schedule, parse_job
from harness.schedule.notation import dumps_csv, load_csv
from harness.schedule.passes import merge_backward
from harness.schedule.placement import add_send_recv, check_placement, defer_recv_ops

DATA = Path(__file__).parent / "data" / "pytorch"


def schedule(rows: list[list[str]], stage_to_rank: list[int], m: int = 2) -> Schedule:
    """Rows of PyTorch action texts ("   " idle, "(a;b)OVERLAP_F_B" an overlapped pair) as a schedule."""
    ranks: list[list[Job | None]] = []
    groups = []
    for row in rows:
        jobs: list[Job | None] = []
        for cell in row:
            cell = cell.strip()
            if not cell:
                jobs.append(None)
            elif cell.endswith("OVERLAP_F_B"):
                group = tuple(parse_job(t) for t in cell[1 : -len(")OVERLAP_F_B")].split(";"))
                jobs.extend(group)
                groups.append(group)
            else:
                jobs.append(parse_job(cell))
        ranks.append(jobs)
    s = Schedule("pytorch-test", m, tuple(stage_to_rank), tuple(tuple(r) for r in ranks), {})
    return with_groups(s, groups) if groups else s


def rows_of(s: Schedule) -> list[list[str]]:
    return [line.split(",") for line in dumps_csv(s).strip("\n").split("\n")]


SIMPLE = [["0F0", "0F1", "   ", "0B0", "   ", "0B1"], ["   ", "1F0", "1B0", "1F1", "1B1", "   "]]
V = [
    ["0F0", "0F1", "   ", "3F0", "3B0", "3F1", "3B1", "0B0", "3W0", "0B1", "3W1", "0W0", "0W1"],
    ["   ", "1F0", "2F0", "1F1", "2F1", "2B0", "1B0", "2B1", "1B1", "2W0", "2W1", "1W0", "1W1"],
]
V_RANK0 = ["0F0", "0SEND_F0", "0F1", "0SEND_F1", "3RECV_F0", "3F0", "3B0", "3SEND_B0", "3RECV_F1", "3F1", "3B1", "3SEND_B1",
           "0RECV_B0", "0B0", "3W0", "0RECV_B1", "0B1", "3W1", "0W0", "0W1"]
SIMPLE_RANK0 = ["0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0", "0RECV_B1", "0B1"]

# test_send_recv: the expected lowering of _add_send_recv (eager).
SEND_RECV = [
    ("simple_2_rank_2_stage", SIMPLE, [0, 1], [
        SIMPLE_RANK0,
        ["1RECV_F0", "1RECV_F1", "1F0", "1B0", "1SEND_B0", "1F1", "1B1", "1SEND_B1"],
    ]),
    ("v_2_rank_4_stage", V, [0, 1, 1, 0], [
        V_RANK0,
        ["1RECV_F0", "1RECV_F1", "1F0", "2F0", "2SEND_F0", "1F1", "2RECV_B0", "2F1", "2SEND_F1", "2B0", "2RECV_B1", "1B0",
         "1SEND_B0", "2B1", "1B1", "1SEND_B1", "2W0", "2W1", "1W0", "1W1"],
    ]),
]

# test_defer_recv_ops: input (an eager lowering) -> expected.
DEFER = [
    ("simple_2_rank_2_stage_no_overlap", [0, 1], [
        SIMPLE_RANK0,
        ["1RECV_F0", "1RECV_F1", "1F0", "1B0", "1SEND_B0", "1F1", "1B1", "1SEND_B1"],
    ], [
        SIMPLE_RANK0,
        ["1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1", "1F1", "1B1", "1SEND_B1"],
    ]),
    ("v_2_rank_4_stage_no_overlap", [0, 1, 1, 0], [
        V_RANK0,
        ["1RECV_F0", "1RECV_F1", "1F0", "2F0", "2SEND_F0", "1F1", "2RECV_B0", "2F1", "2SEND_F1", "2B0", "2RECV_B1", "1B0",
         "1SEND_B0", "2B1", "1B1", "1SEND_B1", "2W0", "2W1", "1W0", "1W1"],
    ], [
        V_RANK0,
        ["1RECV_F0", "1F0", "2F0", "2SEND_F0", "1RECV_F1", "1F1", "2F1", "2SEND_F1", "2RECV_B0", "2B0", "1B0", "1SEND_B0",
         "2RECV_B1", "2B1", "1B1", "1SEND_B1", "2W0", "2W1", "1W0", "1W1"],
    ]),
    ("simple_2_rank_2_stage_iw_split", [0, 1], [
        ["0RECV_B0", "0F0", "0SEND_F0", "0F1", "0SEND_F1", "0I0", "0W0", "0RECV_B1", "0I1", "0W1"],
        ["1RECV_F0", "1RECV_F1", "1F0", "1I0", "1SEND_B0", "1W0", "1F1", "1I1", "1SEND_B1", "1W1"],
    ], [
        ["0F0", "0RECV_B0", "0SEND_F0", "0F1", "0SEND_F1", "0I0", "0W0", "0RECV_B1", "0I1", "0W1"],
        ["1RECV_F0", "1F0", "1I0", "1SEND_B0", "1W0", "1RECV_F1", "1F1", "1I1", "1SEND_B1", "1W1"],
    ]),
    ("v_2_rank_4_stage_overlap_f_b", [0, 1, 1, 0], [
        V_RANK0,
        ["1RECV_F0", "1RECV_F1", "2RECV_B0", "1F0", "2F0", "2SEND_F0", "(1F1;2B0)OVERLAP_F_B", "2W0", "1B0", "1SEND_B0", "1W0"],
    ], [
        V_RANK0,
        ["1RECV_F0", "1F0", "2F0", "2SEND_F0", "1RECV_F1", "2RECV_B0", "(1F1;2B0)OVERLAP_F_B", "2W0", "1B0", "1SEND_B0", "1W0"],
    ]),
]


@pytest.mark.parametrize(("name", "compute", "placement", "expected"), [(n, c, p, e) for n, c, p, e in SEND_RECV], ids=[x[0] for x in SEND_RECV])
def test_eager_is_pytorchs_add_send_recv(name: str, compute: list[list[str]], placement: list[int], expected: list[list[str]]) -> None:
    assert rows_of(add_send_recv(schedule(compute, placement), "eager")) == expected


@pytest.mark.parametrize(("name", "placement", "given", "expected"), DEFER, ids=[x[0] for x in DEFER])
def test_defer_recv_ops_is_pytorchs(name: str, placement: list[int], given: list[list[str]], expected: list[list[str]]) -> None:
    assert rows_of(defer_recv_ops(schedule(given, placement))) == expected


def test_deferred_is_eager_then_defer_on_the_send_recv_inputs() -> None:
    # _add_send_recv then _defer_recv_ops: the test_defer_recv_ops inputs are test_send_recv's outputs.
    for (_, compute, placement, _), (_, _, _, expected) in zip(SEND_RECV, DEFER[:2]):
        assert rows_of(add_send_recv(schedule(compute, placement), "deferred")) == expected


def test_just_in_time_differs_on_rank_1_as_the_issue_says() -> None:
    # issue 11: ours begins 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1, PyTorch's (eager) 1RECV_F0 1RECV_F1 1F0 1B0 1SEND_B0.
    jit = rows_of(add_send_recv(schedule(SIMPLE, [0, 1]), "just-in-time"))
    assert [c for c in jit[1] if c][:5] == ["1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1"]  # (it keeps idle slots)
    assert rows_of(add_send_recv(schedule(SIMPLE, [0, 1]), "eager"))[1][:5] == ["1RECV_F0", "1RECV_F1", "1F0", "1B0", "1SEND_B0"]


def test_golden_zb1p_csv_lowering() -> None:
    # PyTorch's CSV test: _merge_bw (which also drops idle slots) then _add_send_recv.
    compute = load_csv(DATA / "zb1p_2rank_2stagep_compute.csv")
    merged = merge_backward(compute)
    merged = Schedule(merged.name, merged.num_microbatches, merged.stage_to_rank,
                      tuple(tuple(j for j in row if j is not None) for row in merged.ranks), dict(merged.params))
    expected = [line.split(",") for line in (DATA / "zb1p_2rank_2stagep_comms.csv").read_text().strip().split("\n")]
    assert rows_of(add_send_recv(merged, "eager")) == expected


def test_a_file_keeps_its_placement_and_runs_on_sim() -> None:
    comms = load_csv(DATA / "zb1p_2rank_2stagep_comms.csv")
    cost = FixedCost(forward_ns=1000, backward_ns=2000, p2p_latency_ns=100)
    r = run_case(PipelineCase(DATA / "zb1p_2rank_2stagep_comms.csv", cost=cost), backend="sim")
    assert r.schedule.to_text() == comms.to_text()  # the file's own send/receive jobs, where it put them


@pytest.mark.parametrize("placement", ["just-in-time", "eager", "deferred"])
def test_case_placement_runs_on_sim(placement: str) -> None:
    # p=2 1F1B m=2, F=1, B=2, c=1 (ns): every placement runs; the compute jobs are the same.
    cost = FixedCost(forward_ns=1000, backward_ns=2000, p2p_latency_ns=100)
    r = run_case(PipelineCase("1F1B", stages=2, microbatches=2, cost=cost, comm_placement=placement), backend="sim")
    assert r.schedule.params["comm_placement"] == placement
    assert [[str(j) for j in row if j is not None and not j.kind.is_comm] for row in r.schedule.ranks] == [
        ["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0", "1F1", "1B1"]]


def test_placement_names() -> None:
    assert check_placement("JIT") == check_placement("just_in_time") == "just-in-time"
    with pytest.raises(ConfigError, match="comm_placement must be one of just-in-time"):
        check_placement("lazy")
    with pytest.raises(ConfigError, match="comm_placement must be one of"):
        PipelineCase("1F1B", stages=2, microbatches=2, comm_placement="lazy")
