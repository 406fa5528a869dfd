"""Generate ``orders.json``: PyTorch's ``pipeline_order`` for the schedules the harness ports.

Run once with PyTorch installed (not a dependency of the harness; tests read the JSON
and never import torch)::

    /work/torchvenv/bin/python tests/data/pytorch/generate_orders.py

Each schedule is constructed the way PyTorch's own tests do it
(``test/distributed/pipelining/test_schedule.py``, ``MockPipelineStage``): stage
objects that carry only ``num_stages``, ``group_size``, ``group_rank`` and
``stage_index``, no process group; the constructor computes the order of every rank.
A construction PyTorch refuses is stored with its exception, so the tests can check
that the harness refuses (or documents why it does not).

Output, one entry per (class, p, v, m):

* ``order``: per rank, the cells of ``pipeline_order`` joined by ``,`` (``""`` for an
  idle slot ``None``; an overlapped pair as ``(0F3;3B1)OVERLAP_F_B``), as in
  PyTorch's CSV;
* ``comms`` (a few entries only): per rank, ``pipeline_order_with_comms`` (the lowered
  form the runtime executes: ``UNSHARD``, ``RESHARD``, ``REDUCE_GRAD`` and
  sends/receives included);
* ``error``: ``"ValueError: ..."`` where PyTorch refuses the construction.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch.distributed.pipelining import schedules
from torch.distributed.pipelining.stage import _PipelineStageBase

OUT = Path(__file__).with_name("orders.json")


class MockStage(_PipelineStageBase):
    """The fields a schedule's constructor reads (PyTorch's ``MockPipelineStage``)."""

    def __init__(self, num_stages: int, group_size: int, stage_index: int = 0, group_rank: int = 0) -> None:
        self.submod = None
        self.num_stages = num_stages
        self.group_size = group_size
        self.group_rank = group_rank
        self.group = None
        self.stage_index_to_group_rank = None
        self.stage_index = stage_index

    # Abstract in _PipelineStageBase; never called while the order is computed.
    def _create_grad_recv_info(self, *args: object, **kwargs: object) -> None:
        return None

    def _prepare_forward_infra(self, *args: object, **kwargs: object) -> None:
        return None

    def _prepare_backward_infra(self, *args: object, **kwargs: object) -> None:
        return None


SINGLE = {"ScheduleGPipe": schedules.ScheduleGPipe, "Schedule1F1B": schedules.Schedule1F1B}
MULTI = {
    "ScheduleInterleaved1F1B": schedules.ScheduleInterleaved1F1B,
    "ScheduleLoopedBFS": schedules.ScheduleLoopedBFS,
    "ScheduleInterleavedZeroBubble": schedules.ScheduleInterleavedZeroBubble,
    "ScheduleZBVZeroBubble": schedules.ScheduleZBVZeroBubble,
    "ScheduleDualPipeV": schedules.ScheduleDualPipeV,
}
#: Entries whose lowered form (``pipeline_order_with_comms``) is stored too.
WITH_COMMS = {("ScheduleInterleavedZeroBubble", 2, 2, 4), ("ScheduleDualPipeV", 2, 2, 4), ("ScheduleInterleaved1F1B", 2, 2, 3)}


def cells(actions: list) -> str:
    return ",".join("" if a is None else str(a) for a in actions)


def entry(name: str, p: int, v: int, m: int) -> dict:
    out: dict = {"class": name, "p": p, "v": v, "m": m}
    try:
        if name in SINGLE:
            sched = SINGLE[name](MockStage(p, p), m)
        else:
            sched = MULTI[name]([MockStage(p * v, p, k) for k in range(v)], m)
    except (ValueError, RuntimeError, AssertionError) as exc:  # PyTorch's refusal, stored as its answer
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    order = sched.pipeline_order
    out["order"] = [cells(order[r]) for r in range(p)]
    if (name, p, v, m) in WITH_COMMS:
        comms = sched.pipeline_order_with_comms
        out["comms"] = [cells(comms[r]) for r in range(p)]
    return out


def main() -> int:
    entries = []
    for p in (2, 4, 8):
        # m < p, m = p, m not a multiple of p, and 2p + 1 (PyTorch refuses it for the interleaved
        # classes: not a multiple of its max(1, m // p) = 2 rounds); 3p as well where p < 8 (small data).
        ms = sorted({1, max(1, p // 2), p - 1, p, p + 1, 2 * p, 2 * p + 1} | ({3 * p} if p < 8 else set()))
        for m in ms:
            for name in SINGLE:
                entries.append(entry(name, p, 1, m))
            for name in ("ScheduleInterleaved1F1B", "ScheduleLoopedBFS", "ScheduleInterleavedZeroBubble"):
                for v in (2, 3):
                    entries.append(entry(name, p, v, m))
            entries.append(entry("ScheduleInterleavedZeroBubble", p, 1, m))
            for name in ("ScheduleZBVZeroBubble", "ScheduleDualPipeV"):
                entries.append(entry(name, p, 2, m))
    data = {"torch": torch.__version__, "generator": "tests/data/pytorch/generate_orders.py", "entries": entries}
    OUT.write_text(json.dumps(data, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(entries)} entries, {sum('error' in e for e in entries)} refused by PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
