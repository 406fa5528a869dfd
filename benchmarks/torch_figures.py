"""Figures of the ``torch`` backend (PyTorch's own pipelining runtime), for the docs and the closing note:

    python benchmarks/torch_figures.py [--steps 8] [--pairs 12] [--out torch_figures.json] [--device cpu|cuda]

(it launches its ranks itself through torch's elastic launcher; CPU and gloo unless ``--device cuda``).
It prints and writes:

1. **instrumentation overhead**: the same schedule (1F1B p=2 m=8, F = I = W = 10 ms, 256 KiB
   activations) with the timing hooks on one step of each pair and off on the other (which one
   drawn per pair), median step time of each, and the median of the paired differences; and, in
   this process without any runtime, the cost of one hooked ``PP:`` range around a stage call against
   PyTorch's own ``record_function`` range (profiler off: what every action costs by default);
2. for **1F1B p=2 m=8** and **ZB-V p=2 m=4** (same costs): the torch step (median of the recorded
   steps), the sim of the same schedule under PyTorch's lowering (its executed order: sends,
   receives, each overlap as F then B, an OPT job per stage), the sim of the ideal schedule (the
   case's own, transfers free), how many receives were posted before their send, and the parts of
   the difference: the replay split of
   :mod:`harness.imports.replay` (jobs longer than their cost, host time between jobs, waiting on
   transfers; they add up to measured - replay) and what PyTorch's lowering added per rank
   (:func:`harness.distributed.torch_records.lowering_added`).

Assumptions shown with the figures: the ``timed`` workload (each part sleeps then spins its
cost-model duration; ``dw_builder`` split), gloo on one host, 2 processes of one thread each,
transfers charged nothing by the sims. Nothing here asserts a figure; a shared machine inflates
them (the load average is printed beside them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

MS = 1_000_000


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _case(name: str, m: int) -> Any:
    from harness import FixedCost, PipelineCase

    return PipelineCase(name, stages=2, microbatches=m, chunks=2 if name == "ZB-V" else 1,
                        cost=FixedCost.ms(F=10, B=20, I=10, W=10, activation_bytes=256 * 1024))


def overhead(pairs: int, device: str) -> dict[str, Any]:
    """Figure 1: steps with and without the hooks, interleaved in one run; and the per-range micro-benchmark."""
    from harness.distributed import torch_backend

    case = _case("1F1B", 8)
    low = torch_backend.lower_case(case.compute_schedule(), {})
    out = torch_backend.run(low, case.cost, range(2, 2 + 2 * pairs), "timed", {"device": device}, "overhead", timing="ab")
    steps = [max(col) for col in zip(*out.step_times_ns)]  # per step: the slowest rank's own step
    by: dict[str, list[int]] = {"hooks": [], "none": []}
    for mode, ns in zip(out.step_modes, steps):
        by[mode].append(ns)
    paired = [(steps[k + 1] - steps[k]) * (1 if out.step_modes[k] == "none" else -1) for k in range(0, len(steps) - 1, 2)]
    med = {k: statistics.median(v) for k, v in by.items()}
    return {"schedule": "1F1B p=2 m=8, F=I=W=10 ms", "steps_per_mode": {k: len(v) for k, v in by.items()},
            "median_step_ns": med, "overhead": med["hooks"] / med["none"] - 1,
            "paired_median_ns": statistics.median(paired), "paired_overhead": statistics.median(paired) / med["none"],
            "none_spread": (max(by["none"]) - min(by["none"])) / med["none"], "per_range_ns": per_range()}


def per_range(n: int = 20000) -> dict[str, float]:
    """ns per ``PP:`` range in a tight loop: PyTorch's ``record_function`` (profiler off), the hooks' range
    around a wrapped stage call, the bare call (best of 5 repeats)."""
    import torch
    from torch.distributed.pipelining import schedules
    from torch.profiler import record_function

    from harness.distributed.torch_timing import ActionTimer

    class Stage:
        stage_index = 0
        is_last = False

        def forward_one_chunk(self, mb: int, *a: Any, **k: Any) -> None:
            return None

        backward_one_chunk = backward_weight_one_chunk = forward_one_chunk

    class Sched:
        def _maybe_compute_loss(self, *a: Any) -> None:
            return None

    def best(fn: Any) -> float:
        out = []
        for _ in range(5):
            t = time.perf_counter_ns()
            fn()
            out.append((time.perf_counter_ns() - t) / n)
        return min(out)

    st = Stage()

    def torch_ranges() -> None:
        for _ in range(n):
            with record_function("PP:0F1"):
                st.forward_one_chunk(0)

    def bare() -> None:
        for _ in range(n):
            st.forward_one_chunk(0)

    from torch.profiler import ProfilerActivity, profile

    res = {"record_function_and_call": best(torch_ranges), "bare_call": best(bare)}
    with profile(activities=[ProfilerActivity.CPU]):
        res["record_function_and_call_profiler_on"] = best(torch_ranges)
    with ActionTimer([st], Sched(), torch.device("cpu")) as timer:
        rf = schedules.record_function

        def hooked() -> None:
            timer.begin_step(0)
            for _ in range(n):
                with rf("PP:0F1"):
                    st.forward_one_chunk(0)
            timer.end_step()

        res["hooks_range_and_call"] = best(hooked)
    return {k: round(v, 1) for k, v in res.items()}


def beside(name: str, m: int, steps: int, device: str) -> dict[str, Any]:
    """Figure 2 for one schedule."""
    from harness.distributed import torch_backend
    from harness.imports.replay import replay
    from harness.model import comm
    from harness.plan.build import build_plan
    from harness.plan.timeline import simulate

    case = _case(name, m)
    source = case.compute_schedule()
    low = torch_backend.lower_case(source, {})
    out = torch_backend.run(low, case.cost, range(1, 1 + steps), "timed", {"device": device}, name)
    rec = out.records
    spans = [e - s for s, e in zip(rec.step_start_ns, rec.step_end_ns)]
    ideal = comm.lower(source, case.cost, "stream", None, case.comm_placement)
    rep = replay(out.run, out.run.plan).to_dict()
    want = {"F": 10 * MS, "I": 10 * MS, "W": 10 * MS, "B": 20 * MS}
    excess: dict[str, list[int]] = {}
    for j in rec.jobs:
        if j.kind in want:
            excess.setdefault(j.kind, []).append(j.duration_ns - want[j.kind])
    by = {(a.step, a.stage, a.kind, a.microbatch): a for a in out.run.actions}
    recvs = [a for a in out.run.actions if a.kind in ("RECV_F", "RECV_B")]
    early = sum(1 for a in recvs if (s := by.get((a.step, a.stage - 1 if a.kind == "RECV_F" else a.stage + 1,
                                                    "SEND_F" if a.kind == "RECV_F" else "SEND_B", a.microbatch))) is not None
                and a.end_ns < s.start_ns)
    return {
        "schedule": f"{name} p=2 m={m}, F=I=W=10 ms, 256 KiB",
        "receives_posted_before_their_send": [early, len(recvs)],
        "causality": rec.device["causality"] | {"violations": len(rec.device["causality"]["violations"])},
        "torch_step_ns": {"median": statistics.median(spans), "min": min(spans), "max": max(spans), "steps": len(spans)},
        "sim_torch_lowering_ns": simulate(build_plan(low.schedule), case.cost).makespan_ns,
        "sim_ideal_ns": simulate(build_plan(ideal), case.cost).makespan_ns,
        "replay": {k: rep[k] for k in ("simulated_step_ns", "measured_step_ns", "difference_ns", "jitter_ns", "host_overhead_ns",
                                       "transfer_wait_ns", "unexplained_ns")},
        "job_excess_median_ns": {k: statistics.median(v) for k, v in sorted(excess.items())},
        "lowering_added_per_rank": out.per_rank,
        "clock": rec.device["clock"],
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8, help="recorded steps per schedule (figure 2)")
    ap.add_argument("--pairs", type=int, default=12, help="step pairs of the overhead run (figure 1)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default=None, choices=("overhead", "beside"))
    args = ap.parse_args(argv)
    import torch

    res: dict[str, Any] = {"torch": torch.__version__, "device": args.device, "cores": os.cpu_count(), "load_before": _load()}
    if args.only in (None, "overhead"):
        res["overhead"] = overhead(args.pairs, args.device)
    if args.only in (None, "beside"):
        res["beside"] = [beside("1F1B", 8, args.steps, args.device), beside("ZB-V", 4, args.steps, args.device)]
    res["load_after"] = _load()
    text = json.dumps(res, indent=1, default=str)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
