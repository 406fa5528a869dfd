"""The torch backend under torchrun, 4 ranks: run by tests/test_torch_backend.py as

    torchrun --standalone --nproc-per-node=4 -m pytest tests/torch_ranks/ranks_four.py --backend=torch
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the torch backend needs PyTorch: pip install torch==2.13.0 (the CPU build)")

from harness import FixedCost, PipelineCase  # noqa: E402
from harness.errors import ConfigError  # noqa: E402
from harness.runner import run_case  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "data" / "pytorch"
ENTRY = next(e for e in json.loads((DATA / "torch_executed_orders.json").read_text(encoding="utf-8"))["entries"]
             if e["class"] == "Runtime1F1B")


def test_1f1b_p4_m8_runs_the_order_pytorch_executes() -> None:
    # Runtime1F1B: the order Schedule1F1B._step_microbatches runs, on PyTorch's runtime (tests/data/pytorch)
    case = PipelineCase("1F1B", stages=4, microbatches=8, cost=FixedCost.ms(F=1, B=2, activation_bytes=4096))
    rec = run_case(case, backend="torch", steps=range(1, 2)).records
    assert rec.device["torch"]["executed"] == ENTRY["executed"]
    for r in range(4):
        jobs = sorted((j for j in rec.jobs if j.rank == r and j.kind in ("F", "B")), key=lambda j: j.start_ns)
        assert [j.label for j in jobs] == [a for a in ENTRY["executed"][r] if a.rstrip("0123456789")[-1] in "FB" and "_" not in a]
    causality = rec.device["causality"]
    assert causality["pairs"] == 2 * 3 * 8  # 3 links, F and B, 8 micro-batches
    # a receive's data cannot arrive before its send is posted; on the merged clock only by the two ranks' clock error
    assert all(v["by_ns"] <= 2 * rec.device["clock_bound_ns"] for v in causality["violations"]), causality


def test_a_case_for_another_number_of_ranks_says_the_torchrun_command() -> None:
    case = PipelineCase("1F1B", stages=2, microbatches=4, cost=FixedCost.ms(F=1, B=2))
    with pytest.raises(ConfigError, match=r"p=2 ranks but torchrun started 4 process\(es\); run it with torchrun --standalone "
                                          r"--nproc-per-node=2 -m pytest"):
        run_case(case, backend="torch", steps=range(1, 2))
