"""Which send/receive placement is faster, and why, under each communication model (issue 26 item 10).

PyTorch's runtime (``torch/distributed/pipelining/schedules.py``, ``_PipelineScheduleRuntime``) posts a
receive (``irecv`` through ``batch_isend_irecv``) where the lowered list has its ``RECV_*`` action and
waits for it inside the consuming compute action. ``_prepare_schedule_with_comms`` lowers with
``_add_send_recv`` (the ``eager`` placement: a receive is posted as soon as its send is placed) and, only
with ``defer_pp_recv=True``, moves it to just before its consumer with ``_defer_recv_ops`` (``deferred``).
All point-to-point operations between two ranks run in issue order on that pair's one NCCL stream.

So under ``stream`` (a FIFO comm stream per pair of ranks) a receive posted just before its consumer
(``just-in-time``) queues behind the sends to the same peer listed before it, which wait for their own
producers; posted eagerly, it is ahead of them and its transfer overlaps the receiver's compute. The
expected direction is eager <= deferred <= just-in-time, with eager equal to the ``edge`` model (the
transfer a pure delay) where no two transfers of a pair contend. Under ``blocking`` (a transfer on both
ranks' compute streams, a send meeting its receive: Megatron-LM's p2p without overlap) the other way:
a receive posted early holds its rank's compute until its send comes, so eager is the slowest placement
that runs there. Under ``edge`` and ``free`` there are no send/receive jobs, so the placement changes
nothing.
"""

from __future__ import annotations

import pytest

from harness.case import PipelineCase
from harness.model.cost import FixedCost
from harness.runner import run_case

COST = FixedCost.ms(F=1, B=2, p2p_latency_ns=300_000)  # 300 µs a transfer
PLACEMENTS = ("just-in-time", "eager", "deferred")


def _run(comm_model: str, placement: str, schedule: str = "Interleaved1F1B", v: int = 2):
    case = PipelineCase(schedule, stages=4, microbatches=8, chunks=v, cost=COST, comm_model=comm_model, comm_placement=placement)
    return run_case(case, "sim", range(0, 1))


def test_interleaved_1f1b_step_per_placement_and_model() -> None:
    # The case: p=4, v=2, m=8, F=1 ms, B=2 ms, 300 µs transfers. Exact sim figures (ms).
    step = {(cm, pl): _run(cm, pl).metrics.step_time_median_ns / 1e6 for cm in ("stream", "edge", "free") for pl in PLACEMENTS}
    assert step[("stream", "eager")] == pytest.approx(61.2)
    assert step[("stream", "deferred")] == pytest.approx(70.2)
    assert step[("stream", "just-in-time")] == pytest.approx(70.2)
    for pl in PLACEMENTS:  # no send/receive jobs: the placement is moot
        assert step[("edge", pl)] == pytest.approx(61.2)
        assert step[("free", pl)] == pytest.approx(57.0)  # 48 ms = v m (F + B), times 1 + (p-1)/(v m) (arXiv:2104.04473 §2.2.2)
    assert step[("stream", "eager")] == step[("edge", "eager")]  # eager hides every transfer as well as a pure delay does


def _start(result, stream: str, label: str) -> float:
    return next(j.start_ns for j in result.records.jobs if j.stream == stream and f"{j.stage}{j.kind}{j.microbatch}" == label) / 1e6


def test_a_just_in_time_receive_waits_behind_a_send_to_the_same_peer() -> None:
    # Why just-in-time is slower: rank 0 sends micro-batch 5 of stage 0 at 11.2 ms. Posted just before 1F5, rank 1's
    # receive comes after its SEND_B of 5B0 on the rank1<->0 stream, and that send waits for 5B0 (done at 16.7 ms):
    # the receive runs 17.0-17.3 ms. Posted eagerly it runs with its send, at 11.2 ms, and 1F5 does not wait for it.
    jit, eager = _run("stream", "just-in-time"), _run("stream", "eager")
    assert _start(jit, "rank0/comm↔1", "0SEND_F5") == _start(eager, "rank0/comm↔1", "0SEND_F5") == pytest.approx(11.2)
    assert _start(jit, "rank1/comm↔0", "5SEND_B0") == pytest.approx(16.7)
    assert _start(jit, "rank1/comm↔0", "1RECV_F5") == pytest.approx(17.0)
    assert _start(eager, "rank1/comm↔0", "1RECV_F5") == pytest.approx(11.2)


@pytest.mark.parametrize(("schedule", "v"), [("1F1B", 1), ("ZB-H1", 1), ("ZB-V", 2), ("InterleavedZeroBubble", 2), ("DualPipeV", 2)])
def test_the_direction_holds_across_schedules(schedule: str, v: int) -> None:
    stream = {pl: _run("stream", pl, schedule, v).metrics.step_time_median_ns for pl in PLACEMENTS}
    edge = _run("edge", "eager", schedule, v).metrics.step_time_median_ns
    assert edge <= stream["eager"] <= stream["deferred"] <= stream["just-in-time"]
    assert stream["eager"] < stream["just-in-time"]


def test_under_blocking_an_early_receive_holds_the_compute_stream() -> None:
    # The head-of-line wait one might expect of eager receives is real where a transfer blocks compute.
    step = {pl: _run("blocking", pl).metrics.step_time_median_ns / 1e6 for pl in ("timed", "eager", "mindformers")}
    assert step == pytest.approx({"timed": 78.3, "eager": 115.0, "mindformers": 77.1})
    for schedule, v in (("1F1B", 1), ("ZB-H1", 1), ("ZB-V", 2)):
        timed = _run("blocking", "timed", schedule, v).metrics.step_time_median_ns
        eager = _run("blocking", "eager", schedule, v).metrics.step_time_median_ns
        assert eager > timed, schedule
