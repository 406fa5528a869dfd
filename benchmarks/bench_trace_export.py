"""Trace export against PyTorch's ``_dump_chrometrace``, side by side in one run (issue 13).

Run: ``python benchmarks/bench_trace_export.py [--torch /work/torchvenv/bin/python] [--rounds 5]``.

For 1F1B with p = 32 and m = 256 and 2048, with send/receive jobs, both sides write
the same jobs: ours (:func:`harness.report.trace.write_trace`, with flow events,
sub-slices and per-job args) from the sim run's results-document case; PyTorch's
``_dump_chrometrace`` (``torch.distributed.pipelining.schedules``) from the same
schedule, rank texts turned into ``_Action``s, lowered with ``_add_send_recv`` and
placed with ``_simulate_comms_compute``. PyTorch runs in a subprocess of the given
interpreter (torch is never a dependency of the harness); the rounds alternate between
the two sides and the medians of process CPU time are compared, in events per second.
Both sides write to a temporary file. Nothing is asserted; the figures are printed
(one JSON line per size). Figures on a loaded machine are only comparable within one run.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_TORCH_SIDE = r"""
import json, sys, time, os
from torch.distributed.pipelining.schedules import _Action, _add_send_recv, _simulate_comms_compute, _dump_chrometrace
spec = json.loads(sys.stdin.readline())
p = spec["p"]
compute = {r: [_Action.from_str(t) for t in texts] for r, texts in enumerate(spec["ranks"])}
lowered = _add_send_recv(compute, stage_to_rank=lambda s: s, num_stages=p)
timeline = _simulate_comms_compute(lowered, stage_to_rank=lambda s: s, num_stages=p)
events = sum(a is not None for acts in timeline.values() for a in acts)
path = spec["path"]
print(json.dumps({"events": events}), flush=True)
for line in sys.stdin:
    t = time.process_time()
    _dump_chrometrace(timeline, path)
    dt = time.process_time() - t
    print(json.dumps({"seconds": dt, "bytes": os.path.getsize(path)}), flush=True)
"""


def _case(m: int) -> dict:
    from harness.case import PipelineCase
    from harness.model.cost import FixedCost
    from harness.report.results import case_to_dict
    from harness.runner import run_case

    result = run_case(PipelineCase("1F1B", stages=32, microbatches=m, comm=True, cost=FixedCost.ms(F=1, B=2)), "sim", range(0, 1))
    return case_to_dict(result)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--torch", default="/work/torchvenv/bin/python", help="an interpreter with torch installed")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-m", type=int, action="append", help="micro-batches (default: 256 and 2048)")
    args = ap.parse_args(argv)
    from harness.report.trace import write_trace

    for m in args.m or [256, 2048]:
        case = _case(m)
        with tempfile.TemporaryDirectory() as tmp:
            ours_path = Path(tmp) / "ours.json"
            # PyTorch's input is the compute actions; its _add_send_recv adds the transfers.
            ranks = [[t for t in line if re.fullmatch(r"\d+[FBIW]\d+", t)] for line in case["schedule"]["ranks"]]
            proc = subprocess.Popen([args.torch, "-c", _TORCH_SIDE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                    stderr=subprocess.PIPE)
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps({"p": 32, "ranks": ranks, "path": str(Path(tmp) / "torch.json")}) + "\n")
            proc.stdin.flush()
            torch_events = json.loads(proc.stdout.readline())["events"]
            ours_s, torch_s = [], []
            torch_bytes = 0
            for _ in range(args.rounds):
                t = time.process_time()
                write_trace(ours_path, case)
                ours_s.append(time.process_time() - t)
                proc.stdin.write("go\n")
                proc.stdin.flush()
                got = json.loads(proc.stdout.readline())
                torch_s.append(got["seconds"])
                torch_bytes = got["bytes"]
            proc.stdin.close()
            proc.wait()
            ours_events = len(json.loads(ours_path.read_bytes())["traceEvents"])
            ours_med, torch_med = statistics.median(ours_s), statistics.median(torch_s)
            print(json.dumps({
                "case": f"1F1B p=32 m={m} with comm", "jobs": len(case["jobs"]["kind"]),
                "ours_events": ours_events, "ours_s_median": round(ours_med, 4), "ours_bytes": ours_path.stat().st_size,
                "ours_events_per_s": round(ours_events / ours_med), "ours_jobs_per_s": round(len(case["jobs"]["kind"]) / ours_med),
                "torch_events": torch_events, "torch_s_median": round(torch_med, 4), "torch_bytes": torch_bytes,
                "torch_events_per_s": round(torch_events / torch_med),
                "events_per_s_ratio": round((ours_events / ours_med) / (torch_events / torch_med), 2),
                "jobs_per_s_ratio": round((len(case["jobs"]["kind"]) / ours_med) / (torch_events / torch_med), 2),
            }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
