"""Our builders against PyTorch's own ``pipeline_order``, stored once in
``tests/data/pytorch/orders.json`` by ``tests/data/pytorch/generate_orders.py``
(torch 2.13.0; this test does not import torch).

Every entry is compared job for job, rank by rank, after dropping what our builders
do not emit: PyTorch's idle slots (``None``: slots take no time here) and the
``REDUCE_GRAD`` that ``_add_reduce_grad`` appends to the single-stage orders. An
``OVERLAP_F_B`` cell is compared as its sub-actions, in order, and as an overlapped
group. Where PyTorch refuses a construction, our builder must refuse it too, except
``Schedule1F1B`` with ``m < p`` (documented in docs/schedules.md: we follow Megatron-LM,
which caps the warm-up at ``m``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.schedule.groups import groups_of
from harness.schedule.notation import loads_csv
from harness.schedule.registry import build_schedule

DATA = Path(__file__).parent / "data" / "pytorch" / "orders.json"
ENTRIES = json.loads(DATA.read_text(encoding="utf-8"))["entries"]

#: PyTorch class -> (our schedule, whether it takes ``chunks``).
OURS = {
    "ScheduleGPipe": ("FThenB", False),
    "Schedule1F1B": ("1F1B", False),
    "ScheduleInterleaved1F1B": ("Interleaved1F1B", True),
    "ScheduleLoopedBFS": ("LoopedBFS", True),
    "ScheduleInterleavedZeroBubble": ("InterleavedZeroBubble", True),
    "ScheduleZBVZeroBubble": ("ZB-V", False),
    "ScheduleDualPipeV": ("DualPipeV", False),
}
_OVERLAP = re.compile(r"^\((.*)\)OVERLAP_F_B$")


def _theirs(entry: dict) -> tuple[list[list[str]], list[tuple[str, ...]]]:
    """PyTorch's rows without idle slots and REDUCE_GRAD, overlapped cells expanded; and its groups."""
    rows, groups = [], []
    for text in entry["order"]:
        row: list[str] = []
        for cell in text.split(","):
            if not cell or cell.endswith("REDUCE_GRAD"):
                continue
            match = _OVERLAP.match(cell)
            if match:
                subs = tuple(match.group(1).split(";"))
                row.extend(subs)
                groups.append(subs)
            else:
                row.append(cell)
        rows.append(row)
    return rows, groups


def _build(entry: dict):
    name, chunked = OURS[entry["class"]]
    options = {"chunks": entry["v"]} if chunked else {}
    return build_schedule(name, entry["p"], entry["m"], **options)


def _id(entry: dict) -> str:
    return f"{entry['class']}-p{entry['p']}-v{entry['v']}-m{entry['m']}"


BUILT = [e for e in ENTRIES if "order" in e and e["class"] != "Schedule1F1B"]
REFUSED = [e for e in ENTRIES if "error" in e and e["class"] != "Schedule1F1B"]


def test_the_data_covers_the_issue_grid() -> None:
    zb = {(e["p"], e["v"], e["m"]) for e in BUILT if e["class"] == "ScheduleInterleavedZeroBubble"}
    for p in (2, 4, 8):
        for v in (2, 3):
            ms = {m for (pp, vv, m) in zb if (pp, vv) == (p, v)}
            assert len(ms) >= 5 and any(m % p for m in ms), (p, v, sorted(ms))
    assert {e["class"] for e in BUILT} == set(OURS) - {"Schedule1F1B"}
    assert len(BUILT) == 182 and len(REFUSED) == 28


@pytest.mark.parametrize("entry", BUILT, ids=_id)
def test_builder_equals_pytorch_pipeline_order(entry: dict) -> None:
    rows, groups = _theirs(entry)
    sched = _build(entry)
    assert [[str(j) for j in row if j is not None] for row in sched.ranks] == rows
    assert sorted(tuple(map(str, g)) for g in groups_of(sched)) == sorted(groups)
    if entry["class"] == "ScheduleInterleavedZeroBubble" and entry["v"] == 1:  # ZB-H1 is its one-chunk case
        assert [[str(j) for j in row] for row in build_schedule("ZB-H1", entry["p"], entry["m"]).ranks] == rows


def test_zb_h1_builds_the_m_pytorch_refuses_with_the_same_order_as_one_round() -> None:
    """PyTorch refuses ZB with m = 2p + 1 (not a multiple of its 2 rounds); with one chunk the round size
    does not change the order, so ZB-H1 builds it (docs/schedules.md) by the same rule: rank s runs
    min(m, p-1-s) warm-up forwards, then F I pairs with the oldest pending W after each pair from the
    s-th on, then the rest (by hand for p = 2, m = 5)."""
    refused = [e for e in REFUSED if e["class"] == "ScheduleInterleavedZeroBubble" and e["v"] == 1]
    assert {(e["p"], e["m"]) for e in refused} == {(2, 5), (4, 9), (8, 17)}
    sched = build_schedule("ZB-H1", 2, 5)
    assert [" ".join(map(str, row)) for row in sched.ranks] == [
        "0F0 0F1 0I0 0W0 0F2 0I1 0W1 0F3 0I2 0W2 0F4 0I3 0W3 0I4 0W4",
        "1F0 1I0 1F1 1I1 1W0 1F2 1I2 1W1 1F3 1I3 1W2 1F4 1I4 1W3 1W4",
    ]


@pytest.mark.parametrize("entry", REFUSED, ids=_id)
def test_builder_refuses_where_pytorch_refuses(entry: dict) -> None:
    with pytest.raises(ConfigError) as err:
        _build(entry)
    if entry["class"] == "ScheduleDualPipeV":
        assert "m >= 2p" in str(err.value)
    else:  # ZB / interleaved 1F1B: m not a multiple of max(1, m // p) rounds
        assert entry["m"] == 2 * entry["p"] + 1 and "multiple of its number of rounds" in str(err.value)


ONE_F_ONE_B = [e for e in ENTRIES if e["class"] == "Schedule1F1B" and "order" in e]


@pytest.mark.parametrize("entry", ONE_F_ONE_B, ids=_id)
def test_1f1b_equals_pytorch_but_for_its_last_rank_numbering(entry: dict) -> None:
    """``Schedule1F1B._get_pipeline_order`` (the order PyTorch's visualizer draws; its
    ``_step_microbatches`` runs F0 first) numbers the last rank's forwards 1..m: with no
    warm-up forward its ``forward_mb`` is incremented before the first one. Every other
    rank is ours exactly; the last rank is ours with each forward's micro-batch + 1."""
    rows, _ = _theirs(entry)
    p, m = entry["p"], entry["m"]
    ours = [[str(j) for j in row] for row in _build(entry).ranks]
    assert ours[:-1] == rows[:-1]
    shifted = [re.sub(r"F(\d+)$", lambda k: f"F{int(k.group(1)) + 1}", job) for job in ours[-1]]
    assert shifted == rows[-1]
    assert f"{p - 1}F{m}" in rows[-1] and f"{p - 1}F0" not in rows[-1]  # a micro-batch that does not exist


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["class"] == "Schedule1F1B" and "error" in e], ids=_id)
def test_1f1b_with_fewer_microbatches_than_ranks_is_built(entry: dict) -> None:
    """PyTorch refuses m < p for Schedule1F1B; we build it as Megatron-LM does (warm-up min(m, p-s-1))."""
    assert "must be greater than or equal to the number of stages" in entry["error"]
    p, m = entry["p"], entry["m"]
    sched = _build(entry)
    for s, row in enumerate(sched.ranks):
        warmup = min(m, p - s - 1)
        assert [str(j) for j in row[:warmup]] == [f"{s}F{i}" for i in range(warmup)]
        assert len(row) == 2 * m


def test_lowered_orders_read_back_with_their_compute_jobs() -> None:
    """``pipeline_order_with_comms`` (UNSHARD, RESHARD, REDUCE_GRAD, sends and receives included) reads as a schedule
    whose compute jobs are PyTorch's compute-only order."""
    lowered = [e for e in ENTRIES if "comms" in e]
    assert len(lowered) == 3
    for entry in lowered:
        sched = loads_csv("\n".join(entry["comms"]) + "\n", _id(entry), entry["m"])
        rows, _ = _theirs(entry)
        compute = [[str(j) for j in row if j is not None and not j.kind.is_comm and not j.kind.is_data_parallel] for row in sched.ranks]
        assert compute == rows
